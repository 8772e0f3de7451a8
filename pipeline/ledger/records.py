"""The ledger's records, by kind (`kinds.KINDS`) and the singletons beside them, and `LedgerView`: the
records as of a cut, answering `FactSource` questions."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable, Iterable, Sequence, TypeVar

from ..facts import (AgentUse, Announcement, Approach, Commit, Constraint, ErrorFact, FileFact, Finding, Identifiers,
                     Outcome, PlanMode, SkillUse, TaskSpec, TestRun, TodoState, TrackerUpdate, UserMessage)
from ..facts.plans import is_plan_document
from ..facts.subagents import SubagentTask
from .kinds import KINDS
from .source import EditGist

T = TypeVar("T")

# File contents the ledger keeps for reinjection: the newest files only (older ones are re-read from
# the workspace, or named without content); a content is capped at this many characters.
MAX_FILES_WITH_CONTENT = 16
# Plan documents keep their content however old (the newest this many), beside those 16.
MAX_PLAN_DOCUMENTS_WITH_CONTENT = 8
MAX_CONTENT_CHARS = 40_000

_STAMPS = itertools.count(1)  # unique within the process: a stamp never names two states of a kind


@dataclasses.dataclass
class Records:
    """Every record, keyed so that reading the same message twice changes nothing: the kinds of
    `kinds.KINDS` by name (`kind(name)`), and the few singletons and counters beside them."""

    kinds: dict[str, dict[str, Any]] = dataclasses.field(default_factory=lambda: {k.name: {} for k in KINDS})
    # A new stamp whenever a kind's records change: a save writes a kind only when its stamp moved, so
    # a call's save follows what changed, not how many records the session holds (not persisted).
    versions: dict[str, int] = dataclasses.field(default_factory=lambda: {k.name: 0 for k in KINDS})
    mcp: dict[str, int] = dataclasses.field(default_factory=dict)
    # Messages per working directory they report: the session's main cwd is the most reported one.
    cwds: dict[str, int] = dataclasses.field(default_factory=dict)
    # Calls per tool name (each call counted once, when its message is first folded).
    tools: dict[str, int] = dataclasses.field(default_factory=dict)
    todo: TodoState | None = None
    plan: PlanMode | None = None
    plan_index: int = -1
    identifiers: Identifiers | None = None
    # Earlier summaries, verbatim, by message id: another harness's (Claude Code's own compaction),
    # and worksurface's own when it stands for history this ledger never saw (nothing before it).
    earlier: dict[str, str] = dataclasses.field(default_factory=dict)
    own_summaries: dict[str, str] = dataclasses.field(default_factory=dict)
    conversation_seen: int = 0

    def kind(self, name: str) -> dict[str, Any]:
        """The records of one kind, by key."""
        return self.kinds[name]

    def replace(self, name: str, records: dict[str, Any], changed: bool = True) -> None:
        """Set one kind's records (`changed`: they differ from what it held)."""
        self.kinds[name] = records
        if changed:
            self.changed(name)

    def changed(self, name: str) -> None:
        """One kind's records changed in place."""
        self.versions[name] = next(_STAMPS)


# The fields that say what a record is, first found first: its text, or what it names.
_ENTRY_TEXT_FIELDS = ("text", "summary", "gist", "subject", "description", "path", "command", "name", "target",
                      "line", "label")
_ENTRY_SOURCE_FIELDS = ("message_id", "last_message_id", "content_message_id")


def entry_text(record: Any) -> str:
    """A record in one line for the report: its text, or its naming fields joined."""
    parts = [str(v) for name in _ENTRY_TEXT_FIELDS if isinstance(v := getattr(record, name, None), str) and v]
    return " · ".join(dict.fromkeys(parts[:3])) or type(record).__name__


def entry_source(record: Any) -> str | None:
    ids = getattr(record, "message_ids", None)
    if ids:
        return str(next(iter(ids)))
    return next((str(v) for name in _ENTRY_SOURCE_FIELDS if (v := getattr(record, name, None))), None)


class LedgerView:
    """The ledger as of a cut, answering `FactSource` questions (records established before the cut)."""

    def __init__(self, records: Records, cut: int) -> None:
        self.r = records
        self.cut = cut

    def _before(self, items: Iterable[T], index: Callable[[T], int]) -> list[T]:
        return sorted((x for x in items if index(x) < self.cut), key=index)

    def records(self, name: str) -> list[Any]:
        """The records of one kind (`kinds.KINDS`) established before the cut, oldest first."""
        return self._before(self.r.kind(name).values(), lambda x: x.index)

    def user_messages(self) -> list[UserMessage]:
        return self.records("requests")

    def standing_constraints(self) -> list[Constraint]:
        return self.records("constraints")

    def findings(self) -> list[Finding]:
        return self.records("findings")

    def excluded_approaches(self) -> list[Approach]:
        return self.records("approaches")

    def task_specs(self) -> list[TaskSpec]:
        return self.records("specs")

    def tool_errors(self) -> list[ErrorFact]:
        return self.records("errors")

    def file_activity(self) -> list[FileFact]:
        files = [f for f in self.r.kind("files").values() if f.first_index < self.cut]
        return sorted(files, key=lambda f: -f.last_index)

    def test_runs(self) -> list[TestRun]:
        return self.records("tests")

    def todo_state(self) -> TodoState | None:
        todo = self.r.todo
        return todo if todo is not None and todo.index < self.cut else None

    def plan_mode(self) -> PlanMode:
        plan = self.r.plan
        if plan is None or self.r.plan_index >= self.cut:
            return PlanMode(False, None, None, False, None)
        return plan

    def commits(self) -> list[Commit]:
        return self.records("commits")

    def tracker_updates(self) -> list[TrackerUpdate]:
        return self.records("tracker")

    def identifiers(self) -> Identifiers:
        ids = self.r.identifiers
        if ids is None:
            return Identifiers.empty()
        return ids

    def skills_invoked(self) -> list[SkillUse]:
        return self.records("skills")

    def recent_edits(self, n: int) -> list[EditGist]:
        return self.records("edits")[::-1][:n]

    def recent_outcomes(self, n: int) -> list[Outcome]:
        return self.records("outcomes")[::-1][:n]

    def announced_tools(self) -> list[Announcement]:
        return self.records("announcements")

    def subagent_tasks(self) -> list[SubagentTask]:
        """Sub-agent and background tasks launched before the cut, with the latest state folded (a
        state reported after the cut shows too: the ledger keeps one state per task, not its history)."""
        return self.records("subagents")

    def agents_used(self) -> list[AgentUse]:
        return self.records("agents")

    def mcp_servers(self) -> list[str]:
        return sorted(self.r.mcp, key=lambda n: self.r.mcp[n])

    def tools_used(self) -> dict[str, int]:
        return dict(self.r.tools)

    def main_cwd(self) -> str | None:
        """The working directory most messages report (ties: the newest known)."""
        if not self.r.cwds:
            return self.identifiers().cwd
        newest = self.identifiers().cwd
        return max(self.r.cwds, key=lambda c: (self.r.cwds[c], c == newest))

    def earlier_summaries(self) -> list[str]:
        return list(self.r.earlier.values())

    def own_summaries(self) -> list[str]:
        return list(self.r.own_summaries.values())


def file_records(files: Sequence[FileFact]) -> dict[str, FileFact]:
    """The file records by path; only the newest files and the plan documents (the plan the work goes
    through, however long ago it was read) keep their content (capped), the others are re-read from
    the workspace or named without content."""
    out: dict[str, FileFact] = {}
    with_content = plans = 0
    for f in sorted(files, key=lambda f: -f.last_index):
        content = f.content
        if content is not None:
            plan = is_plan_document(f.path) and plans < MAX_PLAN_DOCUMENTS_WITH_CONTENT
            plans += plan
            with_content += not plan
            if with_content > MAX_FILES_WITH_CONTENT and not plan:
                f = dataclasses.replace(f, content=None, content_message_id=None)
            elif len(content) > MAX_CONTENT_CHARS:
                f = dataclasses.replace(f, content=content[:MAX_CONTENT_CHARS], partial=True)
        out[f.path] = f
    return out
