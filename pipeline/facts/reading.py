"""What each tool result shows of the work's progress, read once and in transcript order: a test run,
the todo list after a todo tool, the issues a tracker command changed, the repository's state, and
the sub-agents and background jobs a message launches or updates.

One reader holds the state these facts need across results (a test command's background id or the
file it wrote, the todo items built one at a time), so a fact read in one call does not depend on how
the transcript was cut into windows. The session's ledger keeps one reader and reads every new message
with it when the message arrives (`Ledger.update`): the ledger's test runs, commits, tracker updates,
todo list and tasks, and the status bar, are folded from its readings, never parsed a second time.
`test_runs`, `commits`, `todo_state` and `tracker_updates` over a list of messages are one reader run
over that list.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..core.memo import per_message_list
from ..core.model import Message, Origin, ToolCall
from ..core.toolkinds import tool_kind
from ..core.usage import parse_usage
from .calls import CallRecord
from .git import GitFacts, commits_made, may_show_history, parse_git, pushes
from .meta import message_branch
from . import subagents as subagent_facts
from .provenance import harness_tool
from .subagents import SubagentTask
from .testsummary import TestRunWatcher
from .text import one_line
from .todos import TodoItem, TodoReplayer, items_from
from .tracker import IssueChange, TrackerUpdate, issue_changes, record_updates, updates_tracker


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
class Commit:
    """A commit the agent made (from `git commit` output); `pushed` once a later push of its branch reached it."""

    hash: str
    branch: str | None
    subject: str
    pushed: bool
    message_id: str
    index: int


@dataclass(frozen=True)
class ResultFacts:
    """The progress one tool result shows (None or empty: it shows none of that kind)."""

    call_id: str
    test: TestRun | None = None
    todo: TodoState | None = None
    issues: tuple[IssueChange, ...] = ()      # what a tracker command said about issues, in output order
    updates_tracker: bool = False             # the command changes an issue (claim, close, create), not only reads one
    tracker: tuple[TrackerUpdate, ...] = ()   # the changes it made, as the summary lists them
    git: GitFacts | None = None
    commits: tuple[Commit, ...] = ()          # commits it made, and earlier ones a push of it reached (pushed now)

    @property
    def empty(self) -> bool:
        return (self.test is None and self.todo is None and not self.issues and not self.tracker
                and self.git is None and not self.commits)


@dataclass(frozen=True)
class MessageProgress:
    """What the reader read of one message: its results' facts, the tasks (sub-agents and background
    jobs, by call id) when the message changed them (None: unchanged), the context its recorded usage
    measured (the request's input tokens), and the todo list the harness recorded with it (Claude
    Code's `todos` field)."""

    results: tuple[ResultFacts, ...] = ()
    tasks: Mapping[str, SubagentTask] | None = None
    context_tokens: int | None = None
    todos: tuple[TodoItem, ...] | None = None

    @property
    def empty(self) -> bool:
        return not self.results and self.tasks is None and self.context_tokens is None and self.todos is None


NOTHING = MessageProgress()
# Tools whose calls never start or update a task (the common ones: their messages are not held).
NOT_TASK_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "Grep", "Glob", "TodoWrite", "WebFetch",
                            "WebSearch", "NotebookEdit"})


class ProgressReader:
    """Reads messages in order (each once); `read` gives a message's results' facts, and `at` gives
    them again for any message read (a reader above the ledger that starts over reads them from here).
    Only conversation messages are read: worksurface's own messages never feed a fact."""

    def __init__(self) -> None:
        self.seen = 0  # messages read (the transcript's first `seen`)
        self._calls: dict[str, tuple[ToolCall, int, Message]] = {}  # open call id -> (call, index, its message)
        self._commits: dict[str, Commit] = {}  # hash -> the commit, as last reported
        self._tests = TestRunWatcher()
        self._todos = TodoReplayer()
        self._read: dict[int, MessageProgress] = {}  # message index -> what it showed (when it showed any)
        # Tasks by call id, and the messages (with their index) whose calls may launch or update one,
        # held until their results arrive: a task's call and its result are folded together.
        self.tasks: dict[str, SubagentTask] = {}
        self._task_calls: dict[str, tuple[Message, int]] = {}

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def read(self, message: Message, index: int, queued: Sequence[tuple[str | None, str]] = ()) -> MessageProgress:
        """What `message` shows (it must come right after the messages read before). `queued`: user input
        the harness queued after it, and input queued with no place (anchor None), which a task
        notification may be."""
        self.seen = index + 1
        if message.origin is not Origin.CONVERSATION:
            return NOTHING
        for call in message.tool_calls:
            self._calls.setdefault(call.id, (call, index, message))
        found: list[ResultFacts] = []
        for result in message.tool_results:
            opened = self._calls.pop(result.call_id, None)
            if opened is None:
                continue  # no call before it: nothing says what produced it
            call, at, call_message = opened
            rec = CallRecord(call, at, call_message.id, result, index, message.id, message)
            facts = self._result(rec, index, call_message)
            if not facts.empty:
                found.append(facts)
        tasks = self._read_tasks(message, index, queued)
        # The one usage parser: a negative, boolean or partial figure measures nothing (never a size).
        usage = parse_usage(message.meta.get("usage"))
        progress = MessageProgress(tuple(found), tasks, usage.context if usage is not None else None,
                                   items_from(message.meta.get("todos"), ("content",)))
        if progress.empty:
            return NOTHING
        self._read[index] = progress
        return progress

    def at(self, index: int) -> MessageProgress:
        """What the message at `index` showed (nothing when it showed none)."""
        return self._read.get(index, NOTHING)

    def between(self, start: int, end: int) -> list[ResultFacts]:
        """The results' facts of the messages at `start` .. `end - 1`, in transcript order."""
        read = self._read
        indices = sorted(i for i in read if start <= i < end) if end - start > len(read) else range(start, end)
        return [f for i in indices if i in read for f in read[i].results]

    def _read_tasks(self, message: Message, index: int,
                    queued: Sequence[tuple[str | None, str]]) -> Mapping[str, SubagentTask] | None:
        """The tasks once `message` is folded with the held messages whose calls it answers (None: it
        changed none). Most messages can change none, and `fold` only looks at them (`may_change_tasks`)."""
        held = {id(m): (m, i) for m, i in (self._task_calls.pop(r.call_id) for r in message.tool_results
                                            if r.call_id in self._task_calls)}
        window = sorted(held.values(), key=lambda p: p[1]) + [(message, index)]
        if any(c.name not in NOT_TASK_TOOLS for c in message.tool_calls):
            for c in message.tool_calls:
                self._task_calls[c.id] = (message, index)
        messages = [m for m, _ in window]
        if not queued and not subagent_facts.may_change_tasks(messages):
            return None  # `fold` would copy the tasks only to find them unchanged
        positions = [i for _, i in window]
        tasks = subagent_facts.fold(self.tasks, messages,
                                    lambda j: positions[j] if 0 <= j < len(positions) else j, queued)
        if tasks == self.tasks:
            return None
        self.tasks = tasks
        return tasks

    def _result(self, rec: CallRecord, index: int, call_message: Message) -> ResultFacts:
        call = rec.call
        test: TestRun | None = None
        seen = self._tests.observe(call, rec.output)
        if seen is not None:
            command, found = seen
            test = TestRun(command, found.summary, found.runner, found.passed, found.failed, rec.result_message_id
                           or rec.message_id, index, found.skipped, found.failing)
        todo: TodoState | None = None
        # A todo list is the harness's own todo tool's: another program's tool (an MCP server's, whatever
        # it is called) neither writes the list nor numbers its items.
        if TodoReplayer.may_change(call.name, call.input) and not rec.failed and harness_tool(call):
            items = self._todos.observe(call.name, call.input, rec.output)
            if items is not None:
                todo = TodoState(items, call.name, rec.message_id, rec.index)
        if tool_kind(call) != "shell" or not harness_tool(call):  # an MCP `bash` is another program's text
            return ResultFacts(call.id, test, todo)
        command = rec.command or ""
        output = rec.output
        git = parse_git(command, output) if "git " in command else None
        issues: tuple[IssueChange, ...] = ()
        tracker: tuple[TrackerUpdate, ...] = ()
        commits: tuple[Commit, ...] = ()
        # What only a call that succeeded shows; whether it failed is asked only of one that shows any
        # (most shell outputs name no issue and report no commit or push).
        if command:
            issues = tuple(issue_changes(command, output))
            tracker = tuple(record_updates(rec, issues))
            shows_history = may_show_history(output)
            if (issues or tracker or shows_history) and rec.failed:
                issues, tracker = (), ()
            elif shows_history:
                commits = self._git_history(rec, message_branch(call_message))
        return ResultFacts(call.id, test, todo, issues, bool(issues) and updates_tracker(command), tracker,
                           git if git is not None and not git.empty else None, commits)

    def _git_history(self, rec: CallRecord, branch: str | None) -> tuple[Commit, ...]:
        """The commits this output made, and the earlier ones on a branch it pushed that the push reached
        (the pushed head is one of the commits made since them; a new branch pushed whole reaches all)."""
        output = rec.output
        made = [Commit(h, b or branch, one_line(subject, 160), False, rec.result_message_id or rec.message_id,
                       rec.index) for b, h, subject in commits_made(output)]
        for c in made:
            self._commits[c.hash] = c
        reached: dict[str, Commit] = {}
        for head, pushed_branch in pushes(output):
            for c in self._commits.values():
                if c.pushed or c.branch != pushed_branch or c.index >= rec.index:
                    continue
                if head is None or any(d.index >= c.index and (d.hash.startswith(head) or head.startswith(d.hash))
                                       for d in self._commits.values()):
                    reached[c.hash] = dataclasses.replace(c, pushed=True)
        self._commits.update(reached)
        return tuple(made) + tuple(reached.values())


@per_message_list
def read_all(messages: Sequence[Message]) -> list[ResultFacts]:
    """Every result's facts over `messages`, read by one reader from the first (indices are positions
    in `messages`)."""
    reader = ProgressReader()
    return [f for i, m in enumerate(messages) for f in reader.read(m, i).results]


def test_runs(messages: Sequence[Message]) -> list[TestRun]:
    """Every test run the transcript shows, oldest first, with the command that produced it: only
    outputs of test commands (or files they wrote) count, never a summary some other output shows."""
    return [f.test for f in read_all(messages) if f.test is not None]


def todo_state(messages: Sequence[Message]) -> TodoState | None:
    """The latest todo list (TodoWrite `todos`, update_plan `plan`, OpenHands `task_list`), or None.
    Claude Code's TaskCreate/TaskUpdate tools build the list one item at a time; they are replayed."""
    return next((f.todo for f in reversed(read_all(messages)) if f.todo is not None), None)


def commits(messages: Sequence[Message]) -> list[Commit]:
    """Commits the agent made (from `git commit` output), oldest first; `pushed` when a later push
    of their branch reached them."""
    latest: dict[str, Commit] = {}
    for f in read_all(messages):
        for c in f.commits:
            latest[c.hash] = c
    return sorted(latest.values(), key=lambda c: c.index)


def tracker_updates(messages: Sequence[Message]) -> list[TrackerUpdate]:
    """Successful issue state changes (claim, close, create...), oldest first."""
    return [u for f in read_all(messages) for u in f.tracker]
