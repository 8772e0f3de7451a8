"""`safe_cuts` answers for every cut point of a view in one pass what the set definition of a safe cut
says point by point, on views with parallel calls, orphan results, results before their call and
ids used twice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.core.view import is_safe_cut, safe_cuts

IDS = ["a", "b", "c", "d"]


def _by_sets(view: list[Message], index: int) -> bool:
    """A cut splits a call from its result when a call before it is answered at or after it."""
    if index <= 0 or index >= len(view):
        return True
    before_calls = {c.id for m in view[:index] for c in m.tool_calls}
    after_results = {r.call_id for m in view[index:] for r in m.tool_results}
    return not (before_calls & after_results)


@st.composite
def views(draw) -> list[Message]:
    out = []
    for i in range(draw(st.integers(0, 14))):
        if draw(st.booleans()):
            calls = tuple(ToolCall(c, "Bash", {"command": "ls"}) for c in draw(st.lists(st.sampled_from(IDS), max_size=3)))
            out.append(Message(f"m{i}", "assistant", (Text("step"),) + calls))
        else:
            results = tuple(ToolResult(c, "ok") for c in draw(st.lists(st.sampled_from(IDS), max_size=3)))
            out.append(Message(f"m{i}", "user", results or (Text("go on"),)))
    return out


@settings(max_examples=400, deadline=None)
@given(view=views())
def test_every_cut_is_judged_as_the_set_definition_judges_it(view):
    safe = safe_cuts(view)
    assert len(safe) == len(view) + 1
    assert safe == [_by_sets(view, k) for k in range(len(view) + 1)]
    assert [is_safe_cut(view, k) for k in range(-1, len(view) + 2)] == [_by_sets(view, k) for k in range(-1, len(view) + 2)]


def test_a_parallel_call_answered_late_keeps_the_cuts_between_unsafe():
    view = [Message("u", "user", (Text("go"),)),
            Message("a1", "assistant", (ToolCall("x", "Bash", {}), ToolCall("y", "Bash", {}))),
            Message("r1", "user", (ToolResult("x", "ok"),)),
            Message("a2", "assistant", (Text("waiting"),)),
            Message("r2", "user", (ToolResult("y", "ok"),)),
            Message("a3", "assistant", (Text("done"),))]
    assert safe_cuts(view) == [True, True, False, False, False, True, True]
