"""Sub-agent and background tasks the session launched: what each was asked, its state, what it returned.

Seed 003: a task's lifecycle (pending, running, completed, failed, killed) and whether the parent waits
for it (foreground) or goes on (background) are separate dimensions. The parent needs the task, the
state and the final answer, never the sub-agent's tool noise (that lives in its sidechain file).

Provenance (only what the harness wrote itself creates standing state): a task and its state come only from what the harness wrote in its
own structure: the Task/Agent call's arguments, its result (Claude Code's `toolUseResult` record:
`agentId`, `status`, `backgroundTaskId`), a TaskOutput/KillShell call of the agent's own and the
harness's `<task-notification>` user records or queued inputs. Text a tool printed never changes a
task's state.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..core.model import Message, Origin, Text
from ..core.toolkinds import tool_kind
from .calls import CallRecord, tool_calls
from .provenance import claude_record

PENDING, RUNNING, COMPLETED, FAILED, KILLED = "pending", "running", "completed", "failed", "killed"
STATES = (PENDING, RUNNING, COMPLETED, FAILED, KILLED)
FINISHED = frozenset({COMPLETED, FAILED, KILLED})
AGENT, COMMAND = "agent", "command"
# A result summary is the sub-agent's final answer, capped: the parent keeps what it was told, and
# the full text stays in the log (and the sidechain file).
MAX_RESULT_CHARS = 1500
# Claude Code's status words (toolUseResult.status, TaskOutput's task.status, <status> of a
# notification) mapped onto the lifecycle; "async_launched" is a background start.
STATUS_WORDS = {"pending": PENDING, "queued": PENDING, "running": RUNNING, "async_launched": RUNNING,
                "in_progress": RUNNING, "completed": COMPLETED, "success": COMPLETED, "done": COMPLETED,
                "failed": FAILED, "error": FAILED, "killed": KILLED, "stopped": KILLED,
                "cancelled": KILLED, "canceled": KILLED, "interrupted": KILLED}
# Tools an agent calls to stop a background task (Claude Code: KillShell, later TaskStop).
KILL_TOOLS = frozenset({"KillShell", "KillBash", "TaskStop"})
# Tools that read a background task's state (TaskOutput; older BashOutput).
OUTPUT_TOOLS = frozenset({"TaskOutput", "BashOutput"})
NOTIFICATION_TAG = "<task-notification>"
NOTIFICATION_RE = re.compile(r"<task-notification>(.*?)</task-notification>", re.S)
# Claude Code appends a resume hint and usage to an agent's answer; not part of what it reported.
TRAILER_RE = re.compile(r"\n*agentId: \S+ \(for resuming[^\n]*\)(?:\n<usage>.*?</usage>)?\s*$", re.S)


@dataclass(frozen=True)
class SubagentTask:
    """One task the parent launched: a sub-agent (Task/Agent call) or a background command.

    `task_id` is the harness's id for it (Claude Code's agentId or background task id) when known;
    `background` says whether the parent went on without waiting; `result` is the final answer or
    notification summary, capped."""

    call_id: str
    kind: str
    agent_type: str
    description: str
    prompt: str
    state: str
    background: bool
    message_id: str
    index: int
    task_id: str | None = None
    result: str = ""
    result_message_id: str | None = None
    updated_index: int = -1
    timestamp: str | None = None
    tokens: int | None = None
    tool_uses: int | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


@dataclass(frozen=True)
class TaskUpdate:
    """A state change the harness reported for a task id (a notification or a TaskOutput/KillShell
    call of the agent's own)."""

    task_id: str
    state: str
    summary: str
    message_id: str | None
    index: int


def _state(word: Any, default: str) -> str:
    return STATUS_WORDS.get(str(word).strip().lower(), default) if word is not None else default


def _record(rec: CallRecord) -> Mapping[str, Any] | None:
    """Claude Code's structured `toolUseResult` for this call's result (the harness's own record)."""
    if rec.result_message is None:
        return None
    raw = claude_record(rec.result_message)
    tur = raw.get("toolUseResult") if raw is not None else None
    return tur if isinstance(tur, dict) else None


def _answer(rec: CallRecord, tur: Mapping[str, Any] | None) -> str:
    """The agent's final text: the record's content blocks when kept, else the result without the
    harness's resume trailer."""
    text = ""
    if tur is not None and isinstance(tur.get("content"), list):
        text = "\n".join(str(b.get("text", "")) for b in tur["content"]
                         if isinstance(b, dict) and b.get("type") == "text" and not
                         str(b.get("text", "")).startswith("agentId: "))
    if not text and rec.result is not None:
        text = TRAILER_RE.sub("", rec.result.content)
    return cap(text.strip())


def cap(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _agent_task(rec: CallRecord) -> SubagentTask:
    inp = rec.call.input
    tur = _record(rec)
    background = bool(inp.get("run_in_background"))
    task_id = str(tur["agentId"]) if tur is not None and tur.get("agentId") else None
    if rec.result is None:
        state, result = RUNNING, ""
    elif rec.rejected:
        state, result = KILLED, cap(rec.result.content.strip())
    elif rec.failed:
        state, result = FAILED, cap(rec.result.content.strip())
    else:
        status = tur.get("status") if tur is not None else None
        state = _state(status, COMPLETED)
        background = background or status == "async_launched"
        result = "" if state in (PENDING, RUNNING) else _answer(rec, tur)
    return SubagentTask(
        call_id=rec.call.id, kind=AGENT,
        agent_type=str(inp.get("subagent_type") or inp.get("agent_type") or "general-purpose"),
        description=str(inp.get("description") or ""), prompt=str(inp.get("prompt") or ""),
        state=state, background=background, message_id=rec.message_id, index=rec.index, task_id=task_id,
        result=result, result_message_id=rec.result_message_id,
        updated_index=rec.result_index if rec.result_index is not None else rec.index,
        tokens=_int(tur, "totalTokens"), tool_uses=_int(tur, "totalToolUseCount"))


def _command_task(rec: CallRecord, task_id: str) -> SubagentTask:
    inp = rec.call.input
    return SubagentTask(
        call_id=rec.call.id, kind=COMMAND, agent_type="shell",
        description=str(inp.get("description") or ""), prompt=str(inp.get("command") or ""),
        state=RUNNING, background=True, message_id=rec.message_id, index=rec.index, task_id=task_id,
        result_message_id=rec.result_message_id,
        updated_index=rec.result_index if rec.result_index is not None else rec.index)


def _int(tur: Mapping[str, Any] | None, key: str) -> int | None:
    value = tur.get(key) if tur is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tag(body: str, name: str) -> str | None:
    m = re.search(rf"<{name}>(.*?)</{name}>", body, re.S)
    return m.group(1).strip() if m else None


def notifications(text: str) -> list[tuple[str, str, str]]:
    """(task id, state, summary) of each `<task-notification>` in a harness-written text."""
    out = []
    for body in NOTIFICATION_RE.findall(text):
        task_id = _tag(body, "task-id")
        if not task_id:
            continue
        summary = _tag(body, "result") or _tag(body, "summary") or ""
        out.append((task_id, _state(_tag(body, "status"), COMPLETED), cap(summary)))
    return out


def _harness_text(m: Message) -> str:
    """Text the harness wrote in a user record (not inside a tool result)."""
    if m.role != "user" or m.origin is not Origin.CONVERSATION:
        return ""
    return "\n".join(b.text for b in m.blocks if isinstance(b, Text))


def task_updates(messages: Sequence[Message], records: Sequence[CallRecord],
                 queued: Sequence[tuple[str | None, str]] = ()) -> list[TaskUpdate]:
    """State changes the harness reported, oldest first: notifications in user records and queued
    inputs, the agent's own TaskOutput reads (their structured record) and successful kill calls."""
    out: list[TaskUpdate] = []
    positions = {m.id: i for i, m in enumerate(messages)}
    for i, m in enumerate(messages):
        for task_id, state, summary in notifications(_harness_text(m)):
            out.append(TaskUpdate(task_id, state, summary, m.id, i))
    for after, text in queued:
        where = positions.get(after) if after is not None else -1
        if where is None:
            continue  # queued after a message of another window
        for task_id, state, summary in notifications(text):
            out.append(TaskUpdate(task_id, state, summary, None, where))
    for rec in records:
        if rec.result is None or rec.failed:
            continue
        where = rec.result_index if rec.result_index is not None else rec.index
        if rec.name in OUTPUT_TOOLS:
            task = (_record(rec) or {}).get("task")
            if isinstance(task, dict) and task.get("task_id"):
                out.append(TaskUpdate(str(task["task_id"]), _state(task.get("status"), RUNNING), "",
                                      rec.result_message_id, where))
        elif rec.name in KILL_TOOLS:
            target = rec.call.input.get("shell_id") or rec.call.input.get("task_id")
            if target:
                out.append(TaskUpdate(str(target), KILLED, "", rec.result_message_id, where))
    return sorted(out, key=lambda u: u.index)


def launched(messages: Sequence[Message], records: Sequence[CallRecord] | None = None) -> list[SubagentTask]:
    """Tasks launched in `messages`, in call order, with the state their own call result gives."""
    records = tool_calls(messages) if records is None else records
    out: list[SubagentTask] = []
    for rec in records:
        task: SubagentTask | None = None
        if tool_kind(rec.call) == "agent":
            task = _agent_task(rec)
        else:
            tur = _record(rec)
            bg = tur.get("backgroundTaskId") if tur is not None else None
            if bg and not rec.failed:
                task = _command_task(rec, str(bg))
        if task is not None:
            ts = messages[rec.index].meta.get("timestamp")
            out.append(dataclasses.replace(task, timestamp=ts if isinstance(ts, str) else None))
    return out


def apply_updates(tasks: Mapping[str, SubagentTask], updates: Sequence[TaskUpdate]) -> dict[str, SubagentTask]:
    """Tasks (by call id) with the reported state changes applied in order. A finished task stays
    finished (a late "running" read never revives it); a summary replaces an empty result."""
    out = dict(tasks)
    by_task = {t.task_id: cid for cid, t in out.items() if t.task_id}
    for u in updates:
        cid = by_task.get(u.task_id)
        if cid is None:
            continue
        t = out[cid]
        if u.index < t.updated_index or (t.finished and u.state not in FINISHED):
            continue
        out[cid] = dataclasses.replace(t, state=u.state, result=u.summary or t.result,
                                       result_message_id=u.message_id or t.result_message_id,
                                       updated_index=u.index)
    return out


def may_change_tasks(messages: Sequence[Message]) -> bool:
    """Whether `fold` over `messages` (with no queued inputs) can launch or update a task: a sub-agent
    call, a background task's read or kill, a result the harness recorded as a background task, or a
    harness notification. False is certain; `fold` asks it before folding."""
    for m in messages:
        for c in m.tool_calls:
            if c.name in OUTPUT_TOOLS or c.name in KILL_TOOLS or tool_kind(c) == "agent":
                return True
        if m.tool_results:
            raw = claude_record(m)
            tur = raw.get("toolUseResult") if raw is not None else None
            if isinstance(tur, dict) and tur.get("backgroundTaskId"):
                return True
        if NOTIFICATION_TAG in _harness_text(m):
            return True
    return False


def fold(known: Mapping[str, SubagentTask], messages: Sequence[Message], at: Callable[[int], int],
         queued: Sequence[tuple[str | None, str]] = ()) -> dict[str, SubagentTask]:
    """Merge the tasks and updates of `messages` (a window; `at` maps its indices to transcript
    indices) into `known`, keyed by call id: what the ledger does with each new window. Most windows
    (and most sessions) hold nothing that can launch or update a task: they are looked at, not folded."""
    if not queued and not may_change_tasks(messages):
        return dict(known)
    records = tool_calls(messages)
    out = dict(known)
    for t in launched(messages, records):
        prior = out.get(t.call_id)
        t = dataclasses.replace(t, index=at(t.index), updated_index=at(t.updated_index))
        if prior is not None and prior.finished and not t.finished:
            continue  # a later window that no longer holds the result does not undo it
        out[t.call_id] = t
    updates = [dataclasses.replace(u, index=at(u.index)) for u in task_updates(messages, records, queued)]
    return apply_updates(out, updates)


def subagent_tasks(messages: Sequence[Message],
                   queued: Sequence[tuple[str | None, str]] = ()) -> list[SubagentTask]:
    """Every task the parent launched in `messages`, with its latest reported state, in call order."""
    folded = fold({}, messages, lambda i: i, queued)
    return sorted(folded.values(), key=lambda t: t.index)


__all__ = ["AGENT", "COMMAND", "STATES", "SubagentTask", "TaskUpdate", "apply_updates", "fold", "launched",
           "notifications", "subagent_tasks", "task_updates"]
