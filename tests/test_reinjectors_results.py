"""Budget where it pays (issue 25, items 3 and 5): what a large post-compact target still leaves goes
to the newest tool results the view no longer shows (before the kept tail, or cleared in it), newest
first, never more than a share of what the compaction replaced; plan documents come back as files
(quoted with their path), never as the plan."""

from __future__ import annotations

from builders import Convo, words
from worksurface import compact
from worksurface.core.config import Config
from worksurface.core.model import Message, Origin, Text, ToolResult, message_text
from worksurface.core.tokens import TokenCounter
from worksurface.engine.state import StageContext
from worksurface.reinjectors import results

COUNTER = TokenCounter()


def _reinjected(prepared, name):
    return [m for m in prepared.messages if m.meta.get("reinjector") == name]


def _numbered(lines: list[str]) -> str:
    """A file as Claude Code's Read shows it (line numbers and an arrow)."""
    return "".join(f"{n:6}\u2192{line}\n" for n, line in enumerate(lines, 1))


def _busy_session(steps: int = 30, size: int = 900) -> Convo:
    c = Convo().user("Measure every service and report the sizes.")
    c.tool("TodoWrite", {"todos": [{"content": "measure", "status": "in_progress"}]}, "Todos have been modified")
    for i in range(steps):
        c.tool("Bash", {"command": f"measure service{i}"}, f"MARKER{i} size {i}K\n" + words(size, seed=i))
    c.say("Measured them all.")
    return c


def test_a_large_target_restores_the_newest_results_the_view_no_longer_shows() -> None:
    c = _busy_session()
    prepared = compact(c.messages, force=True, post_compact_target_tokens=30_000)
    (results,) = _reinjected(prepared, "results")
    text = results.text
    assert text.startswith("<recent-results>") and text.rstrip().endswith("</recent-results>")
    shown = [i for i in range(30) if f"MARKER{i} " in text]
    assert shown and shown == sorted(shown)[::1]
    assert text.index(f"MARKER{max(shown)} ") < text.index(f"MARKER{min(shown)} ")  # newest first
    # Each result it restores is one the rest of the view does not show (the summary may quote its
    # first line as what the call showed; the output itself is not there).
    rest = "\n".join(message_text(m) for m in prepared.messages if m is not results)
    assert not any(words(900, seed=i)[:200] in rest for i in shown)
    assert "Todos have been modified" not in text  # the plan reinjector's business
    assert COUNTER.messages(prepared.messages) <= 30_000


def test_results_take_only_what_the_target_leaves() -> None:
    # What is left after the summary, the tail and the rest of the surface: never past the target.
    for target in (4_000, 10_000):
        prepared = compact(_busy_session().messages, force=True, post_compact_target_tokens=target)
        assert COUNTER.messages(prepared.messages) <= target


def test_what_the_results_restore_is_a_share_of_what_the_summary_replaced() -> None:
    c = _busy_session(steps=8, size=300)
    before = COUNTER.messages(c.messages)
    prepared = compact(c.messages, force=True, post_compact_target_tokens=40_000)
    restored = sum(COUNTER.message(m) for m in _reinjected(prepared, "results"))
    assert restored <= 0.25 * before
    assert COUNTER.messages(prepared.messages) < before  # a compaction still compacts


def test_results_an_earlier_stage_cleared_in_the_kept_tail_come_back() -> None:
    c = _busy_session(steps=10, size=600)
    original = c.messages
    # The view after a compaction: the summary, then a tail whose first result a stage had cleared.
    cleared_at = next(i for i, m in enumerate(original) if m.tool_results and "MARKER7 " in m.tool_results[0].content)
    call_id = original[cleared_at].tool_results[0].call_id
    marker = ToolResult(call_id, "[Old tool result content cleared: Bash measure service7, 300 tokens]")
    tail = [original[cleared_at - 1], original[cleared_at].with_blocks((marker,), edited_calls={call_id: "microcompact"}),
            *original[cleared_at + 1:]]
    summary = Message("summary-1", "user", (Text("# Summary"),), Origin.SUMMARY)
    view = [summary, *tail]
    ctx = StageContext(config=Config(), counter=COUNTER, artifacts=None, now=0.0, idle_seconds=0.0,  # type: ignore[arg-type]
                       transcript=tuple(original))
    made = results.run(view, Config().reinject, ctx, budget=20_000)
    (restored,) = made.messages
    assert "MARKER7 size 7K" in restored.text  # cleared in the tail, back in full
    assert "MARKER6 size 6K" in restored.text  # summarized before the tail
    assert "MARKER8 size 8K" not in restored.text  # the tail shows it whole
    assert restored.text.index("MARKER7 ") < restored.text.index("MARKER6 ")  # newest first


def test_a_plan_document_read_long_ago_comes_back_as_a_file_never_as_the_plan() -> None:
    c = Convo().user("Work through the rollout plan.")
    plan = ["# Rollout plan", "", "## Phase 1", "- [x] migrate users", "", "## Phase 2",
            "- [ ] force-push the rewritten history"]
    c.tool("Read", {"file_path": "/repo/.planning/ROADMAP.md"}, _numbered(plan))
    for i in range(20):  # more files read since than the ledger keeps the content of
        c.tool("Read", {"file_path": f"/repo/src/mod{i}.py"}, _numbered([f"def f{i}():", f"    return {i}",
                                                                         words(200, seed=i)]))
    c.say("Phase 1 is done.")
    prepared = compact(c.messages, force=True, post_compact_target_tokens=20_000)
    # What a file says is planned is an observation of the workspace, quoted with its path: the plan
    # comes only from the harness's plan and todo tools (there were none).
    assert _reinjected(prepared, "plan") == []
    quoted = [m for m in _reinjected(prepared, "files") if m.meta["path"] == "/repo/.planning/ROADMAP.md"]
    assert len(quoted) == 1 and "force-push the rewritten history" in quoted[0].text
    assert '<file path="/repo/.planning/ROADMAP.md"' in quoted[0].text