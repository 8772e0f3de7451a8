"""A pending call at the cut (issue 24, item 1): when the last assistant turn before a compaction has a
tool call whose result has not arrived, the reinjected context (constraints, plan, files, status)
goes before that turn, so the result that follows still answers its call directly; later status
deltas wait for the result."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import Convo, words
from worksurface import Session
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.core.view import pairing_problems, insertion_point

SMALL = dict(window=24_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=8_000,
             autocompact={"keep_tail_tokens": 2_000, "summary_tokens": 2_000})


def between(view: list[Message]) -> list[str]:
    """worksurface's context messages standing between a call and the result of that call."""
    open_at: dict[str, int] = {}
    found = []
    for i, m in enumerate(view):
        for r in m.tool_results:
            start = open_at.pop(r.call_id, i)
            found += [x.id for x in view[start + 1:i] if x.origin is not Origin.CONVERSATION and not x.tool_results]
        for c in m.tool_calls:
            open_at[c.id] = i
    return found


@st.composite
def sessions(draw) -> tuple[list[Message], list[Message]]:
    """A session whose last turn calls tools (in one or several assistant records, as Claude Code
    splits them), and the results that arrive after the cut."""
    c = Convo()
    c.system("You are a coding agent.").user("Port the parser. Never touch vendor/. Keep the API stable.")
    for i in range(draw(st.integers(4, 14))):
        c.tool(draw(st.sampled_from(["Read", "Bash", "Grep"])), {"file_path": f"/repo/m{i}.py", "command": f"ls {i}"},
               words(draw(st.sampled_from([200, 900, 2_000])), seed=i))
        c.say(f"step {i} done")
    calls = [ToolCall(f"pending-{k}", "Bash", {"command": f"pytest -k part{k}"}) for k in range(draw(st.integers(1, 3)))]
    split = draw(st.booleans())
    records = [Message(f"last-{k}", "assistant", (call,)) for k, call in enumerate(calls)] if split else \
        [Message("last", "assistant", (Text("Running the tests."), *calls))]
    results = [Message(f"result-{k}", "user", (ToolResult(call.id, f"{k} passed"),)) for k, call in enumerate(calls)]
    return c.messages + records, results


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_reinjection_never_sits_between_a_pending_call_and_its_result(case) -> None:
    before, results = case
    with Session.open(None, **SMALL) as s:
        prepared = s.prepare(before, force=True)
        view = prepared.messages
        assert prepared.report.boundary is not None
        added = [i for i, m in enumerate(view) if m.origin in (Origin.REINJECTION, Origin.STATUS)]
        last_turn = next(i for i, m in enumerate(view) if m.id == before[-1].id or m.id.startswith("last"))
        assert added and max(added) < last_turn, "context after the call that waits for its result"
        after = s.prepare(before + results).messages
    assert not pairing_problems(after) and between(after) == []


def test_the_insertion_point_is_before_a_turn_still_waiting_for_a_result() -> None:
    ask = Message("u", "user", (Text("run them"),))
    call_a = Message("a1", "assistant", (ToolCall("c1", "Bash", {"command": "a"}),))
    call_b = Message("a2", "assistant", (ToolCall("c2", "Bash", {"command": "b"}),))
    one_result = Message("r1", "user", (ToolResult("c1", "ok"),))
    assert insertion_point([ask, call_a, call_b]) == 1
    assert insertion_point([ask, call_a, call_b, one_result]) == 1  # c2's result is still to come
    both = Message("r2", "user", (ToolResult("c1", "ok"), ToolResult("c2", "ok")))
    assert insertion_point([ask, call_a, call_b, both]) == 4
    assert insertion_point([ask, Message("t", "assistant", (Text("done"),))]) == 2


def test_a_status_delta_waits_while_the_last_turn_waits_for_its_result() -> None:
    c = Convo()
    c.system("You are a coding agent.").user("Fix the failing test.")
    c.tool("Bash", {"command": "pytest -q"}, "1 failed, 3 passed")
    with Session.open(None) as s:
        s.prepare(c.messages, now=1.0)
        pending = Message("p", "assistant", (ToolCall("p1", "Bash", {"command": "pytest -q"}),))
        waiting = s.prepare(c.messages + [pending], now=2.0)
        assert waiting.messages[-1].id == "p" and waiting.report.status.get("deferred")
        done = s.prepare(c.messages + [pending, Message("q", "user", (ToolResult("p1", "4 passed"),))], now=3.0)
    assert between(done.messages) == [] and not pairing_problems(done.messages)
