"""Where the work stands: test runs (summary lines verbatim), the todo list, plan mode, and commits.

Test summaries are recognised for pytest, unittest, jest/vitest, mocha, go test, cargo test,
ExUnit (mix test) and RSpec; the line is kept exactly as printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..model import Message
from ..toolkinds import call_path, normalize_name, tool_kind
from .calls import CallRecord, tool_calls
from .meta import message_branch
from .text import one_line, reminders, trim

# Output files a background command writes; reading one shows that command's output.
OUTPUT_FILE_RE = re.compile(r"([\w-]+)\.(?:output|log)$")
# "Command running in background with ID: b0be39e" (Claude Code Bash with run_in_background).
BACKGROUND_RE = re.compile(r"running in background with ID: (\w+)")
# Tools that fetch a background task's output, and the input keys naming the task.
TASK_OUTPUT_TOOLS = ("taskoutput", "bashoutput")
TASK_ID_KEYS = ("task_id", "bash_id", "shell_id", "id")
MAX_SUMMARY_CHARS = 240
# Claude Code's plan-mode reminder and the approval result naming the saved plan file.
PLAN_MODE_REMINDER = "plan mode is active"
PLAN_SAVED_RE = re.compile(r"saved to: (\S+)")

_COUNT = r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)"
# (framework, line pattern); the first framework whose pattern matches a line of the output wins.
# Count words are letters only and items have fixed separators: a `\w+` there backtracks
# exponentially on lines like "31 epsilon62 beta93 ..." (a tool output cut mid-word).
SUMMARY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pytest", re.compile(r"^[=\s]*\d+ [a-z]+(?:, \d+ [a-z]+)* in [\d.]+s\b.*$|^[=\s]*no tests ran in [\d.]+s")),
    ("cargo", re.compile(r"test result: (?:ok|FAILED)\. \d+ passed; \d+ failed.*$")),
    ("jest", re.compile(r"^\s*Tests?:?\s+(?:\d+ [a-z]+,?\s+)+(?:\d+ total|\(\d+\))\s*$")),
    ("exunit", re.compile(r"^(?:\d+ doctests?, )?(?:\d+ propert(?:y|ies), )?\d+ tests?, \d+ failures?.*$")),
    ("rspec", re.compile(r"^\d+ examples?, \d+ failures?.*$")),
    ("mocha", re.compile(r"^\s*\d+ (?:passing|failing) \([\d.]+m?s\)\s*$")),
    ("unittest", re.compile(r"^Ran \d+ tests? in [\d.]+s$")),
    ("go", re.compile(r"^(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))|^--- FAIL: \S+")),
)
UNITTEST_RESULT_RE = re.compile(r"^(OK|FAILED)\b.*$", re.M)


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

    @property
    def ok(self) -> bool:
        return self.failed == 0


@dataclass(frozen=True)
class TodoItem:
    text: str
    status: str


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


def _counts(framework: str, line: str, output: str) -> tuple[int | None, int | None]:
    def num(pattern: str) -> int:
        return sum(int(n) for n in re.findall(pattern, line))

    if framework == "pytest":
        return num(r"(\d+) passed"), num(r"(\d+) failed") + num(r"(\d+) errors?\b")
    if framework == "cargo":
        return num(r"(\d+) passed"), num(r"(\d+) failed")
    if framework == "jest":
        return num(r"(\d+) passed"), num(r"(\d+) failed")
    if framework in ("exunit", "rspec"):
        total = num(r"(\d+) (?:doctests?|propert(?:y|ies)|tests?|examples?)\b")
        failed = num(r"(\d+) failures?")
        return total - failed, failed
    if framework == "mocha":
        return (num(r"(\d+) passing") if "passing" in line else None,
                num(r"(\d+) failing") if "failing" in line else None)
    if framework == "unittest":
        ran = num(r"Ran (\d+)")
        result = UNITTEST_RESULT_RE.search(output)
        failed = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", result.group(0))) if result else 0
        return ran - failed, failed
    if framework == "go":
        return (len(re.findall(r"^ok\s", output, re.M)),
                len(re.findall(r"^(?:FAIL\s+\S+\s|--- FAIL:)", output, re.M)))
    return None, None


def parse_test_summary(output: str) -> tuple[str, str, int | None, int | None] | None:
    """(framework, summary line, passed, failed) of the last test summary in an output, or None."""
    lines = output.splitlines()
    for framework, pattern in SUMMARY_PATTERNS:
        for line in reversed(lines):
            m = pattern.search(line)
            if not m:
                continue
            summary = line.strip().strip("=").strip()
            if framework == "unittest":
                result = UNITTEST_RESULT_RE.search(output)
                if result:
                    summary = f"{summary} {result.group(0).strip()}"
            elif framework == "mocha":
                summary = "; ".join(ln.strip() for ln in lines if pattern.search(ln))
            passed, failed = _counts(framework, summary, output)
            return framework, trim(summary, MAX_SUMMARY_CHARS), passed, failed
    return None


def _scannable(rec: CallRecord) -> bool:
    """Results that can carry test output: shell and unknown tools, background-output reads."""
    kind = tool_kind(rec.call)
    if kind in ("shell", "other", "agent"):
        return True
    path = call_path(rec.call) or ""
    return kind == "read" and bool(OUTPUT_FILE_RE.search(path))


def test_runs(messages: Sequence[Message]) -> list[TestRun]:
    """Every test summary the transcript shows, oldest first, with the command that produced it."""
    background: dict[str, str] = {}
    out: list[TestRun] = []
    for rec in tool_calls(messages):
        if rec.result is None or not _scannable(rec):
            continue
        command = rec.target
        bg = BACKGROUND_RE.search(rec.output)
        if bg and rec.command:
            background[bg.group(1)] = command
        task_id = _task_id(rec)
        if task_id and task_id in background:
            command = background[task_id]
        parsed = parse_test_summary(rec.output)
        if parsed is None:
            continue
        framework, summary, passed, failed = parsed
        out.append(TestRun(command, summary, framework, passed, failed,
                           rec.result_message_id or rec.message_id,
                           rec.result_index if rec.result_index is not None else rec.index))
    return out


def _task_id(rec: CallRecord) -> str | None:
    if normalize_name(rec.name) in TASK_OUTPUT_TOOLS:
        for key in TASK_ID_KEYS:
            if isinstance(rec.call.input.get(key), str):
                return rec.call.input[key]
    m = OUTPUT_FILE_RE.search(call_path(rec.call) or rec.target or "")
    return m.group(1) if m else None


def _items(value: Any, text_keys: tuple[str, ...]) -> tuple[TodoItem, ...] | None:
    if not isinstance(value, list):
        return None
    items = []
    for entry in value:
        if not isinstance(entry, dict):
            return None
        text = next((entry[k] for k in text_keys if isinstance(entry.get(k), str)), None)
        if text is None:
            return None
        items.append(TodoItem(text, str(entry.get("status", "pending"))))
    return tuple(items)


def todo_state(messages: Sequence[Message]) -> TodoState | None:
    """The latest todo list (TodoWrite `todos`, update_plan `plan`, OpenHands `task_list`), or None.

    Claude Code's TaskCreate/TaskUpdate tools build the list one item at a time; they are replayed."""
    latest: TodoState | None = None
    tasks: dict[str, TodoItem] = {}
    for rec in tool_calls(messages):
        if rec.result is None or rec.failed:
            continue
        name, inp = normalize_name(rec.name), rec.call.input
        items = (_items(inp.get("todos"), ("content", "text", "title"))
                 or _items(inp.get("plan"), ("step", "content", "text"))
                 or _items(inp.get("task_list"), ("title", "content", "text")))
        if name == "taskcreate" and isinstance(inp.get("subject"), str):
            m = re.search(r"#(\w+)", rec.output)
            tasks[m.group(1) if m else str(len(tasks) + 1)] = TodoItem(inp["subject"], "pending")
            items = tuple(tasks.values())
        elif name == "taskupdate" and str(inp.get("taskId", "")) in tasks:
            key = str(inp["taskId"])
            old = tasks[key]
            tasks[key] = TodoItem(str(inp.get("subject") or old.text), str(inp.get("status") or old.status))
            items = tuple(tasks.values())
        if items is not None:
            latest = TodoState(items, rec.name, rec.message_id, rec.index)
    return latest


def plan_mode(messages: Sequence[Message]) -> PlanMode:
    """Whether plan mode is on at the end of the messages, and the latest plan (proposed or approved)."""
    active, approved = False, False
    plan: str | None = None
    path: str | None = None
    where: str | None = None
    events: list[tuple[int, int, Any]] = [
        (i, 0, m) for i, m in enumerate(messages)
        if m.role == "user" and any(PLAN_MODE_REMINDER in r.lower() for r in reminders(m.text))]
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


COMMIT_RE = re.compile(r"^\[([^\s\]]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+)$", re.M)
# `git push` output: `   05fd186..a230dbf  br -> br` (a range) or ` * [new branch]      br -> br`.
PUSH_RANGE_RE = re.compile(r"^\s*\+?\s*[0-9a-f]{7,40}\.{2,3}([0-9a-f]{7,40})\s+(\S+) -> (\S+)", re.M)
PUSH_NEW_RE = re.compile(r"^\s*\* \[new branch\]\s+(\S+) -> (\S+)", re.M)


def commits(messages: Sequence[Message]) -> list[Commit]:
    """Commits the agent made (from `git commit` output), oldest first; `pushed` when a later push
    of their branch reached them."""
    made: list[Commit] = []
    pushes: list[tuple[int, str | None, str]] = []  # (index, pushed head hash or None = whole branch, branch)
    for rec in tool_calls(messages):
        if rec.result is None or rec.failed or tool_kind(rec.call) != "shell":
            continue
        branch = message_branch(messages[rec.index])
        for m in COMMIT_RE.finditer(rec.output):
            made.append(Commit(m.group(2), m.group(1) or branch, one_line(m.group(3), 160), False,
                               rec.result_message_id or rec.message_id, rec.index))
        pushes += [(rec.index, m.group(1), m.group(2)) for m in PUSH_RANGE_RE.finditer(rec.output)]
        pushes += [(rec.index, None, m.group(1)) for m in PUSH_NEW_RE.finditer(rec.output)]

    def reached(c: Commit, head: str | None) -> bool:
        if head is None:
            return True
        return any(d.index >= c.index and (d.hash.startswith(head) or head.startswith(d.hash)) for d in made)

    return [Commit(c.hash, c.branch, c.subject,
                   any(i > c.index and b == c.branch and reached(c, h) for i, h, b in pushes),
                   c.message_id, c.index) for c in made]


# Issue tracker commands that change an issue's state (beads, GitHub, GitLab, Jira, Linear).
TRACKER_UPDATE_RE = re.compile(
    r"^(?:bd|beads|br)\s+(?:update|close|reopen|create|done|start)\b"
    r"|^(?:gh|glab)\s+(?:issue|pr|mr)\s+(?:close|reopen|edit|create|merge|comment)\b"
    r"|^jira\s+(?:issue\s+)?(?:move|transition|assign|create|edit)\b|^linear\s+issue\s+(?:update|create)\b")


@dataclass(frozen=True)
class TrackerUpdate:
    """An issue tracker command the agent ran to change an issue, and the first line it printed."""

    command: str
    result: str
    message_id: str
    index: int


def tracker_updates(messages: Sequence[Message]) -> list[TrackerUpdate]:
    """Successful issue state changes (claim, close, create...), oldest first."""
    out = []
    for rec in tool_calls(messages):
        if rec.result is None or rec.failed or tool_kind(rec.call) != "shell" or not rec.command:
            continue
        for line in rec.command.splitlines():
            for part in re.split(r"\s*(?:&&|;|\|\|)\s*", line.strip()):
                if TRACKER_UPDATE_RE.match(part):
                    result = _result_line(part, rec.output)
                    out.append(TrackerUpdate(one_line(part, 200), one_line(result, 200),
                                             rec.result_message_id or rec.message_id, rec.index))
    return out


def _result_line(command: str, output: str) -> str:
    """The output line about this command's issue (the first that names one of its arguments)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    args = [w for w in command.split()[2:] if not w.startswith("-") and len(w) > 2]
    for line in lines:
        if any(re.search(rf"{re.escape(a)}(?![\w.])", line) for a in args):
            return line
    return lines[0] if lines else ""
