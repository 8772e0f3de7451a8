"""The surface ledger: update rules per record kind, supersession, idempotence, persistence, and
compaction as a state migration (facts survive repeated compactions; worksurface's own output is
never read back as facts)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import Convo, words
from replaying import after_each_assistant, replay_calls
from worksurface import Session, compact
from worksurface.ledger import Ledger
from worksurface.core.model import Message, Origin, Text
from worksurface.summarizers.sections import TITLE


def _session() -> Convo:
    c = Convo()
    c.user("Add retries to the HTTP client. Never touch the vendored code under vendor/.")
    c.tool("Read", {"file_path": "/repo/client.py"}, "     1\tdef get(url):\n     2\t    return http(url)\n")
    c.tool("Edit", {"file_path": "/repo/client.py", "old_string": "    return http(url)",
                    "new_string": "    return retry(http, url, attempts=RETRY_ATTEMPTS)"}, "The file was updated.")
    c.tool("Bash", {"command": "pytest tests/test_client.py"}, "E   ImportError: cannot import name 'retry'\n"
           "1 failed in 0.20s", is_error=True)
    c.tool("Edit", {"file_path": "/repo/client.py", "old_string": "def get(url):",
                    "new_string": "from .retry import retry\n\ndef get(url):"}, "The file was updated.")
    c.tool("Bash", {"command": "pytest tests/test_client.py"}, "3 passed in 0.31s")
    c.tool("TodoWrite", {"todos": [{"content": "add retries", "status": "completed", "activeForm": "x"},
                                   {"content": "document retries", "status": "in_progress", "activeForm": "y"}]},
           "Todos have been modified successfully.")
    c.say("Retries are in; the tests pass.")
    return c


# Tests of repeated compactions keep microcompact out of the way (a small window scales its trigger
# down, and clearing alone would keep the view under the threshold).
NO_MICROCOMPACT = {"trigger_tokens": 10**6}
# ... and budgeting of single results too: only autocompact reduces, so it fires again and again.
REPEATED = dict(window=12_000, post_compact_target_tokens=4_000, microcompact=NO_MICROCOMPACT,
                budget={"max_result_tokens": 10**6, "max_turn_tokens": 10**6})


def _fold_one_by_one(messages: list[Message]) -> Ledger:
    """Each message read and folded on its own (as if every call read the ledger)."""
    ledger = Ledger()
    for n in range(1, len(messages) + 1):
        ledger.update(messages[:n])
        ledger.settle()
    return ledger


def _fold_at_once(messages: list[Message]) -> Ledger:
    ledger = Ledger()
    ledger.update(messages)
    return ledger


def _state(ledger: Ledger) -> dict:
    """The ledger's records, without the fold's own bookkeeping (which calls the last window held)."""
    data = ledger.to_json()
    data["file_tracker"] = {k: v for k, v in data["file_tracker"].items() if k != "fed"}
    return data


def test_each_kind_of_record_is_folded_in():
    ledger = _fold_one_by_one(_session().messages)
    view = ledger.upto()
    assert [u.text for u in view.user_messages()][0].startswith("Add retries to the HTTP client")
    assert any("vendor" in c.text for c in view.standing_constraints())
    files = {f.path: f for f in view.file_activity()}
    assert files["/repo/client.py"].actions >= {"read", "edited"}
    runs = view.test_runs()
    assert runs and runs[-1].summary.startswith("3 passed")
    todo = view.todo_state()
    assert todo is not None and [it.status for it in todo.items] == ["completed", "in_progress"]
    gists = [e.gist for e in view.recent_edits(5)]
    assert any("RETRY_ATTEMPTS" in g for g in gists)


def test_an_error_is_resolved_by_a_later_success_across_calls():
    """The failing run and the passing run arrive on different prepares: still resolved."""
    ledger = _fold_one_by_one(_session().messages)
    errors = ledger.upto().tool_errors()
    assert errors and all(e.resolved for e in errors)


def test_a_newer_todo_list_supersedes_the_older_one():
    c = _session()
    c.tool("TodoWrite", {"todos": [{"content": "document retries", "status": "completed", "activeForm": "y"}]},
           "Todos have been modified successfully.")
    todo = _fold_one_by_one(c.messages).upto().todo_state()
    assert todo is not None and [(it.text, it.status) for it in todo.items] == [("document retries", "completed")]


def test_folding_message_by_message_equals_folding_at_once():
    messages = _session().messages
    assert _state(_fold_one_by_one(messages)) == _state(_fold_at_once(messages))


def test_the_same_messages_twice_change_nothing():
    messages = _session().messages
    ledger = _fold_at_once(messages)
    before = json.dumps(ledger.to_json(), sort_keys=True)
    ledger.update(messages)
    ledger.update(list(messages))
    assert json.dumps(ledger.to_json(), sort_keys=True) == before


def test_a_rewound_transcript_is_folded_again():
    messages = _session().messages
    ledger = _fold_at_once(messages)
    ledger.update(messages[:3])  # the harness rewound to before the edits
    assert ledger.count == 3
    assert not ledger.upto().test_runs()


def test_json_round_trip_keeps_every_record():
    ledger = _fold_one_by_one(_session().messages)
    data = json.loads(json.dumps(ledger.to_json()))
    again = Ledger.from_json(data)
    assert again.to_json() == ledger.to_json()
    assert again.upto().file_activity() == ledger.upto().file_activity()


def test_worksurface_own_messages_are_not_read_as_facts():
    c = _session()
    forged = Message("status-9-1", "user", (Text("<agent-status>Never deploy on Fridays.</agent-status>"),),
                     Origin.STATUS, {"epoch": 9, "seq": 1})
    ledger = _fold_at_once([*c.messages, forged])
    assert not any("Fridays" in x.text for x in ledger.upto().standing_constraints())


def test_the_session_persists_the_ledger_and_reopens_with_it(tmp_path):
    messages = _session().messages
    with Session.open(tmp_path / "s") as session:
        session.prepare(messages, now=1.0)
        saved = session.ledger.to_json()
        files = session.ledger.records.kind("files")
    assert files  # rebuilt from the stored file tracker on reopen, not stored themselves
    with Session.open(tmp_path / "s") as again:
        assert again.ledger.to_json() == saved and again.ledger.records.kind("files") == files
        again.prepare(messages, now=2.0)  # nothing new: the ledger does not change
        assert again.ledger.to_json() == saved and again.ledger.records.kind("files") == files


def _long_convo(rounds: int, seed: int = 0) -> Convo:
    c = Convo()
    c.user("Port the parser to the new API. Do not change the public function names.")
    for i in range(rounds):
        c.tool("Read", {"file_path": f"/repo/part{i}.py"}, words(1_200, seed=seed + i))
        c.tool("Edit", {"file_path": f"/repo/mod{i % 5}.py", "old_string": f"old_{i}",
                        "new_string": f"new_name_{i} = compute_{i}()"}, "ok")
        if i % 6 == 5:
            c.tool("Bash", {"command": "pytest -q"}, f"{i} passed in 0.5s")
        if i % 10 == 9:
            c.user(f"Also keep the changelog for part {i}.")
        c.say(f"round {i} done")
    return c


def _replay_each_call(session: Session, messages: list[Message]) -> tuple[Any, int]:
    """One prepare before each assistant turn: (the last prepared view, compactions made)."""
    compactions = 0
    prepared = None
    for _, prepared in replay_calls(session, messages, after_each_assistant(messages)):
        compactions += prepared.report.boundary is not None
    return prepared, compactions


def test_facts_survive_many_compactions_in_one_session():
    """Ten compactions later the first request, the rule and the earliest edit are still there."""
    c = _long_convo(60)
    session = Session.open(None, **REPEATED)
    prepared, compactions = _replay_each_call(session, c.messages)
    view_text = "\n".join(m.text for m in prepared.messages)
    assert compactions >= 5
    assert "Port the parser to the new API" in view_text
    assert "Do not change the public function names" in view_text


@pytest.mark.parametrize("fmt", ["claude-code", "openai", "anthropic"])
def test_compacting_worksurface_output_again_works_in_every_writable_format(fmt, tmp_path):
    from worksurface.formats import Transcript, dumps, loads

    c = _long_convo(30)
    first = compact(c.messages, force=True, post_compact_target_tokens=6_000)
    text = dumps(Transcript(first.messages, fmt), first.messages, fmt)
    again = loads(text, fmt)
    second = compact(again.messages, force=True, post_compact_target_tokens=6_000)
    ids = [m.id for m in second.messages]
    assert len(ids) == len(set(ids))
    summaries = [m for m in second.messages if m.origin is Origin.SUMMARY]
    assert summaries and TITLE in summaries[-1].text
    # The earlier summary stood for history this file no longer has: what it quoted is carried on.
    assert "Port the parser to the new API" in "\n".join(m.text for m in second.messages)


def test_a_view_fed_back_to_the_session_keeps_working():
    c = _long_convo(30)
    session = Session.open(None, window=20_000, post_compact_target_tokens=6_000)
    prepared = session.compact(c.messages, now=1.0)
    fed_back = [*prepared.messages, Message("next-user", "user", (Text("Now run the linter."),))]
    again = session.prepare(fed_back, now=2.0)
    ids = [m.id for m in again.messages]
    assert len(ids) == len(set(ids)) and ids[-1] in ("next-user",) or any(i == "next-user" for i in ids)
    third = session.compact(fed_back, now=3.0)
    assert "Port the parser to the new API" in "\n".join(m.text for m in third.messages)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=1, max_value=6), st.booleans()), min_size=1, max_size=8))
def test_any_batching_of_the_messages_gives_the_same_ledger(steps):
    """However the harness batches its calls, and whenever something reads the ledger in between (its
    fold then covers what was read so far), the ledger ends the same (the fold is order-preserving and
    keyed)."""
    messages = _session().messages
    ledger, n = Ledger(), 0
    for step, read in steps:
        n = min(len(messages), n + step)
        ledger.update(messages[:n])
        if read:
            ledger.settle()
    ledger.update(messages)
    assert _state(ledger) == _state(_fold_at_once(messages))


def test_repeated_compactions_say_so_in_the_view():
    c = _long_convo(60)
    session = Session.open(None, **REPEATED)
    boundaries = []
    for _, prepared in replay_calls(session, c.messages, after_each_assistant(c.messages)):
        if prepared.report.boundary:
            boundaries.append(prepared.report.boundary)
            summary = next(m for m in prepared.messages if m.origin is Origin.SUMMARY)
            count = prepared.report.boundary["compactions"]
            assert (f"compacted {count} times" in summary.text) == (count >= 2)
    assert [b["compactions"] for b in boundaries] == list(range(1, len(boundaries) + 1))


def test_the_agents_findings_survive_repeated_compactions():
    """A conclusion stated once, early, is a ledger record: later summaries render it although the
    message that said it was summarized away compactions ago."""
    c = _long_convo(60)
    c.messages.insert(3, Message("finding-1", "assistant", (Text(
        "The root cause is the stale lockfile in the vendored parser, not the new API."),), Origin.CONVERSATION))
    session = Session.open(None, **REPEATED)
    prepared, compactions = _replay_each_call(session, c.messages)
    assert compactions >= 5
    assert "stale lockfile in the vendored parser" in "\n".join(m.text for m in prepared.messages)
    assert any("stale lockfile" in f.text for f in session.ledger.upto().findings())


def test_a_first_fold_of_a_long_transcript_reads_every_error():
    """A whole transcript folded at once (a one-shot compaction) misses no error, however far back."""
    c = _session()
    for i in range(100):
        c.tool("Bash", {"command": f"make step{i}"}, f"step {i} ok")
    messages = c.messages
    once = [e.line for e in _fold_at_once(messages).upto().tool_errors()]
    assert "E   ImportError: cannot import name 'retry'" in once
    assert once == [e.line for e in _fold_one_by_one(messages).upto().tool_errors()]


def test_what_the_latest_calls_showed_is_kept_by_call_and_read_back_newest_first():
    c = _session()
    c.tool("Bash", {"command": "du -sh .git"}, "784K\t.git")
    view = _fold_one_by_one(c.messages).upto()
    outcomes = view.recent_outcomes(5)
    assert outcomes[0].label == "Bash du -sh .git" and outcomes[0].gist == "784K .git"
    assert [o.call_id for o in outcomes] == [o.call_id for o in _fold_at_once(c.messages).upto().recent_outcomes(5)]


def test_the_file_tracker_saves_through_its_own_interface():
    """The ledger writes the tracker a file at a time (`head_json` + `file_json` for the paths whose
    `file_marks` changed): together they are `to_json`, a mark moves exactly when a call touches its
    file, and a tracker loaded back keeps tracking (a later edit applies to the restored lines)."""
    from worksurface.facts.filetracker import FileTracker

    c = Convo().user("Tidy the client.")
    c.tool("Read", {"file_path": "/repo/client.py"}, "     1\tdef get(url):\n     2\t    return http(url)\n")
    c.tool("Read", {"file_path": "/repo/util.py"}, "     1\tX = 1\n")
    tracker = FileTracker()
    tracker.feed(c.messages, range(len(c.messages)), 0)
    whole = tracker.to_json()
    assert {"files": {p: tracker.file_json(p) for p in tracker.file_marks()}, **tracker.head_json()} == whole
    assert set(whole["files"]) == {"/repo/client.py", "/repo/util.py"}

    marks, fed = tracker.file_marks(), len(c.messages)
    saved = FileTracker.from_json(json.loads(json.dumps(whole)))
    assert saved.to_json() == whole and saved.facts() == tracker.facts()
    c.tool("Edit", {"file_path": "/repo/client.py", "old_string": "    return http(url)",
                    "new_string": "    return retry(http, url)"}, "The file was updated.")
    for t in (tracker, saved):
        t.feed(c.messages, range(len(c.messages)), fed)
    moved = {p for p, mark in tracker.file_marks().items() if marks[p] != mark}
    assert moved == {"/repo/client.py"}
    assert saved.to_json() == tracker.to_json()
    client = next(f for f in saved.facts() if f.path == "/repo/client.py")
    assert "retry(http, url)" in (client.content or "")
