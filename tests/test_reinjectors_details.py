"""The details reinjector: what the summary had no room for, packed into what the target leaves, never
repeating what the view shows; task texts of issues still open, verbatim, and never of closed ones."""

from __future__ import annotations

from builders import Convo
from worksurface import compact
from worksurface.core.model import message_text
from worksurface.core.tokens import TokenCounter

COUNTER = TokenCounter()


def _session() -> Convo:
    c = Convo()
    c.user("Implement p-1 and p-2. Never edit vendor/.")
    c.tool("Bash", {"command": "bd show p-1; echo ===; bd show p-2"},
           "○ p-1 · Done part   [● P2 · OPEN]\nTechnical specs:\n- Old spec detail OLDSPECMARK.\n===\n"
           "○ p-2 · Open part   [● P2 · OPEN]\nTechnical specs:\n- The hook prints additionalContext JSON.\n"
           "- Add module ReviewContextBuilder.\n")
    c.tool("Bash", {"command": "bd close p-1"}, "✓ Closed p-1: Closed")
    for n in range(30):
        c.tool("Write", {"file_path": f"/repo/lib/mod_{n}.ex", "content": f"defmodule Mod{n} do\nend\n"},
               "File created successfully")
        c.tool("Bash", {"command": f"mix tool{n} --opt{n}"}, f"ok {n} " + "y " * 150)
    c.say("Now the next part.")
    return c


def _details(prepared):
    return [m for m in prepared.messages if m.meta.get("reinjector") == "details"]


def test_details_fill_the_room_with_items_the_summary_dropped_and_repeat_nothing():
    prepared = compact(_session().messages, force=True, post_compact_target_tokens=12_000)
    (msg,) = _details(prepared)
    text = message_text(msg)
    summary = next(message_text(m) for m in prepared.messages if m.origin.value == "summary")
    items = text.split("## Task texts")[0]  # a task text is verbatim, whatever the summary quoted of it
    lines = [ln for ln in items.splitlines() if ln.startswith("- ")]
    assert "## Task texts" in text
    assert not any(ln in summary for ln in lines)  # nothing the summary already says
    # The open issue's task text comes back verbatim; the closed one's does not.
    assert "Add module ReviewContextBuilder." in text
    assert "OLDSPECMARK" not in text


def test_details_stay_within_the_target_and_are_skipped_without_room():
    small = compact(_session().messages, force=True, post_compact_target_tokens=1_500)
    assert not _details(small)
    big = compact(_session().messages, force=True, post_compact_target_tokens=12_000)
    report = next(r for r in big.report.reinjected if r.name == "details")
    assert report.tokens_after > report.tokens_before
    assert COUNTER.messages(big.messages) <= 12_000


def test_a_plan_the_summary_quotes_whole_is_restored_as_its_state_only():
    c = Convo()
    c.user("Plan the renderer change first.")
    plan = "# Plan: Enrich the renderer\n\n- Step one: add render/2.\n- Step two: keep render/1."
    c.tool("ExitPlanMode", {"plan": plan}, "User has approved your plan. You can now start coding.")
    for n in range(6):  # output enough that the compaction frees room for the plan's state (it never grows the view)
        c.tool("Bash", {"command": f"mix test t{n}.exs"}, f"{n} tests, 0 failures " + "z " * 1_000)
    prepared = compact(c.messages, force=True, post_compact_target_tokens=12_000)
    summary = next(message_text(m) for m in prepared.messages if m.origin.value == "summary")
    assert "- Step two: keep render/1." in summary
    (restored,) = [message_text(m) for m in prepared.messages if m.meta.get("reinjector") == "plan"]
    assert restored.startswith("<plan>\nApproved plan")
    assert "# Plan: Enrich the renderer" in restored and "Step two" not in restored
