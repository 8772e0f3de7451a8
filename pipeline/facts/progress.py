"""Where the work stands: test runs (summary lines verbatim), the todo list, plan mode, and commits.

Test output is read by the one parser in testsummary.py (the status bar uses the same one); the
summary line is kept exactly as printed. Todo lists come from todos.py, tracker updates from tracker.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.model import Message
from ..core.toolkinds import normalize_name, tool_kind
from .calls import CallRecord, tool_calls
from ..core.memo import per_message_list
from .git import COMMIT_RE
from .meta import message_branch
from .testsummary import TestRunWatcher, parse_test_output
from .provenance import converted_outputs, harness_tool, reminders_by_message
from .text import one_line
from .todos import TodoItem, TodoReplayer
from .tracker import TRACKER_UPDATE_RE, TrackerUpdate, tracker_updates

__all__ = ["Commit", "PlanMode", "TestRun", "TodoItem", "TodoState", "TrackerUpdate", "TRACKER_UPDATE_RE",
           "commits", "parse_test_summary", "plan_mode", "test_runs", "todo_state", "tracker_updates"]
# Claude Code's plan-mode reminder and the approval result naming the saved plan file.
PLAN_MODE_REMINDER = "plan mode is active"
PLAN_SAVED_RE = re.compile(r"saved to: (\S+)")

@dataclass(frozen=True)
class TestRun:
    """One test run: the command, its summary line verbatim, and the counts read from it."""

    __test__ = False  # not a pytest test class, despite the name

    command: str
    summary: str
    framework: str
    passed: int | None
    failed: int | None
    message_id: str
    index: int
    skipped: int = 0
    failing: tuple[str, ...] = ()  # failing test names, as the status bar shows them

    @property
    def ok(self) -> bool:
        return self.failed == 0


@dataclass(frozen=True)
class TodoState:
    """The latest todo list or plan the agent wrote with a todo/plan tool."""

    items: tuple[TodoItem, ...]
    tool: str
    message_id: str
    index: int


@dataclass(frozen=True)
class PlanMode:
    """Plan mode: on or off, and the last plan proposed or approved (with the file it was saved to)."""

    active: bool
    plan: str | None
    plan_path: str | None
    approved: bool
    message_id: str | None


@dataclass(frozen=True)
class Commit:
    hash: str
    branch: str | None
    subject: str
    pushed: bool
    message_id: str
    index: int


def parse_test_summary(output: str) -> tuple[str, str, int | None, int | None] | None:
    """(framework, summary line, passed, failed) of the last test summary in an output, or None.
    The one parser (testsummary.parse_test_output) in the shape the summary has always used."""
    found = parse_test_output(output)
    if found is None:
        return None
    return found.runner, found.summary, found.passed, found.failed


@per_message_list
def test_runs(messages: Sequence[Message]) -> list[TestRun]:
    """Every test run the transcript shows, oldest first, with the command that produced it: only
    outputs of test commands (or files they wrote) count, never a summary some other output shows."""
    watcher = TestRunWatcher()
    out: list[TestRun] = []
    for rec in tool_calls(messages):
        if rec.result is None:
            continue
        seen = watcher.observe(rec.call, rec.output)
        if seen is None:
            continue
        command, found = seen
        out.append(TestRun(command, found.summary, found.runner, found.passed, found.failed,
                           rec.result_message_id or rec.message_id,
                           rec.result_index if rec.result_index is not None else rec.index,
                           found.skipped, found.failing))
    return out


def todo_state(messages: Sequence[Message]) -> TodoState | None:
    """The latest todo list (TodoWrite `todos`, update_plan `plan`, OpenHands `task_list`), or None.

    Claude Code's TaskCreate/TaskUpdate tools build the list one item at a time; they are replayed."""
    latest: TodoState | None = None
    replay = TodoReplayer()
    for rec in tool_calls(messages):
        if rec.result is None or rec.failed:
            continue
        items = replay.observe(rec.name, rec.call.input, rec.output)
        if items is not None:
            latest = TodoState(items, rec.name, rec.message_id, rec.index)
    return latest


def plan_mode(messages: Sequence[Message]) -> PlanMode:
    """Whether plan mode is on at the end of the messages, and the latest plan (proposed or approved)."""
    active, approved = False, False
    plan: str | None = None
    path: str | None = None
    where: str | None = None
    outputs = converted_outputs(messages)
    said_by_harness = reminders_by_message(messages)
    events: list[tuple[int, int, Any]] = [
        (i, 0, m) for i, m in enumerate(messages)
        if i not in outputs and any(PLAN_MODE_REMINDER in r.lower() for r in said_by_harness[i])]
    events += [(rec.index, 1, rec) for rec in tool_calls(messages)
               if normalize_name(rec.name) in ("enterplanmode", "exitplanmode")]
    for _, order, item in sorted(events, key=lambda e: (e[0], e[1])):
        if order == 0:
            active, where = True, item.id
            continue
        rec: CallRecord = item
        if rec.result is None or rec.failed:
            if normalize_name(rec.name) == "exitplanmode" and isinstance(rec.call.input.get("plan"), str):
                plan, where = rec.call.input["plan"], rec.message_id  # proposed, not approved
            continue
        if normalize_name(rec.name) == "enterplanmode":
            active, approved, where = True, False, rec.message_id
            continue
        if isinstance(rec.call.input.get("plan"), str):
            plan, where = rec.call.input["plan"], rec.message_id
        if "approved" in rec.output.lower():
            active, approved = False, True
            saved = PLAN_SAVED_RE.search(rec.output)
            path = saved.group(1) if saved else path
    return PlanMode(active, plan, path, approved, where)


# `git push` output: `   05fd186..a230dbf  br -> br` (a range) or ` * [new branch]      br -> br`.
PUSH_RANGE_RE = re.compile(r"^\s*\+?\s*[0-9a-f]{7,40}\.{2,3}([0-9a-f]{7,40})\s+(\S+) -> (\S+)", re.M)
PUSH_NEW_RE = re.compile(r"^\s*\* \[new branch\]\s+(\S+) -> (\S+)", re.M)
# A literal each of these patterns cannot match without: an output without it is not scanned for it
# (most outputs are neither a commit's nor a push's).
GIT_LITERALS: dict[re.Pattern[str], str] = {COMMIT_RE: "] ", PUSH_RANGE_RE: " -> ", PUSH_NEW_RE: "* [new branch]"}


def may_match(pattern: re.Pattern[str], text: str, literals: dict[re.Pattern[str], str] = GIT_LITERALS) -> bool:
    """False when `text` lacks the literal `pattern` needs (`literals`), so it cannot match."""
    return literals[pattern] in text


def commits(messages: Sequence[Message]) -> list[Commit]:
    """Commits the agent made (from `git commit` output), oldest first; `pushed` when a later push
    of their branch reached them."""
    made: list[Commit] = []
    pushes: list[tuple[int, str | None, str]] = []  # (index, pushed head hash or None = whole branch, branch)
    for rec in tool_calls(messages):
        if rec.result is None or rec.failed or (tool_kind(rec.call) != "shell" or not harness_tool(rec.call)):
            continue
        branch = message_branch(messages[rec.index])
        output = rec.output
        if may_match(COMMIT_RE, output):
            for m in COMMIT_RE.finditer(output):
                made.append(Commit(m.group(2), m.group(1) or branch, one_line(m.group(3), 160), False,
                                   rec.result_message_id or rec.message_id, rec.index))
        if may_match(PUSH_RANGE_RE, output):
            pushes += [(rec.index, m.group(1), m.group(2)) for m in PUSH_RANGE_RE.finditer(output)]
        if may_match(PUSH_NEW_RE, output):
            pushes += [(rec.index, None, m.group(1)) for m in PUSH_NEW_RE.finditer(output)]

    def reached(c: Commit, head: str | None) -> bool:
        if head is None:
            return True
        return any(d.index >= c.index and (d.hash.startswith(head) or head.startswith(d.hash)) for d in made)

    return [Commit(c.hash, c.branch, c.subject,
                   any(i > c.index and b == c.branch and reached(c, h) for i, h, b in pushes),
                   c.message_id, c.index) for c in made]
