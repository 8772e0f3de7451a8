"""Status events derived from a transcript, for saved sessions and harnesses that emit nothing.

The facts come from the ledger's status reader (`ledger.walk`), which reads each message into typed
observations: the harness's per-message fields (cwd, branch, date, permission mode), the user's
request, tool calls and results (with the test runs, todo lists, tracker changes, git state, `cd`s,
files touched and plan-mode changes they show), tasks and the measured context. In a session, the
results are the ones the ledger's progress reader read of each message, so the bar and the ledger
never parse twice; this module only turns observations into events, and reports changes only.
Every event carries the id of the message it came from. worksurface's own messages (status,
summaries, markers) are skipped: the bar never feeds on itself.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..core.model import Message
from ..ledger.walk import (AGENT, CallSeen, IssueChange, MessageProgress, MessageSeen, ResultSeen, StatusReader,
                           SubagentTask, TodoItem, normalize_status, result_fingerprints)
from ..summarizers.sections import summary_request
from .display import bar_text
from .events import (EnvironmentChanged, Event, FilesTouched, JobsChanged, PermissionsChanged,
                     RepositoryChanged, ResourcesChanged, TaskUpdated, ToolFinished, ToolStarted,
                     VerificationFinished)
from .reducer import SEARCH_KINDS, StatusReducer

__all__ = ["DerivedStatus", "EventDeriver", "derive_events", "result_fingerprints"]

# Jobs listed on the bar: every running one, then the most recently finished up to this many in all
# (a finished job matters until the agent has read its result; older ones only lengthen the bar).
MAX_JOBS_SHOWN = 6
JOB_LABEL_CHARS = 60


def _todos(items: tuple[TodoItem, ...] | None) -> tuple[TodoItem, ...] | None:
    """The bar's todo items from the todo parser's (one line each, statuses normalized; None: the
    call carried no list)."""
    if items is None:
        return None
    return tuple(TodoItem(bar_text(it.text, 200), normalize_status(it.status)) for it in items)


class EventDeriver:
    """Walks messages in order, remembering what it last reported so that it emits changes only.
    `derive_events` runs one over a whole list; a harness session can keep one and feed it the
    messages it has not seen yet, with what its ledger's progress reader read of each (without it,
    the deriver's status reader reads them with a reader of its own)."""

    def __init__(self, window: int | None = None) -> None:
        self._window = window
        self._events: list[Event] = []
        self._reader = StatusReader(SEARCH_KINDS)
        self._tracked: dict[str, tuple[str, str]] = {}  # issue id -> (title, todo status)
        self._own_todos = False  # the agent keeps its todo list with a todo tool
        self._last: dict[str, Any] = {}
        self._message_id: str | None = None
        # When each task (by call id) last changed, in messages read: the bar lists the newest first.
        self._job_changed: dict[str, int] = {}
        self._job_tasks: dict[str, SubagentTask] = {}
        self._seen = 0

    def _emit(self, event_type: type, **fields: Any) -> None:
        self._events.append(event_type(source="transcript", message_id=self._message_id, **fields))

    def _changed(self, key: str, value: Any) -> bool:
        """True (and remembered) when `value` differs from the last one reported under `key`."""
        if value is None or self._last.get(key) == value:
            return False
        self._last[key] = value
        return True

    def derive(self, m: Message, progress: MessageProgress | None = None) -> list[Event]:
        """The events message `m` adds (its predecessors must have been derived already). `progress`:
        what a progress reader that read every message before read of this one (None: read it here)."""
        self._events = []
        self._message(self._reader.read(m, progress))
        return self._events

    def _message(self, seen: MessageSeen) -> None:
        if "goal" not in self._last and seen.summary is not None \
                and (quoted := summary_request(seen.summary)) is not None:
            # History behind a compaction that this transcript no longer holds: the summary quotes
            # the session's first request, which stays the goal of the epoch that follows.
            self._message_id = seen.message_id
            self._last["goal"] = goal = bar_text(quoted, 200)
            self._emit(TaskUpdated, goal=goal)
        if not seen.conversation:
            return
        self._message_id = seen.message_id
        self._context(seen)
        if seen.tool_output:
            return  # a tool's output, not the user's request
        if seen.request is not None:
            text = bar_text(seen.request, 200)
            if "goal" not in self._last:
                self._last["goal"] = text
                self._emit(TaskUpdated, goal=text)
            elif self._changed("request", text):
                self._emit(TaskUpdated, request=text)
        for block in seen.blocks:
            if isinstance(block, CallSeen):
                self._emit(ToolStarted, call_id=block.call_id, name=block.name, kind=block.kind,
                           target=bar_text(block.target, 120))
            else:
                self._result(block)
        self._seen += 1
        if seen.tasks is not None:
            self._jobs(seen.tasks)

    def _jobs(self, tasks: Mapping[str, SubagentTask]) -> None:
        """Sub-agents and background jobs, once this message started or updated one (a Task/Agent call,
        a background command's result, TaskOutput/KillShell, a harness `<task-notification>`)."""
        changed = self._job_changed
        for cid, task in tasks.items():
            if cid not in changed or task != self._job_tasks.get(cid):
                changed[cid] = self._seen
        self._job_tasks = dict(tasks)
        lines = _job_lines(tasks.values(), changed)
        if self._changed("jobs", lines):
            self._emit(JobsChanged, jobs=lines)

    def _context(self, seen: MessageSeen) -> None:
        """Per-message harness fields: cwd, date, branch, permission mode; and the usage and todo
        snapshot the progress reader read."""
        if seen.cwd is not None and self._changed("cwd", seen.cwd):
            self._emit(EnvironmentChanged, cwd=seen.cwd)
        if seen.date is not None and self._changed("date", seen.date):
            self._emit(EnvironmentChanged, time=seen.date)
        if seen.branch is not None and self._changed("branch", seen.branch):
            self._emit(RepositoryChanged, branch=seen.branch)
        if seen.mode is not None and self._changed("mode", seen.mode):
            self._emit(PermissionsChanged, approvals=seen.mode)
        todos = _todos(seen.todos)
        if todos and self._changed("todos", todos):
            self._own_todos = True
            self._emit(TaskUpdated, todos=todos)
        if self._changed("tokens", seen.context_tokens):
            self._emit(ResourcesChanged, tokens_used=seen.context_tokens, token_limit=self._window)

    def _result(self, r: ResultSeen) -> None:
        self._emit(ToolFinished, call_id=r.call_id, name=r.name, kind=r.kind, ok=r.ok, output_hash=r.output_hash,
                   result_hashes=r.result_hashes)
        if not r.answered:
            return
        if r.tool_todo:
            self._own_todos = True
            if self._changed("todos", todos := _todos(r.todos)):
                self._emit(TaskUpdated, todos=todos)
        if (run := r.test) is not None:
            self._emit(VerificationFinished, runner=run.framework, passed=run.passed, failed=run.failed,
                       skipped=run.skipped, failing=run.failing, command=bar_text(run.command, 120))
        if r.shell:
            self._shell(r)
        elif r.touched is not None:
            self._emit(FilesTouched, paths=(r.touched,))
        if r.stage is not None and self._changed("stage", r.stage):
            self._emit(TaskUpdated, stage=r.stage)

    def _shell(self, r: ResultSeen) -> None:
        if (git := r.git) is not None:
            self._changed("branch", git.branch)
            self._emit(RepositoryChanged, branch=git.branch, changed_files=git.changed_files,
                       last_commit=git.last_commit, changed_unknown=git.changed_unknown or None)
        if r.issues:
            self._tracker(r.issues, r.updates_tracker)
        if r.cwd is not None and self._changed("cwd", r.cwd):
            self._emit(EnvironmentChanged, cwd=r.cwd)

    def _tracker(self, changes: Sequence[IssueChange], updates: bool) -> None:
        """Issues of a command-line tracker (beads) make the todo list, in order of first mention. An
        agent that keeps its own list with a todo tool has that list: an issue it only looks at
        (`bd show`) does not replace it, a change it makes to one (claim, close, create) does."""
        for u in changes:
            title, status = self._tracked.get(u.issue, ("", "pending"))
            self._tracked[u.issue] = (u.title or title, u.status or status)
        if self._own_todos and not updates:
            return
        todos = tuple(TodoItem(bar_text(f"{i}: {t}" if t else i, 200), s)
                      for i, (t, s) in self._tracked.items())
        if todos and self._changed("todos", todos):
            self._emit(TaskUpdated, todos=todos)


def _job_lines(tasks: Iterable[SubagentTask], changed: Mapping[str, int]) -> tuple[str, ...]:
    """One line per job: state, kind, id and what it is; running ones first, then the newest finished
    (`changed`: when each last changed, by call id)."""
    ordered = sorted(tasks, key=lambda t: (t.finished, -changed[t.call_id]))
    lines = []
    for t in ordered[:MAX_JOBS_SHOWN]:
        what = t.description or t.prompt
        name = t.agent_type if t.kind == AGENT else "shell"
        label = f"{'agent' if t.kind == AGENT else 'job'} {name}"
        if t.task_id:
            label += f" [{bar_text(t.task_id, 24)}]"
        if what:
            label += f" {bar_text(what, JOB_LABEL_CHARS)}"
        # The state leads: the bar cuts long items at the end, and the state is what changes.
        background = " (background)" if t.background and t.kind == AGENT else ""
        lines.append(f"{t.state}{background}: {label}")
    return tuple(lines)


class DerivedStatus:
    """The status the transcript shows, reduced message by message as the session's ledger reads them
    (a `Ledger.follow`er): the bar reads this state instead of walking the transcript itself."""

    def __init__(self, window: int | None = None) -> None:
        self.window = window
        self.skip: frozenset[str] = frozenset()
        self.skipped_at: dict[str, int] = {}  # transcript position of each message passed over as excluded
        self.resets = -1  # how many times it started over (a reader knows its old marks are void)
        self.reset()

    def reset(self) -> None:
        self.resets += 1
        self.deriver = EventDeriver(self.window)
        self.reducer = StatusReducer()
        self.seen = 0           # transcript messages read
        self.tokens_at = -1     # the newest message whose usage measured the context

    def exclude(self, ids: frozenset[str]) -> None:
        """Messages of the transcript the view no longer holds (recovery removed them): not read. When
        one excluded before is back, the status is read again from the start."""
        if self.skip - ids:
            self.reset()
        self.skip = ids

    def observe(self, message: Message, index: int, progress: MessageProgress | None = None) -> None:
        if message.id in self.skip:
            self.skipped_at[message.id] = index
            return
        for event in self.deriver.derive(message, progress):
            self.reducer.apply(event)
            if isinstance(event, ResourcesChanged) and event.tokens_used is not None:
                self.tokens_at = index


def derive_events(messages: Sequence[Message], *, window: int | None = None) -> list[Event]:
    """Status events for `messages`, in order; deterministic. `window` (the context window in
    tokens) lets the token budget, and so the wrap-up signal, be computed."""
    deriver = EventDeriver(window)
    return [event for m in messages for event in deriver.derive(m)]
