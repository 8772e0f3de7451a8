"""Status events derived from a transcript, for saved sessions and harnesses that emit nothing.

Reads what the conversation shows: tool calls and results, `cd` commands, and the adapter's
per-message fields (meta `cwd`, `git_branch`, `timestamp`, permission mode). Test runs, todo
lists (a todo tool's, or the one the harness recorded), tracker changes, git state, tasks and the
measured context come from the progress reader (`facts.reading`): in a session, the one the ledger
read each message with, so the bar and the ledger never parse twice.
Every event carries the id of the message it came from. worksurface's own messages (status,
summaries, markers) are skipped: the bar never feeds on itself.
"""

from __future__ import annotations

import hashlib
import itertools
import posixpath
import re
from typing import Any, Iterable, Mapping, Sequence

from ..core.model import Message, Origin, ToolCall, ToolResult, is_user_turn
from ..core.toolkinds import call_path, call_target, effective_kind, normalize_name, shell_command, tool_kind
from .display import bar_text
from .events import (EnvironmentChanged, Event, FilesTouched, JobsChanged, PermissionsChanged,
                     RepositoryChanged, ResourcesChanged, TaskUpdated, ToolFinished, ToolStarted,
                     VerificationFinished)
from ..facts import subagents as subagent_facts
from ..facts.subagents import SubagentTask
from ..facts.provenance import CONVERTED_CALL, harness_tool
from ..facts.reading import MessageProgress, ProgressReader, ResultFacts
from ..facts.todos import TodoItem, normalize_status
from ..facts.tracker import IssueChange
from ..summarizers import sections as summary_sections
from .reducer import SEARCH_KINDS, StatusReducer

# Short hashes identify output lines and whole outputs; 12 hex digits make a collision within
# one session practically impossible while keeping the event log small.
HASH_HEX = 12
# Result items hashed per search: a search listing more than this is not "nothing new" anyway.
MAX_RESULT_ITEMS = 500
# Lines of search output that report rather than list results (Claude Code Grep/Glob).
_NOT_A_RESULT = re.compile(r"^(?:Found \d+ (?:files?|match(?:es)?|lines?)|No (?:files|matches) found"
                           r"|No matches)\b", re.I)
# `cd DIR` leading a command line (alone, or followed by `&&` or `;`).
_CD = re.compile(r"""^\s*cd\s+("[^"]+"|'[^']+'|[^\s;&|]+)\s*(?:&&|;|$)""")
# A user turn that the harness wrote (task notifications, interruption notes) is not a request.
_HARNESS_TEXT = ("<", "[")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_STAGE_TOOLS = {"enterplanmode": "planning", "exitplanmode": "implementing"}
# Claude Code's compaction summary opens with this section; its first line says what was asked.
_CC_PRIMARY = re.compile(r"Primary Request and Intent:\**\s*\n?(.+)")
# Jobs listed on the bar: every running one, then the most recently finished up to this many in all
# (a finished job matters until the agent has read its result; older ones only lengthen the bar).
MAX_JOBS_SHOWN = 6
JOB_LABEL_CHARS = 60


def short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()[:HASH_HEX]


def result_fingerprints(output: str) -> tuple[str, ...]:
    """Hashes of a search output's result lines, for `ToolFinished.result_hashes`."""
    items = dict.fromkeys(s for line in output.splitlines() if (s := line.strip()) and not _NOT_A_RESULT.match(s))
    return tuple(short_hash(i) for i in itertools.islice(items, MAX_RESULT_ITEMS))


def _todos(items: tuple[TodoItem, ...] | None) -> tuple[TodoItem, ...] | None:
    """The bar's todo items from the todo parser's (one line each, statuses normalized; None: the
    call carried no list)."""
    if items is None:
        return None
    return tuple(TodoItem(bar_text(it.text, 200), normalize_status(it.status)) for it in items)


def _summary_goal(m: Message) -> str | None:
    """The first request a compaction summary quotes (worksurface's structured summary, or Claude
    Code's "Primary Request and Intent" section), as a goal line; None for any other message."""
    if m.origin is not Origin.SUMMARY and not m.meta.get("is_compact_summary"):
        return None
    text = m.text
    quoted: str | None = None
    start = text.find(summary_sections.TITLE)
    if start >= 0:
        active = summary_sections.split_sections(text[start:]).get(summary_sections.ACTIVE_REQUEST, "")
        # The first request is quoted under its own label only when a later one differs from it.
        quoted = (summary_sections.after_label(active, summary_sections.FIRST_REQUEST_LABEL)
                  or summary_sections.after_label(active, summary_sections.LATEST_REQUEST_LABEL))
    elif (cc := _CC_PRIMARY.search(text)) is not None:
        quoted = cc.group(1)
    for line in (quoted or "").splitlines():
        if line.strip():
            return bar_text(line.strip().lstrip("-* ").strip(), 200)
    return None


def _request_text(message: Message) -> str | None:
    for line in message.text.splitlines():
        if line.strip():
            return None if line.strip().startswith(_HARNESS_TEXT) else bar_text(line, 200)
    return None


class EventDeriver:
    """Walks messages in order, remembering what it last reported so that it emits changes only.
    `derive_events` runs one over a whole list; a harness session can keep one and feed it the
    messages it has not seen yet, with what its ledger's progress reader read of each (without it,
    the deriver reads them with a reader of its own)."""

    def __init__(self, window: int | None = None) -> None:
        self._window = window
        self._events: list[Event] = []
        self._calls: dict[str, ToolCall] = {}
        self._reader: ProgressReader | None = None
        self._progress: dict[str, ResultFacts] = {}  # call id -> what the message being read shows of its result
        self._converted = 0
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
        if progress is None:
            if self._reader is None:
                self._reader = ProgressReader()
            progress = self._reader.read(m, self._reader.seen)
        self._progress = {f.call_id: f for f in progress.results}
        self._message(m, progress)
        return self._events

    def _message(self, m: Message, progress: MessageProgress) -> None:
        if "goal" not in self._last and (goal := _summary_goal(m)) is not None:
            # History behind a compaction that this transcript no longer holds: the summary quotes
            # the session's first request, which stays the goal of the epoch that follows.
            self._message_id = m.id
            self._last["goal"] = goal
            self._emit(TaskUpdated, goal=goal)
        if m.origin is not Origin.CONVERSATION:
            return
        self._message_id = m.id
        self._context(m.meta, progress)
        if m.role == "assistant":
            # Calls a format conversion wrote as text: their outputs follow as user messages.
            said = m.text
            self._converted = (sum(1 for line in said.splitlines() if line.startswith(CONVERTED_CALL))
                               if CONVERTED_CALL in said else 0)
        elif self._converted and m.role == "user" and not m.tool_results:
            self._converted -= 1
            return  # a tool's output, not the user's request
        if is_user_turn(m) and (text := _request_text(m)) is not None:
            if "goal" not in self._last:
                self._last["goal"] = text
                self._emit(TaskUpdated, goal=text)
            elif self._changed("request", text):
                self._emit(TaskUpdated, request=text)
        for block in m.blocks:
            if isinstance(block, ToolCall):
                self._call(block)
            elif isinstance(block, ToolResult):
                self._result(block)
        self._seen += 1
        if progress.tasks is not None:
            self._jobs(progress.tasks)

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

    def _context(self, meta: Mapping[str, Any], progress: MessageProgress) -> None:
        """Per-message harness fields: cwd, branch, date, permission mode; and the usage and todo
        snapshot the progress reader read."""
        cwd = meta.get("cwd")
        if isinstance(cwd, str) and cwd and self._changed("cwd", cwd):
            self._emit(EnvironmentChanged, cwd=cwd)
        stamp = meta.get("timestamp")
        # The same day as the last one reported (most messages) changes nothing: no pattern to match.
        if isinstance(stamp, str) and stamp[:10] != self._last.get("date") and _DATE.match(stamp) \
                and self._changed("date", stamp[:10]):
            self._emit(EnvironmentChanged, time=stamp[:10])
        branch = meta.get("git_branch")
        if isinstance(branch, str) and branch and self._changed("branch", branch):
            self._emit(RepositoryChanged, branch=branch)
        raw = meta.get("raw")
        mode = meta.get("permission_mode") or (raw.get("permissionMode") if isinstance(raw, (dict, Mapping)) else None)
        if isinstance(mode, str) and mode and self._changed("mode", mode):
            self._emit(PermissionsChanged, approvals=mode)
        todos = _todos(progress.todos)
        if todos and self._changed("todos", todos):
            self._own_todos = True
            self._emit(TaskUpdated, todos=todos)
        if self._changed("tokens", progress.context_tokens):
            self._emit(ResourcesChanged, tokens_used=progress.context_tokens, token_limit=self._window)

    def _call(self, call: ToolCall) -> None:
        self._calls[call.id] = call
        self._emit(ToolStarted, call_id=call.id, name=call.name, kind=effective_kind(call),
                   target=bar_text(call_target(call), 120))

    def _result(self, result: ToolResult) -> None:
        call = self._calls.get(result.call_id)
        kind = effective_kind(call) if call else "other"
        ok = not result.is_error
        self._emit(ToolFinished, call_id=result.call_id, name=call.name if call else "unknown", kind=kind,
                   ok=ok, output_hash=short_hash(result.content) if result.content and not result.content.isspace() else None,
                   result_hashes=result_fingerprints(result.content) if kind in SEARCH_KINDS else None)
        if call is None:
            return
        progress = self._progress.get(result.call_id)
        if progress is not None and progress.todo is not None:
            self._own_todos = True
            if self._changed("todos", todos := _todos(progress.todo.items)):
                self._emit(TaskUpdated, todos=todos)
        if progress is not None and (run := progress.test) is not None:
            self._emit(VerificationFinished, runner=run.framework, passed=run.passed, failed=run.failed,
                       skipped=run.skipped, failing=run.failing, command=bar_text(run.command, 120))
        if tool_kind(call) == "shell" and harness_tool(call):  # an MCP `bash` is another program's text
            self._shell(call, ok, progress)
        elif ok and kind in ("edit", "write") and (path := call_path(call)):
            self._emit(FilesTouched, paths=(self._relative(path),))
        stage = _STAGE_TOOLS.get(normalize_name(call.name))
        if ok and stage and self._changed("stage", stage):
            self._emit(TaskUpdated, stage=stage)

    def _shell(self, call: ToolCall, ok: bool, progress: ResultFacts | None) -> None:
        command = shell_command(call) or ""
        if progress is not None and (git := progress.git) is not None:
            self._changed("branch", git.branch)
            self._emit(RepositoryChanged, branch=git.branch, changed_files=git.changed_files,
                       last_commit=git.last_commit, changed_unknown=git.changed_unknown or None)
        if progress is not None and progress.issues:
            self._tracker(progress.issues, progress.updates_tracker)
        m = _CD.match(command)
        if ok and m:
            target = m.group(1).strip("'\"")
            cwd = self._last.get("cwd")
            if not target.startswith(("~", "$", "-")) and (posixpath.isabs(target) or cwd):
                new = posixpath.normpath(posixpath.join(cwd or "/", target))
                if self._changed("cwd", new):
                    self._emit(EnvironmentChanged, cwd=new)

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

    def _relative(self, path: str) -> str:
        """A path under the current directory, relative to it (shorter, and how the agent names it)."""
        cwd = self._last.get("cwd")
        if cwd and path.startswith(cwd.rstrip("/") + "/"):
            return path[len(cwd.rstrip("/")) + 1:]
        return path


def _job_lines(tasks: Iterable[SubagentTask], changed: Mapping[str, int]) -> tuple[str, ...]:
    """One line per job: state, kind, id and what it is; running ones first, then the newest finished
    (`changed`: when each last changed, by call id)."""
    ordered = sorted(tasks, key=lambda t: (t.finished, -changed[t.call_id]))
    lines = []
    for t in ordered[:MAX_JOBS_SHOWN]:
        what = t.description or t.prompt
        name = t.agent_type if t.kind == subagent_facts.AGENT else "shell"
        label = f"{'agent' if t.kind == subagent_facts.AGENT else 'job'} {name}"
        if t.task_id:
            label += f" [{bar_text(t.task_id, 24)}]"
        if what:
            label += f" {bar_text(what, JOB_LABEL_CHARS)}"
        # The state leads: the bar cuts long items at the end, and the state is what changes.
        background = " (background)" if t.background and t.kind == subagent_facts.AGENT else ""
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
