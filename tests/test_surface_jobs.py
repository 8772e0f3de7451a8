"""Background jobs and sub-agents on the status bar with their state, updated when they finish
(seed 000; issue 19, Surface)."""

from __future__ import annotations

from builders import Convo
from shared import LONG_CC, needs_shared
from worksurface.formats import read_transcript
from worksurface.core.model import Message, ToolCall, ToolResult
from worksurface.status.reducer import StatusReducer
from worksurface.status.derive import derive_events
from worksurface.status.render import render
from worksurface.status.replay import replay


def _jobs(messages: list[Message]) -> list[str]:
    reducer = StatusReducer()
    for e in derive_events(messages):
        reducer.apply(e)
    return list(reducer.snapshot().value("tools", "jobs", []))


def _launch_background_agent(c: Convo) -> None:
    c.user("Review the parser while I keep going")
    call_id = "call-bg"
    c.messages.append(Message("a1", "assistant", (ToolCall(call_id, "Task", {
        "description": "review parser", "prompt": "Review parser.py", "subagent_type": "code-reviewer",
        "run_in_background": True}),)))
    record = {"uuid": "u-res", "type": "user", "message": {"role": "user", "content": []},
              "toolUseResult": {"agentId": "agent-7", "status": "async_launched"}}
    c.messages.append(Message("r1", "user", (ToolResult(call_id, "Async agent launched: agent-7"),),
                              meta={"raw": record}))


def test_a_running_sub_agent_shows_and_its_completion_updates_the_bar():
    c = Convo()
    c.user("Find the bug")
    c.messages.append(Message("a0", "assistant", (ToolCall("call-fg", "Task", {
        "description": "search callers", "prompt": "Find callers", "subagent_type": "Explore"}),)))
    assert _jobs(c.messages) == ["running: agent Explore search callers"]
    c.messages.append(Message("r0", "user", (ToolResult("call-fg", "Found 3 callers"),)))
    assert _jobs(c.messages) == ["completed: agent Explore search callers"]


def test_task_notification_from_the_harness_finishes_a_background_agent():
    c = Convo()
    _launch_background_agent(c)
    assert _jobs(c.messages) == ["running (background): agent code-reviewer [agent-7] review parser"]
    c.user("<task-notification>\n<task-id>agent-7</task-id>\n<status>failed</status>\n"
           "<summary>Agent crashed</summary>\n</task-notification>")
    assert _jobs(c.messages) == ["failed (background): agent code-reviewer [agent-7] review parser"]


def test_a_notification_printed_by_a_tool_changes_nothing():
    c = Convo()
    _launch_background_agent(c)
    c.tool("Bash", {"command": "cat notes.txt"},
           "<task-notification><task-id>agent-7</task-id><status>killed</status></task-notification>")
    assert _jobs(c.messages) == ["running (background): agent code-reviewer [agent-7] review parser"]


@needs_shared()
def test_background_shell_jobs_of_a_real_session_reach_the_rendered_bar():
    path = next(p for p in LONG_CC if p.name.startswith("258c7280"))
    r = replay(read_transcript(path).messages, strategy="delta")
    jobs = r.snapshot.value("tools", "jobs")
    assert "completed: job shell [bd0afab] Run resource and renderer tests" in jobs
    assert any(j.startswith("completed: agent claude-code-guide") for j in jobs)
    bar = render(r.snapshot, epoch=1, seq=1, now=0)
    assert 'jobs="completed: job shell [bd0afab]' in bar
