"""The status reducer: applies events one by one, builds snapshots on demand; `reduce` folds a whole log.

A harness session keeps one `StatusReducer` and applies each new event; replaying the same log
into a fresh reducer gives an equal snapshot.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable

from .events import (SECTIONS, Cleared, EnvironmentChanged, Event, FilesTouched, JobsChanged, PermissionsChanged,
                     RepositoryChanged, ResourcesChanged, TaskUpdated, ToolFinished, ToolStarted,
                     VerificationFinished)
from .signals import compute_signals
from .snapshot import SCHEMA, Field, Snapshot

# Tool kinds (see toolkinds.py) that look for things: a run of them finding nothing new is the
# "stop searching" signal.
SEARCH_KINDS = frozenset({"grep", "glob", "search", "list"})


@dataclass
class _ToolStats:
    """Counters over the tool log; provenance is that of the latest tool event."""

    names: dict[str, str] = field(default_factory=dict)  # call id -> tool name, in call order
    tally: dict[str, int] = field(default_factory=dict)  # calls per tool name, kept with `names`
    targets: dict[str, str] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    failures: int = 0
    failure_streak: int = 0
    last_failure: str | None = None
    repeated: int = 0
    search_streak: int = 0
    seen_results: set[str] = field(default_factory=set)
    seen_outputs: set[tuple[str, str]] = field(default_factory=set)
    source: str = "harness"
    message_id: str | None = None

    def _name(self, call_id: str, name: str) -> None:
        if call_id not in self.names:
            self.names[call_id] = name
            self.tally[name] = self.tally.get(name, 0) + 1

    def started(self, e: ToolStarted) -> None:
        self._name(e.call_id, e.name)
        if e.target:
            self.targets[e.call_id] = e.target
        self.source, self.message_id = e.source, e.message_id

    def finish(self, e: ToolFinished) -> None:
        if e.call_id in self.finished:  # a result reported twice is one result
            return
        self.finished.add(e.call_id)
        self._name(e.call_id, e.name)
        self.source, self.message_id = e.source, e.message_id
        if e.ok:
            self.failure_streak, self.last_failure = 0, None
        else:
            self.failures += 1
            self.failure_streak += 1
            target = self.targets.get(e.call_id, "")
            self.last_failure = f"{e.name}: {target}" if target else e.name
            if e.artifact:
                self.last_failure += f" (artifact {e.artifact})"
        if e.output_hash:
            key = (e.name, e.output_hash)
            if key in self.seen_outputs:
                self.repeated += 1
            self.seen_outputs.add(key)
        if e.kind not in SEARCH_KINDS:
            self.search_streak = 0
        elif e.result_hashes is not None:  # unknown results neither extend nor break the run
            new = set(e.result_hashes) - self.seen_results
            self.seen_results |= new
            self.search_streak = 0 if new else self.search_streak + 1

    def fields(self) -> dict[str, Field]:
        if not self.names:
            return {}
        tally = self.tally
        values: dict[str, Any] = {
            "calls": len(self.names),
            "by_tool": [[n, c] for n, c in sorted(tally.items(), key=lambda p: (-p[1], p[0]))],
            "failures": self.failures or None,
            "failure_streak": self.failure_streak or None,
            "last_failure": self.last_failure,
            "repeated": self.repeated or None,
            "search_streak": self.search_streak or None,
        }
        return {n: Field(v, self.source, self.message_id) for n, v in values.items() if v is not None}


def _field(e: Event, value: Any) -> Field:
    return Field(value, e.source, e.message_id, e.freshness)


class StatusReducer:
    """Event-by-event form of `reduce`."""

    def __init__(self) -> None:
        self._fields: dict[str, dict[str, Field]] = {s: {} for s in SECTIONS}
        self._tools = _ToolStats()
        self._tools_shared = False  # `_tools` belongs to the reducer this one was forked from

    def fork(self) -> "StatusReducer":
        """A copy to apply events to, leaving this one as it is. The fields are copied (a few per
        section); the tool log, which grows with the session, is shared until an event changes it,
        so a session applying the harness's events to a copy on every call does not copy the log.
        For a snapshot taken right away: events applied to this reducer later show in a fork's
        shared log."""
        other = StatusReducer.__new__(StatusReducer)
        other._fields = {section: dict(fields) for section, fields in self._fields.items()}
        other._tools, other._tools_shared = self._tools, True
        return other

    def _own_tools(self) -> _ToolStats:
        if self._tools_shared:
            self._tools, self._tools_shared = copy.deepcopy(self._tools), False
        return self._tools

    def _set(self, section: str, name: str, e: Event, value: Any) -> None:
        """Set a field; None leaves it as it is and an empty string removes it."""
        if value is None:
            return
        if value == "":
            self._fields[section].pop(name, None)
        else:
            self._fields[section][name] = _field(e, value)

    def apply(self, e: Event) -> None:
        if isinstance(e, ToolStarted):
            self._own_tools().started(e)
        elif isinstance(e, ToolFinished):
            self._own_tools().finish(e)
        elif isinstance(e, EnvironmentChanged):
            for n in ("cwd", "platform", "shell", "time"):
                self._set("environment", n, e, getattr(e, n))
        elif isinstance(e, RepositoryChanged):
            self._set("repository", "branch", e, e.branch)
            self._set("repository", "last_commit", e, e.last_commit)
            if e.changed_files is not None:
                self._fields["repository"]["changed_files"] = _field(e, sorted(set(e.changed_files)))
            elif e.changed_unknown:
                self._fields["repository"].pop("changed_files", None)
        elif isinstance(e, FilesTouched):
            old = self._fields["repository"].get("changed_files")
            merged = set(old.value if old else ()) | set(e.paths)
            self._fields["repository"]["changed_files"] = _field(e, sorted(merged))
        elif isinstance(e, VerificationFinished):
            run: dict[str, Any] = {"passed": e.passed, "failed": e.failed, "skipped": e.skipped,
                                   "failing": list(e.failing)}
            if e.command:
                run["command"] = e.command
            if e.artifact:
                run["artifact"] = e.artifact
            self._fields["verification"][e.runner] = _field(e, run)
        elif isinstance(e, TaskUpdated):
            self._task(e)
        elif isinstance(e, ResourcesChanged):
            for n in ("tokens_used", "token_limit", "tool_call_limit", "cost_usd", "cost_limit_usd"):
                self._set("resources", n, e, getattr(e, n))
        elif isinstance(e, PermissionsChanged):
            for n in ("sandbox", "approvals", "network"):
                self._set("permissions", n, e, getattr(e, n))
            for n in ("approved", "writable_dirs"):
                if getattr(e, n) is not None:
                    self._fields["permissions"][n] = _field(e, list(getattr(e, n)))
        elif isinstance(e, JobsChanged):
            if e.jobs:
                self._fields["tools"]["jobs"] = _field(e, list(e.jobs))
            else:
                self._fields["tools"].pop("jobs", None)
        elif isinstance(e, Cleared):
            self._clear(e)
        else:
            raise TypeError(f"not a status event: {e!r}")

    def _task(self, e: TaskUpdated) -> None:
        for n in ("goal", "request", "stage"):
            self._set("task", n, e, getattr(e, n))
        if e.todos is not None:
            if e.todos:
                self._fields["task"]["todos"] = _field(
                    e, [{"content": t.text, "status": t.status} for t in e.todos])
            else:
                self._fields["task"].pop("todos", None)
        self._set("task", "next_action", e, e.next_action)

    def _clear(self, e: Cleared) -> None:
        if e.section == "tools":  # counters only make sense together: the section resets whole
            self._tools, self._tools_shared = _ToolStats(), False
            self._fields["tools"].clear()
        elif not e.fields:
            self._fields[e.section].clear()
        else:
            for n in e.fields:
                self._fields[e.section].pop(n, None)

    def snapshot(self) -> Snapshot:
        sections: dict[str, dict[str, Field]] = {}
        for section in SECTIONS[:-1]:  # signals are computed last, from the others
            if section == "tools":
                fields = {**self._tools.fields(), **self._fields["tools"]}
            elif section == "verification":
                fields = dict(sorted(self._fields[section].items()))
            elif section == "resources":
                fields = self._resources()
            else:
                stored = self._fields[section]
                fields = {n: stored[n] for n in SCHEMA[section] if n in stored}
            if fields:
                sections[section] = fields
        signals = compute_signals(sections)
        if signals:
            sections["signals"] = signals
        return Snapshot(sections)

    def _resources(self) -> dict[str, Field]:
        """Stored usage and limits plus what is left, computed here rather than by the model."""
        stored = dict(self._fields["resources"])
        used, limit = stored.get("tokens_used"), stored.get("token_limit")
        if used is not None and limit is not None:
            stored["tokens_left"] = Field(max(limit.value - used.value, 0), used.source,
                                          used.message_id, used.freshness)
        call_limit = stored.get("tool_call_limit")
        if call_limit is not None:
            stored["tool_calls_left"] = Field(max(call_limit.value - len(self._tools.names), 0),
                                              call_limit.source, call_limit.message_id)
        return {n: stored[n] for n in SCHEMA["resources"] if n in stored}


def reduce(events: Iterable[Event]) -> Snapshot:
    """The snapshot a log of events leads to. Pure: equal logs give equal snapshots.

    Counts (calls, failures, repeated results) do not depend on event order; scalar fields are
    last-write-wins; streaks (failures, searches with nothing new) count from the end of the log.
    """
    reducer = StatusReducer()
    for event in events:
        reducer.apply(event)
    return reducer.snapshot()
