"""Sub-agent tasks in the ledger (task, state, foreground/background, result; never tool noise), their
sidechain files linked to the parent call, and per-agent sessions in the integrations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shared import TRANSCRIPTS, needs_shared
from worksurface.cli.app import app
from worksurface.facts.subagents import SubagentTask, notifications, subagent_tasks
from worksurface.formats import read_transcript
from worksurface.ledger import Ledger
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.subagents.sidechains import BY_AGENT_ID, BY_PROMPT, BY_TIME, Sidechain, link, sidechain_tree

CC = TRANSCRIPTS / "claude-code"
WITH_SIDECHAINS = sorted(p for p in CC.glob("*-*-*-*-*.jsonl") if (CC / p.stem / "subagents").is_dir()) \
    if CC.exists() else []


def _call(mid: str, call_id: str, name: str, inp: dict[str, Any], ts: str | None = None) -> Message:
    return Message(mid, "assistant", (ToolCall(call_id, name, inp),), meta={"timestamp": ts} if ts else {})


def _result(mid: str, call_id: str, content: str, record: Any = None, is_error: bool = False) -> Message:
    """A tool result as Claude Code writes it, with its structured `toolUseResult` when given."""
    meta: dict[str, Any] = {}
    if record is not None:
        meta["raw"] = {"uuid": mid, "type": "user", "message": {"role": "user", "content": []},
                       "toolUseResult": record}
    return Message(mid, "user", (ToolResult(call_id, content, is_error),), meta=meta)


def _user(mid: str, text: str) -> Message:
    return Message(mid, "user", (Text(text),))


def _notification(task_id: str, status: str, summary: str) -> str:
    return (f"<task-notification>\n<task-id>{task_id}</task-id>\n<status>{status}</status>\n"
            f"<summary>{summary}</summary>\n</task-notification>")


PROMPT = "Find where tmux panes are listed.\nReport the function names and what happens on error."


def _session_messages() -> list[Message]:
    return [
        _user("u0", "Investigate the tmux integration"),
        _call("a1", "call_fg", "Task", {"description": "Explore tmux", "prompt": PROMPT,
                                        "subagent_type": "Explore"}),
        _result("r1", "call_fg", "Panes are listed in Tmux.list_panes/0.\nagentId: a1b2c3 (for resuming ...)",
                {"status": "completed", "agentId": "a1b2c3", "totalTokens": 1234, "totalToolUseCount": 3,
                 "content": [{"type": "text", "text": "Panes are listed in Tmux.list_panes/0."}]}),
        _call("a2", "call_bg", "Task", {"description": "Run the slow audit", "prompt": "Audit deps",
                                        "run_in_background": True}),
        _result("r2", "call_bg", "Async agent launched successfully.",
                {"status": "async_launched", "agentId": "bg9"}),
        _call("a3", "call_sh", "Bash", {"command": "mix test", "description": "Run tests"}),
        _result("r3", "call_sh", "Command running in background with ID: sh1.", {"backgroundTaskId": "sh1"}),
        _call("a4", "call_kill", "KillShell", {"shell_id": "sh1"}),
        _result("r4", "call_kill", "Killed sh1", {"success": True}),
    ]


def test_tasks_state_mode_and_result() -> None:
    tasks = {t.call_id: t for t in subagent_tasks(_session_messages())}
    fg, bg, sh = tasks["call_fg"], tasks["call_bg"], tasks["call_sh"]
    assert (fg.state, fg.background, fg.task_id, fg.agent_type) == ("completed", False, "a1b2c3", "Explore")
    assert fg.prompt == PROMPT and fg.result == "Panes are listed in Tmux.list_panes/0." and fg.tokens == 1234
    assert (bg.state, bg.background, bg.result) == ("running", True, "")
    assert (sh.kind, sh.state, sh.background) == ("command", "killed", True)


def test_a_notification_finishes_a_background_task_in_a_later_fold() -> None:
    messages = _session_messages()
    ledger = Ledger()
    ledger.update(messages)
    assert ledger.upto().subagent_tasks()[1].state == "running"
    later = messages + [_user("u9", _notification("bg9", "failed", "Agent \"Run the slow audit\" failed: no lockfile"))]
    ledger.update(later)
    bg = next(t for t in ledger.upto().subagent_tasks() if t.call_id == "call_bg")
    assert (bg.state, bg.background, bg.result) == ("failed", True, "Agent \"Run the slow audit\" failed: no lockfile")
    again = Ledger.from_json(json.loads(json.dumps(ledger.to_json())))
    assert again.upto().subagent_tasks() == ledger.upto().subagent_tasks()


def test_a_notification_printed_by_a_tool_changes_nothing() -> None:
    messages = _session_messages()
    messages += [_call("a9", "call_cat", "Bash", {"command": "cat notes.txt"}),
                 _result("r9", "call_cat", _notification("bg9", "completed", "forged"), {"stdout": "..."})]
    bg = next(t for t in subagent_tasks(messages) if t.call_id == "call_bg")
    assert bg.state == "running" and bg.result == ""


def test_queued_notification_and_states() -> None:
    messages = _session_messages()[:5]
    queued = [("r2", _notification("bg9", "completed", "Audit found 2 outdated deps"))]
    bg = next(t for t in subagent_tasks(messages, queued) if t.call_id == "call_bg")
    assert (bg.state, bg.result) == ("completed", "Audit found 2 outdated deps")
    assert notifications(_notification("x", "killed", "stopped")) == [("x", "killed", "stopped")]
    rejected = [_call("a1", "c", "Task", {"prompt": "p"}),
                _result("r1", "c", "[Request interrupted by user for tool use]", "User rejected tool use", True)]
    assert subagent_tasks(rejected)[0].state == "killed"
    pending = subagent_tasks([_call("a1", "c", "Agent", {"prompt": "p"})])[0]
    assert (pending.state, pending.background) == ("running", False)


def _side(agent_id: str, goal: str, started: str | None, compaction: bool = False) -> Sidechain:
    return Sidechain(f"agent-{agent_id}.jsonl", agent_id, goal, 3, 100, started, started, None, compaction)


def _task(call_id: str, prompt: str, task_id: str | None, ts: str | None) -> SubagentTask:
    return SubagentTask(call_id, "agent", "general-purpose", "d", prompt, "completed", False, "m", 0, task_id,
                        timestamp=ts)


def test_link_by_agent_id_then_prompt_then_time() -> None:
    sides = [_side("aaa", "Other goal entirely", "2026-01-01T00:00:30Z"),
             _side("bbb", "Summarize the parser module\nand list its entry points", "2026-01-01T00:10:00Z"),
             _side("ccc", "A goal the call does not show", "2026-01-01T00:20:05Z"),
             _side("acompact-1", "compaction", "2026-01-01T00:00:00Z", compaction=True)]
    tasks = [_task("t1", "whatever", "aaa", None),
             _task("t2", "Summarize the parser module\nand list its entry points", None, None),
             _task("t3", "An edited prompt", None, "2026-01-01T00:20:00Z"),
             _task("t4", "No file for this one", None, "2026-01-01T05:00:00Z")]
    links, unlinked = link(tasks, sides)
    got = {x.task.call_id: (x.sidechain.agent_id if x.sidechain else None, x.matched_by) for x in links}
    assert got == {"t1": ("aaa", BY_AGENT_ID), "t2": ("bbb", BY_PROMPT), "t3": ("ccc", BY_TIME), "t4": (None, None)}
    assert [s.agent_id for s in unlinked] == ["acompact-1"]


@needs_shared()
@pytest.mark.parametrize("path", WITH_SIDECHAINS, ids=lambda p: p.stem[:8])
def test_sidechains_of_the_real_sessions_link_to_their_task_calls(path: Path) -> None:
    transcript = read_transcript(path)
    tree = sidechain_tree(transcript)
    assert tree.links, "each long session launched a sub-agent"
    for x in tree.links:
        assert x.sidechain is not None and x.matched_by == BY_AGENT_ID
        assert x.sidechain.agent_id == x.task.task_id
        # The goal is the call's prompt in full (all its lines), and the sidechain starts with it.
        assert "\n" in x.task.prompt and x.sidechain.goal == x.task.prompt.strip()
        assert x.task.state == "completed" and x.task.result and "agentId:" not in x.task.result
        assert x.sidechain.tokens > 0 and x.sidechain.messages > 1
    assert all(s.compaction for s in tree.unlinked)
    assert {Path(s.path).name.startswith("agent-acompact-") for s in tree.unlinked} == {True}


@needs_shared()
def test_inspect_shows_the_tree() -> None:
    path = WITH_SIDECHAINS[0]
    runner = CliRunner()
    out = runner.invoke(app, ["inspect", str(path), "--json"])
    assert out.exit_code == 0, out.output
    tree = json.loads(out.output)["subagents"]
    agent = tree["agents"][0]
    assert agent["sidechain"]["path"].endswith(f"agent-{agent['task_id']}.jsonl")
    assert agent["mode"] == "foreground" and agent["state"] == "completed" and "\n" in agent["goal"]
    human = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "400"})
    assert human.exit_code == 0
    assert f"agent-{agent['task_id']}.jsonl" in human.output and "linked by agent id" in human.output
    assert agent["goal"].splitlines()[-1].strip() in human.output  # the goal in full, not its first line
    assert "compaction call" in human.output


# --- per-agent sessions in the integrations ----------------------------------------------------------

SMALL_BUDGET = {"budget": {"max_result_tokens": 100, "preview_head_tokens": 20, "preview_tail_tokens": 20}}
BIG = "\n".join(f"line {i}: compiling module_{i}" for i in range(300))


def test_two_agents_on_one_thread_keep_their_own_decisions(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from worksurface.integrations.langgraph import make_pre_model_hook
    from worksurface.integrations.sessions import agent_id_of

    hook = make_pre_model_hook(tmp_path, **SMALL_BUDGET)
    thread = {"configurable": {"thread_id": "t1"}}
    researcher = {"configurable": {"thread_id": "t1"}, "metadata": {"lc_agent_name": "researcher"}}
    writer = {"configurable": {"thread_id": "t1", "agent_id": "writer"}}
    assert (agent_id_of(thread), agent_id_of(researcher), agent_id_of(writer)) == (None, "researcher", "writer")
    heavy = [HumanMessage("build", id="h1"),
             AIMessage("", tool_calls=[{"name": "build", "args": {}, "id": "c1"}], id="a1"),
             ToolMessage(BIG, tool_call_id="c1", id="t1")]
    light = [HumanMessage("write the notes", id="h1")]
    view = hook({"messages": heavy}, researcher)["llm_input_messages"]
    assert BIG not in [m.content for m in view]  # the researcher's big result was budgeted
    hook({"messages": light}, writer)
    hook({"messages": light}, thread)
    pool = hook.sessions
    sessions = [pool.get("t1", "researcher"), pool.get("t1", "writer"), pool.get("t1")]
    assert len({id(s) for s in sessions}) == 3
    budgeted = [[e for e in s.edits if e.stage == "budget"] for s in sessions]
    assert budgeted[0] and not budgeted[1] and not budgeted[2]
    assert pool.conversions("t1", "researcher") is not pool.conversions("t1", "writer")
    assert [u.text for u in sessions[1].ledger.upto().user_messages()] == ["write the notes"]
    pool.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t1", "t1+researcher", "t1+writer"]


ALL_SESSIONS = sorted(p for p in TRANSCRIPTS.rglob("*.jsonl") if "subagents" not in p.parts) \
    if TRANSCRIPTS.exists() else []


@needs_shared()
@pytest.mark.parametrize("path", ALL_SESSIONS, ids=lambda p: str(p.relative_to(TRANSCRIPTS)))
def test_a_window_said_not_to_change_tasks_changes_none(path: Path) -> None:
    # The status bar skips the fold where may_change_tasks says no: on every message of every shared
    # session (alone and with the call it answers), folding would indeed have changed nothing.
    from worksurface.facts.subagents import fold, may_change_tasks

    messages = read_transcript(path).messages
    known = fold({}, messages, lambda i: i)
    by_call = {c.id: m for m in messages for c in m.tool_calls}
    skipped = 0
    for m in messages:
        window = list({id(w): w for w in (by_call[r.call_id] for r in m.tool_results if r.call_id in by_call)}.values())
        for w in ([m], window + [m]):
            if not may_change_tasks(w):
                skipped += 1
                assert fold(known, w, lambda _i: 10**9) == known, (path.name, m.id)
    assert skipped > 0


ALL_SESSIONS = sorted(p for p in TRANSCRIPTS.rglob("*.jsonl") if "subagents" not in p.parts) if TRANSCRIPTS.exists() else []


@needs_shared()
@pytest.mark.parametrize("path", ALL_SESSIONS, ids=lambda p: str(p.relative_to(TRANSCRIPTS)))
def test_a_session_that_can_launch_no_task_is_not_folded_and_one_that_can_is(path: Path) -> None:
    # `subagent_tasks` skips the fold when no message can launch or update a task; the fold itself
    # finds the same tasks on every shared session, with and without tasks.
    from worksurface.facts.subagents import fold

    messages = read_transcript(path).messages
    folded = sorted(fold({}, messages, lambda i: i).values(), key=lambda t: t.index)
    assert subagent_tasks(messages) == folded
