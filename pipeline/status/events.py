"""Typed status events and their JSON form.

Every fact on the status bar enters as one of these events, either emitted by the harness
(`session.emit(event)`) or derived from the transcript (`derive.py`). Events validate themselves
on construction, so the reducer only ever sees well-formed facts and a persisted log that was
tampered with fails loudly on load, naming the record and the problem.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping, Union

from ..core.errors import WorksurfaceError
from ..ledger.walk import TodoItem

SOURCES = ("harness", "transcript")
# "current": the value was true when the event happened; "session_start": a snapshot taken when
# the session began and never refreshed (Claude Code's git status), so the model must not take
# it for the current state.
FRESHNESS = ("current", "session_start")
TODO_STATUSES = ("pending", "in_progress", "completed")
SECTIONS = ("task", "environment", "repository", "tools", "verification", "resources",
            "permissions", "signals")
# Runner names become attribute names in the rendered bar: keep them to a safe alphabet (a lower-case
# letter, then at most 31 of these characters).
RUNNER_NAME = "a lower-case letter, then at most 31 of a-z 0-9 _ . -"
_RUNNER_FIRST = frozenset(string.ascii_lowercase)
_RUNNER_REST = frozenset(string.ascii_lowercase + string.digits + "_.-")


def is_runner_name(name: str) -> bool:
    """Whether `name` is a safe runner name (`RUNNER_NAME`)."""
    return 1 <= len(name) <= 32 and name[0] in _RUNNER_FIRST and _RUNNER_REST.issuperset(name[1:])


class StatusError(WorksurfaceError):
    """Status data (an event, a persisted snapshot or publisher state) that is not well formed."""


class StatusEventError(StatusError):
    """An event (or a persisted event record) that is not well formed; says which and why."""


def _check(ok: bool, event: str, problem: str) -> None:
    if not ok:
        raise StatusEventError(f"{event}: {problem}")


def _is_opt_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_opt_count(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _is_opt_amount(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0)


def _is_opt_str_tuple(value: Any) -> bool:
    """Already a tuple of strings (or None): nothing to check or coerce."""
    return value is None or (type(value) is tuple and all(isinstance(v, str) for v in value))


def _opt_str(name: str, value: Any, event: str) -> None:
    _check(_is_opt_str(value), event, f"{name} must be a string or None")


def _opt_count(name: str, value: Any, event: str) -> None:
    _check(_is_opt_count(value), event, f"{name} must be a non-negative integer or None, not {value!r}")


def _opt_amount(name: str, value: Any, event: str) -> None:
    _check(_is_opt_amount(value), event, f"{name} must be a non-negative number or None")


def _str_tuple(obj: Any, name: str, event: str, *, optional: bool = True) -> None:
    """Coerce a list field to a tuple of strings in place (frozen dataclass), or reject it."""
    value = getattr(obj, name)
    if value is None and optional:
        return
    _check(isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value), event,
           f"{name} must be a list of strings")
    object.__setattr__(obj, name, tuple(value))


@dataclass(frozen=True, kw_only=True)
class _Event:
    """Common provenance: who said it, which message it came from, when, and how fresh it is."""

    type: ClassVar[str] = ""
    source: str = "harness"
    message_id: str | None = None
    at: float | None = None
    freshness: str = "current"

    def __post_init__(self) -> None:
        # Events are made for every message a transcript holds: the well-formed case is one expression,
        # and the checks that name the problem run only when it is false.
        if (self.source in SOURCES and self.freshness in FRESHNESS and _is_opt_str(self.message_id)
                and _is_opt_amount(self.at)):
            return
        _check(self.source in SOURCES, self.type, f"source must be one of {SOURCES}")
        _check(self.freshness in FRESHNESS, self.type, f"freshness must be one of {FRESHNESS}")
        _opt_str("message_id", self.message_id, self.type)
        _opt_amount("at", self.at, self.type)


@dataclass(frozen=True)
class ToolStarted(_Event):
    type: ClassVar[str] = "tool_started"
    call_id: str
    name: str
    kind: str = "other"
    target: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.call_id, str) and isinstance(self.name, str) and isinstance(self.kind, str) \
                and isinstance(self.target, str):
            return
        for n in ("call_id", "name", "kind", "target"):
            _check(isinstance(getattr(self, n), str), self.type, f"{n} must be a string")


@dataclass(frozen=True)
class ToolFinished(_Event):
    """A tool result. `result_hashes` are short hashes of a search's result items (None: unknown),
    so the reducer can tell a search that found something new from one that did not."""

    type: ClassVar[str] = "tool_finished"
    call_id: str
    name: str
    kind: str = "other"
    ok: bool = True
    artifact: str | None = None
    output_hash: str | None = None
    result_hashes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if (isinstance(self.call_id, str) and isinstance(self.name, str) and isinstance(self.kind, str)
                and isinstance(self.ok, bool) and _is_opt_str(self.artifact) and _is_opt_str(self.output_hash)
                and _is_opt_str_tuple(self.result_hashes)):
            return
        for n in ("call_id", "name", "kind"):
            _check(isinstance(getattr(self, n), str), self.type, f"{n} must be a string")
        _check(isinstance(self.ok, bool), self.type, "ok must be a boolean")
        _opt_str("artifact", self.artifact, self.type)
        _opt_str("output_hash", self.output_hash, self.type)
        _str_tuple(self, "result_hashes", self.type)


@dataclass(frozen=True)
class EnvironmentChanged(_Event):
    """Fields left None are unchanged; use `Cleared` to remove one."""

    type: ClassVar[str] = "environment_changed"
    cwd: str | None = None
    platform: str | None = None
    shell: str | None = None
    time: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for n in ("cwd", "platform", "shell", "time"):
            _opt_str(n, getattr(self, n), self.type)


@dataclass(frozen=True)
class RepositoryChanged(_Event):
    """`changed_files` replaces the set of changed files (an empty tuple: working tree clean);
    `changed_unknown` says the set is no longer known (after a commit with no `git status` since):
    unknown is not "none"."""

    type: ClassVar[str] = "repository_changed"
    branch: str | None = None
    changed_files: tuple[str, ...] | None = None
    last_commit: str | None = None
    changed_unknown: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.changed_unknown is not None and not isinstance(self.changed_unknown, bool):
            raise StatusEventError(f"{self.type}: changed_unknown must be a boolean")
        _opt_str("branch", self.branch, self.type)
        _opt_str("last_commit", self.last_commit, self.type)
        _str_tuple(self, "changed_files", self.type)


@dataclass(frozen=True)
class FilesTouched(_Event):
    """Files the agent edited or wrote: added to the repository's changed files."""

    type: ClassVar[str] = "files_touched"
    paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _str_tuple(self, "paths", self.type, optional=False)


@dataclass(frozen=True)
class VerificationFinished(_Event):
    """One run of a test suite, linter or type checker; the latest run per `runner` is current."""

    type: ClassVar[str] = "verification_finished"
    runner: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failing: tuple[str, ...] = ()
    artifact: str | None = None
    command: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(isinstance(self.runner, str) and is_runner_name(self.runner), self.type,
               f"runner must be {RUNNER_NAME}, not {self.runner!r}")
        for n in ("passed", "failed", "skipped"):
            _check(getattr(self, n) is not None, self.type, f"{n} is required")
            _opt_count(n, getattr(self, n), self.type)
        _str_tuple(self, "failing", self.type, optional=False)
        _opt_str("artifact", self.artifact, self.type)
        _check(isinstance(self.command, str), self.type, "command must be a string")


@dataclass(frozen=True)
class TaskUpdated(_Event):
    """Goal (the session's task), request (the latest user ask), stage, todos, next action."""

    type: ClassVar[str] = "task_updated"
    goal: str | None = None
    request: str | None = None
    stage: str | None = None
    todos: tuple[TodoItem, ...] | None = None
    next_action: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.todos is None and _is_opt_str(self.goal) and _is_opt_str(self.request) and _is_opt_str(self.stage) \
                and _is_opt_str(self.next_action):
            return
        for n in ("goal", "request", "stage", "next_action"):
            _opt_str(n, getattr(self, n), self.type)
        if self.todos is not None:
            _check(isinstance(self.todos, (list, tuple))
                   and all(isinstance(t, TodoItem) for t in self.todos), self.type,
                   "todos must be a list of TodoItem")
            for t in self.todos:
                _check(isinstance(t.text, str), "todo", "content must be a string")
                _check(t.status in TODO_STATUSES, "todo", f"status must be one of {TODO_STATUSES}")
            object.__setattr__(self, "todos", tuple(self.todos))


@dataclass(frozen=True)
class ResourcesChanged(_Event):
    """Usage and limits; what is left is computed by the reducer (tool calls from the tool log)."""

    type: ClassVar[str] = "resources_changed"
    tokens_used: int | None = None
    token_limit: int | None = None
    tool_call_limit: int | None = None
    cost_usd: float | None = None
    cost_limit_usd: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if (_is_opt_count(self.tokens_used) and _is_opt_count(self.token_limit) and _is_opt_count(self.tool_call_limit)
                and _is_opt_amount(self.cost_usd) and _is_opt_amount(self.cost_limit_usd)):
            return
        for n in ("tokens_used", "token_limit", "tool_call_limit"):
            _opt_count(n, getattr(self, n), self.type)
        for n in ("cost_usd", "cost_limit_usd"):
            _opt_amount(n, getattr(self, n), self.type)


@dataclass(frozen=True)
class PermissionsChanged(_Event):
    type: ClassVar[str] = "permissions_changed"
    sandbox: str | None = None
    approvals: str | None = None
    approved: tuple[str, ...] | None = None
    writable_dirs: tuple[str, ...] | None = None
    network: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for n in ("sandbox", "approvals", "network"):
            _opt_str(n, getattr(self, n), self.type)
        _str_tuple(self, "approved", self.type)
        _str_tuple(self, "writable_dirs", self.type)


@dataclass(frozen=True)
class JobsChanged(_Event):
    """Background jobs and sub-agents with their state (seed 000: background tasks wait on
    something the model cannot see), one line each: `agent Explore "find the parser": running`.
    The list replaces the previous one; an empty list removes the field."""

    type: ClassVar[str] = "jobs_changed"
    jobs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _str_tuple(self, "jobs", self.type, optional=False)


@dataclass(frozen=True)
class Cleared(_Event):
    """Removes fields of a section (all of them when `fields` is empty): they no longer apply."""

    type: ClassVar[str] = "cleared"
    section: str
    fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.section in SECTIONS and self.section != "signals", self.type,
               f"section must be one of {SECTIONS[:-1]}, not {self.section!r}")
        _str_tuple(self, "fields", self.type, optional=False)


Event = Union[ToolStarted, ToolFinished, EnvironmentChanged, RepositoryChanged, FilesTouched,
              VerificationFinished, TaskUpdated, ResourcesChanged, PermissionsChanged, JobsChanged, Cleared]
EVENT_TYPES: dict[str, type] = {cls.type: cls for cls in (
    ToolStarted, ToolFinished, EnvironmentChanged, RepositoryChanged, FilesTouched,
    VerificationFinished, TaskUpdated, ResourcesChanged, PermissionsChanged, JobsChanged, Cleared)}


def event_to_json(event: Event) -> dict[str, Any]:
    """A JSON-ready dict: `type` plus every field that is set (tuples as lists, todos as dicts).
    Fields that are None are left out: they are the defaults, and the log stays small."""
    out: dict[str, Any] = {"type": event.type}
    for f in fields(event):
        value = getattr(event, f.name)
        if value is None:
            continue
        if isinstance(value, tuple):
            value = [{"content": v.text, "status": v.status} if isinstance(v, TodoItem) else v
                     for v in value]
        out[f.name] = value
    return out


def _todo_from_json(data: Any) -> TodoItem:
    """A todo item as events write it (`content`, `status`)."""
    if not isinstance(data, Mapping) or not set(data) <= {"content", "status"} or "content" not in data:
        raise TypeError(f"a todo is {{'content': ..., 'status': ...}}, not {data!r}")
    return TodoItem(data["content"], data.get("status", "pending"))


def event_from_json(data: Mapping[str, Any], *, record: str | None = None) -> Event:
    """Rebuild an event from `event_to_json` output; `record` names it in errors (e.g. a log index)."""
    where = f"event record {record}" if record is not None else "event record"
    if not isinstance(data, Mapping):
        raise StatusEventError(f"{where}: not an object")
    cls = EVENT_TYPES.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise StatusEventError(f"{where}: unknown event type {data.get('type')!r}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known - {"type"})
    if unknown:
        raise StatusEventError(f"{where}: unknown field(s) {', '.join(unknown)} for {data.get('type')}")
    kwargs = {k: v for k, v in data.items() if k != "type"}
    try:
        if cls is TaskUpdated and kwargs.get("todos") is not None:
            kwargs["todos"] = tuple(_todo_from_json(t) for t in kwargs["todos"])
        return cls(**kwargs)
    except StatusEventError as exc:
        raise StatusEventError(f"{where}: {exc}") from None
    except TypeError as exc:
        raise StatusEventError(f"{where}: {exc}") from None
