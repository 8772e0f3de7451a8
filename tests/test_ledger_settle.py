"""The ledger folds on demand: a call on which no stage fires only has the status bar read the new
messages; the fold runs when something reads the records (a compaction, a report, a fork, closing a
stored session), and ends where folding every call would have."""

from __future__ import annotations

import json
from pathlib import Path

from builders import Convo, read_and_test_rounds
from replaying import before_each_assistant, replay_all
from notices import worksurface_notices
from worksurface import Session
from worksurface.core.errors import SessionError
from worksurface.core.model import Message, Text, Thinking, ToolCall, ToolResult
from worksurface.ledger import Ledger
from worksurface.status import derive_events, reduce


def _work(rounds: int) -> Convo:
    return read_and_test_rounds(rounds, "Port the parser to the new API. Never touch vendor/.", read_words=80)


def _state(ledger: Ledger) -> str:
    """Every record and counter; not the file tracker's note of which calls the last window replayed
    (bookkeeping of the window, not a fact)."""
    data = ledger.to_json()
    data["file_tracker"].pop("fed")
    return json.dumps(data, sort_keys=True)


_calls = before_each_assistant  # where a harness calls the model: before each assistant message, and at the end


def _replay(session: Session, messages: list[Message]) -> None:
    replay_all(session, messages, _calls(messages))


def test_calls_on_which_nothing_fires_fold_nothing_and_a_read_folds_what_every_call_would_have() -> None:
    c = _work(12)
    eager = Ledger()  # folded on every call, as before the fold waited for a reader
    for n in _calls(c.messages):
        eager.update(c.messages[:n])
        eager.settle()
    with Session.open(None) as session:  # the default window: nothing fires on this session
        _replay(session, c.messages)
        assert session.ledger.pending and session.ledger.folded == 0
        assert session.status_bar.derived.seen == len(c.messages)  # the bar read every message sent
        assert _state(session.ledger) == _state(eager) == _state(Ledger.over(c.messages))
        assert not session.ledger.pending


def test_a_compaction_reads_the_ledger_of_every_message_before_it() -> None:
    c = _work(30)
    with Session.open(None, window=20_000, post_compact_target_tokens=6_000) as session:
        prepared = session.compact(c.messages, now=1.0)
        assert session.ledger.folded == len(c.messages) and not session.ledger.pending
    assert "Never touch vendor/" in "\n".join(m.text for m in prepared.messages)


def test_closing_a_stored_session_saves_the_ledger_it_read(tmp_path: Path) -> None:
    c = _work(10)
    with Session.open(tmp_path / "s") as session:
        _replay(session, c.messages)
        assert session.ledger.pending
    with Session.open(tmp_path / "s") as again:
        assert not again.ledger.pending
        assert _state(again.ledger) == _state(Ledger.over(c.messages))


def test_a_second_writer_keeps_its_ledger_when_an_older_session_object_closes(tmp_path: Path) -> None:
    c = _work(8)
    older = Session.open(tmp_path / "s")
    older.prepare(c.messages[:6], now=1.0)
    with Session.open(tmp_path / "s") as newer:
        newer.prepare(c.messages, now=2.0)
    older.close()  # another process committed since: its ledger is the store's, not overwritten
    with Session.open(tmp_path / "s") as again:
        assert again.ledger.folded == len(c.messages)


def test_a_rewind_of_the_log_that_only_recovery_made_keeps_the_status_reading_and_the_fold() -> None:
    c = _work(4)
    open_call = Message("a-open", "assistant", (ToolCall("call-open", "Bash", {"command": "pytest -q"}),))
    result = Message("u-open", "user", (ToolResult("call-open", "1 failed, 4 passed in 0.2s", True),))
    with Session.open(None) as session:
        session.prepare([*c.messages, open_call], now=1.0)  # recovery closes the open call in the view
        session.ledger.settle()
        resets = session.status_bar.derived.resets
        session.prepare([*c.messages, open_call, result], now=2.0)  # the log rewinds the repaired call
        assert session.status_bar.derived.resets == resets  # the old rebuild started the bar over
        assert [r.failed for r in session.ledger.upto().test_runs()][-1:] == [1]
        assert _state(session.ledger) == _state(Ledger.over([*c.messages, open_call, result]))


def test_an_edit_in_the_middle_of_history_is_seen_though_the_last_message_is_the_same() -> None:
    c = _work(3)
    ledger = Ledger()
    ledger.update(c.messages)
    ledger.settle()
    edited = list(c.messages)
    edited[0] = Message(edited[0].id, "user", (Text("Port the parser to the new API. Always use tabs."),))
    ledger.update(edited)
    said = [k.text for k in ledger.upto().standing_constraints()]
    assert any("tabs" in t for t in said) and not any("vendor" in t for t in said)
    assert _state(ledger) == _state(Ledger.over(edited))


def test_the_status_bar_reads_each_message_once_however_the_ledger_folds() -> None:
    c = _work(6)
    with Session.open(None) as session:
        _replay(session, c.messages)
        snapshot = session.status_bar.derived.reducer.snapshot()
    assert snapshot == reduce(derive_events(c.messages))


def test_a_failed_save_at_close_is_a_notice_and_the_next_session_folds_again(tmp_path: Path) -> None:
    c = _work(6)
    session = Session.open(tmp_path / "s")
    _replay(session, c.messages)

    def full_disk(key: str, value: object) -> None:
        raise SessionError(f"{session.store.location}: cannot write the session (database or disk is full)")

    session.store.set_meta = full_disk  # type: ignore[method-assign]
    with worksurface_notices() as notices:
        session.close()
    assert any("not brought up to date at close" in n and "disk is full" in n for n in notices)
    with Session.open(tmp_path / "s") as again:
        assert again.ledger.folded == 0  # the store kept its last save, nothing half-written
        again.prepare(c.messages, now=99.0)
        assert _state(again.ledger) == _state(Ledger.over(c.messages))


def test_a_list_the_caller_keeps_appending_to_is_folded_as_it_was_read() -> None:
    c = _work(3)
    messages = list(c.messages)
    ledger = Ledger()
    ledger.update(messages)
    messages.append(Message("late", "user", (Text("Also never push to main."),)))  # after the read
    assert not any("push" in k.text for k in ledger.upto().standing_constraints())
    ledger.update(messages)
    assert any("push" in k.text for k in ledger.upto().standing_constraints())


def test_closing_while_another_session_object_holds_the_lock_does_not_wait_for_it(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    import time

    import worksurface.session.session as session_module
    monkeypatch.setattr(session_module, "CLOSE_LOCK_SECONDS", 0.2)
    c = _work(4)
    session = Session.open(tmp_path / "s")
    _replay(session, c.messages)
    with Session.open(tmp_path / "s") as other, other.store.lock(), worksurface_notices() as notices:
        started = time.monotonic()
        session.close()
        waited = time.monotonic() - started
    # It gave up after its own short wait, not the 30 s a call waits for the lock.
    assert waited < 20 and any("not brought up to date at close" in n and "locked" in n for n in notices)


def test_a_message_recovery_removed_stays_excluded_once_the_harness_compacted_past_it() -> None:
    c = Convo().user("Rename the helper in utils.py")
    c.messages.append(Message("t1", "assistant", (Thinking("rename helper to assist", signature="sig"),)))
    c.user("go on")
    c.tool("Read", {"file_path": "utils.py"}, "def helper(): pass")
    with Session.open(None) as session:
        session.prepare(c.messages, now=1.0)
        assert "t1" in session.status_bar.derived.skip  # removed whole: the bar does not read it
        resets = session.status_bar.derived.resets
        c.messages.append(Message("b1", "system", (Text("Conversation compacted"),), meta={"compact_boundary": True}))
        c.user("Summary of the earlier work: the helper is renamed.")
        c.tool("Bash", {"command": "pytest -q"}, "3 passed in 0.1s")
        session.prepare(c.messages, now=2.0)  # the live part now starts after t1
        assert "t1" in session.status_bar.derived.skip
        assert session.status_bar.derived.resets == resets  # not read again from the first message
