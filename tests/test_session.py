"""Session behaviour: prefix stability over a replay, rewind, reopen, idempotence, anchoring."""

from __future__ import annotations

import pytest

from builders import Convo, words
from worksurface import Session, compact
from worksurface.core.model import Message, Text


def _long_session(steps: int = 60, size: int = 3_000) -> Convo:
    c = Convo().system("You are a coding agent.").user("Port the service to async. Don't touch vendor/.")
    for i in range(steps):
        kind = i % 3
        if kind == 0:
            c.tool("Read", {"file_path": f"/repo/mod{i % 7}.py"}, words(size, seed=i))
        elif kind == 1:
            c.tool("Bash", {"command": f"pytest tests/test_{i}.py"}, words(size // 2, seed=i) + f"\n{i} passed")
        else:
            c.tool("Grep", {"pattern": f"async def f{i}"}, words(size // 3, seed=i))
        c.say(f"step {i} done")
        if i % 15 == 14:
            c.user(f"keep going with part {i // 15 + 2}")
    return c


def test_replay_keeps_each_view_an_extension_of_the_previous_except_when_a_stage_fires(tmp_path):
    c = _long_session()
    session = Session.open(tmp_path / "s", window=100_000)
    previous: list[Message] | None = None
    fired_calls = extensions = 0
    for n in range(2, len(c.messages) + 1):
        if c.messages[n - 1].role != "assistant" and n != len(c.messages):
            continue  # a harness calls the model after a user turn or tool result, not mid-turn
        prepared = session.prepare(c.messages[:n], now=1000.0 + n)
        fired = [s.name for s in prepared.report.stages if s.items and not s.skipped]
        view = prepared.messages
        if previous is not None:
            if fired:
                fired_calls += 1
            else:
                assert view[: len(previous)] == previous, f"prefix changed at call {n} with no stage firing"
                extensions += 1
        previous = view
    assert fired_calls >= 1 and extensions > fired_calls


def test_reopening_reproduces_the_view_byte_for_byte(tmp_path):
    c = _long_session(40)
    with Session.open(tmp_path / "s", window=80_000) as s1:
        first = s1.prepare(c.messages, now=5.0).messages
    with Session.open(tmp_path / "s", window=80_000) as s2:
        assert s2.view() == first
        again = s2.prepare(c.messages, now=6.0).messages
    assert again == first
    from worksurface.core.serial import message_to_json
    assert [message_to_json(m) for m in again] == [message_to_json(m) for m in first]


def test_rewind_truncates_the_log_and_drops_decisions_about_removed_messages(tmp_path):
    c = _long_session(40)
    session = Session.open(tmp_path / "s", window=80_000)
    session.prepare(c.messages, now=1.0)
    assert session.edits
    cut = 12
    edited = c.messages[:cut] + [Message("new-user", "user", (Text("actually, stop and explain"),))]
    prepared = session.prepare(edited, now=2.0)
    assert prepared.report.rewound == len(c.messages) - cut
    kept_ids = {m.id for m in edited} | {c.id for m in edited for c in m.tool_calls}
    for e in session.edits:
        assert set(e.refs) <= kept_ids
    conversation = [m for m in prepared.messages if m.origin.value == "conversation"]
    assert conversation[-1].id == "new-user"
    # The status bar starts over after a rewind: one fresh baseline, after the new message.
    status = [m for m in prepared.messages if m.origin.value == "status"]
    assert [m.meta["kind"] for m in status] == ["baseline"] and prepared.messages[-1] is status[0]


def test_prepare_is_idempotent_and_deterministic(tmp_path):
    c = _long_session(40)
    a = compact(c.messages, window=80_000, now=10.0)
    b = compact(c.messages, window=80_000, now=10.0)
    assert a.messages == b.messages
    again = compact(a.messages, window=80_000, now=10.0)
    assert again.messages == a.messages


def test_nothing_is_lost_every_replaced_content_can_be_fetched(tmp_path):
    c = _long_session(40)
    session = Session.open(tmp_path / "s", window=80_000)
    view = session.prepare(c.messages, now=1.0).messages
    shown = {m.id for m in view}
    for original in c.messages:
        if original.id not in shown:
            assert session.original(original.id) == original
    for e in session.edits:
        if getattr(e, "artifact", None):
            assert session.artifact(e.artifact)


def test_usage_anchoring_shifts_the_estimate(tmp_path):
    c = Convo().user("hello")
    c.say("hi")
    session = Session.open(tmp_path / "s", microcompact={"trigger_tokens": 1_000})
    session.prepare(c.messages, now=1.0)
    c.user("more")
    # The provider says the previous view was far larger than our count: the trigger sees that.
    prepared = session.prepare(c.messages, usage=50_000, now=2.0)
    assert prepared.report.view_tokens_before > 50_000


def test_reopening_a_damaged_session_is_refused(tmp_path):
    from worksurface.core.errors import SessionError
    c = _long_session(10)
    with Session.open(tmp_path / "s") as s:
        s.prepare(c.messages, now=1.0)
        s.store.set_meta("view_digest", "0" * 32)  # as if the log or the edits had been altered
    with pytest.raises(SessionError, match="do not rebuild the last view"):
        Session.open(tmp_path / "s")


def test_token_counts_are_persisted_with_the_session(tmp_path):
    c = _long_session(10)
    with Session.open(tmp_path / "s") as s:
        s.prepare(c.messages, now=1.0)
    with Session.open(tmp_path / "s") as again:
        cached = again.store.token_cache()
        assert all(m.digest in cached for m in c.messages)
        again.prepare(c.messages, now=2.0)
        # Only worksurface's own new messages (this call's status) were encoded, no transcript message.
        assert again.counter.encoded < 5 < len(c.messages)


def test_calls_left_without_a_result_by_a_crash_are_closed_on_recovery(tmp_path):
    from worksurface.core.model import Origin, ToolCall
    from worksurface.core.view import pairing_problems
    c = Convo().user("deploy it")
    c.messages.append(Message("a-crash", "assistant", (ToolCall("lost", "Bash", {"command": "make deploy"}),)))
    c.user("the harness restarted; where were we?")
    c.messages.append(Message("a-last", "assistant", (ToolCall("pending", "Bash", {"command": "git status"}),)))
    view = Session.open(tmp_path / "s").prepare(c.messages).messages
    recovery = [m for m in view if m.origin is Origin.RECOVERY]
    assert [r.call_id for m in recovery for r in m.tool_results] == ["lost"]
    assert view.index(recovery[0]) == [m.id for m in view].index("a-crash") + 1
    assert recovery[0].tool_results[0].is_error and "interrupted" in recovery[0].tool_results[0].content
    assert pairing_problems(view) == ["tool call pending has no result"]  # the final turn is left alone


def test_the_check_after_status_only_edits_still_catches_a_duplicate_id():
    from worksurface.core.edits import Insert
    from worksurface.core.model import Origin
    from worksurface.session.outputcheck import OutputChecks
    from worksurface.session.session import InvariantError

    m = Message("m1", "user", (Text("hi"),))
    status = Message("status-2-1", "user", (Text("<agent-status>cwd: /r</agent-status>"),), Origin.STATUS,
                     {"epoch": 2, "seq": 1})
    edit = Insert("status", "m1", (status,))
    checks = OutputChecks()
    checks.check([m], [m, status], [edit], False)  # valid: nothing raised
    with pytest.raises(InvariantError, match="appears twice"):
        checks.check([m], [m, status, status], [edit], False)  # extends the view checked before
    again = Message("m1", "user", (Text("hi again"),))
    with pytest.raises(InvariantError, match="appears twice"):
        OutputChecks().check([m], [m, again, status], [edit], False)  # a fresh check reads the whole view


def test_a_harness_appending_to_the_view_it_got_does_not_change_the_next_view():
    """The view `prepare` returns is the caller's list: appending the model's reply to it and sending
    the transcript with that reply gives the reply once, as a fresh session would show it."""
    c = Convo().system("s").user("hello")
    c.say("hi")
    c.user("do it")
    reply = Message("x1", "assistant", (Text("on it"),))
    with Session.open(None) as session:
        got = session.prepare(c.messages).messages
        got.append(reply)
        after = [m.id for m in session.prepare(c.messages + [reply]).messages]
    with Session.open(None) as fresh:
        fresh.prepare(c.messages)
        expected = [m.id for m in fresh.prepare(c.messages + [reply]).messages]
    assert after == expected and after.count("x1") == 1
