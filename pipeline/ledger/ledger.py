"""The surface ledger: the working state as typed records, kept in the session store beside the log and
the edits, so a compaction is a state migration instead of a summary of the previous summary.

Each message is folded in once, when it first reaches a `prepare`: the fact extractors run over the
new messages plus the few earlier ones whose tool calls still wait for a result (so a call and its
result, which arrive on different calls, are read together), and their records merge into the
ledger by key. A record leaves only when a newer one supersedes it (a file's later state, a todo
list's new version, an error a later success resolved), never because a compaction happened. The
summary, the reinjectors and the status baseline render from it; none of them re-reads worksurface's
own earlier output, which the fold skips.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .. import facts
from ..facts import (AgentUse, Announcement, Approach, Commit, Constraint, ErrorFact, FileFact, Identifiers,
                     PlanMode, SkillUse, TaskSpec, TestRun, TodoState, TrackerUpdate, UserMessage)
from ..facts.errors import RESOLUTION_WINDOW
from ..facts.files import FileTracker
from ..facts import subagents as subagent_facts
from ..facts.subagents import SubagentTask
from ..model import Message, Origin
from . import codec
from .source import EditGist, edit_gists

T = TypeVar("T")

# A call still waiting for its result keeps its message in the fold window; past this many messages
# the call is taken as abandoned (a harness that never answers it), so the window stays bounded.
MAX_CARRY_MESSAGES = 24
# Identifier lists keep the newest values; enough for a long session's branches, commits and the
# verification commands, without growing with every command ever run.
IDENTIFIER_CAPS = {"branches": 12, "worktrees": 12, "commits": 40, "issues": 40, "paths": 120,
                   "commands": 60, "test_counts": 12, "urls": 40}
DEFAULT_IDENTIFIER_CAP = 60
# File contents the ledger keeps for reinjection: the newest files only (older ones are re-read from
# the workspace, or named without content); a content is capped at this many characters.
MAX_FILES_WITH_CONTENT = 16
MAX_CONTENT_CHARS = 40_000
# An unresolved error keeps the errors window open back to it, up to this many messages (a retry
# or fix is looked for RESOLUTION_WINDOW calls ahead, two messages a call).
MAX_ERROR_WINDOW_MESSAGES = 2 * RESOLUTION_WINDOW + 2
# Edit gists kept (newest): a summary offers at most a few dozen.
MAX_EDIT_GISTS = 60
LEDGER_VERSION = 1


def _fold_text(text: str) -> str:
    return " ".join(text.lower().split())


@dataclasses.dataclass
class _Records:
    """Every record kind, keyed so that reading the same message twice changes nothing."""

    requests: dict[str, UserMessage] = dataclasses.field(default_factory=dict)
    constraints: dict[str, Constraint] = dataclasses.field(default_factory=dict)
    approaches: dict[str, Approach] = dataclasses.field(default_factory=dict)
    specs: dict[str, TaskSpec] = dataclasses.field(default_factory=dict)
    errors: dict[str, ErrorFact] = dataclasses.field(default_factory=dict)
    files: dict[str, FileFact] = dataclasses.field(default_factory=dict)
    tests: dict[str, TestRun] = dataclasses.field(default_factory=dict)
    commits: dict[str, Commit] = dataclasses.field(default_factory=dict)
    edits: dict[str, EditGist] = dataclasses.field(default_factory=dict)
    tracker: dict[str, TrackerUpdate] = dataclasses.field(default_factory=dict)
    skills: dict[str, SkillUse] = dataclasses.field(default_factory=dict)
    announcements: dict[str, Announcement] = dataclasses.field(default_factory=dict)
    agents: dict[str, AgentUse] = dataclasses.field(default_factory=dict)
    subagents: dict[str, SubagentTask] = dataclasses.field(default_factory=dict)  # by call id
    mcp: dict[str, int] = dataclasses.field(default_factory=dict)
    todo: TodoState | None = None
    plan: PlanMode | None = None
    plan_index: int = -1
    identifiers: Identifiers | None = None
    # Earlier summaries, verbatim, by message id: another harness's (Claude Code's own compaction),
    # and worksurface's own when it stands for history this ledger never saw (nothing before it).
    earlier: dict[str, str] = dataclasses.field(default_factory=dict)
    own_summaries: dict[str, str] = dataclasses.field(default_factory=dict)
    conversation_seen: int = 0


_RECORD_TYPES: dict[str, type] = {
    "requests": UserMessage, "constraints": Constraint, "approaches": Approach, "specs": TaskSpec,
    "errors": ErrorFact, "files": FileFact, "tests": TestRun, "commits": Commit, "edits": EditGist, "tracker": TrackerUpdate,
    "skills": SkillUse, "announcements": Announcement, "agents": AgentUse, "subagents": SubagentTask,
}


class Ledger:
    """The session's working state. `update(transcript)` before each graph run; `upto(index)` for the
    state as of a cut (what a summary of the messages before it should say)."""

    def __init__(self) -> None:
        self.records = _Records()
        self.count = 0            # messages of the transcript folded so far
        self.last_digest: str | None = None
        self.carry_from = 0       # where the next fold window starts (open calls)
        self.files = FileTracker()
        self.errors_from = 0      # where the errors window starts: the oldest error still unresolved
        self.dirty = False        # changed since the store last saved it
        self.saved_count = 0      # `count` when the store last saved it
        self._positions: dict[str, int] = {}  # message id -> index in the transcript (not persisted)

    # --- folding ----------------------------------------------------------------------------------

    def update(self, transcript: Sequence[Message], *, rebuild: bool = False,
               queued: Sequence[tuple[str | None, str]] = ()) -> None:
        """Fold the messages not seen yet. A transcript that no longer extends what was folded
        (rewound or edited history) is folded again from the start."""
        n = len(transcript)
        diverged = self.count > n or (self.count and transcript[self.count - 1].digest != self.last_digest)
        if rebuild or diverged:
            self.__init__()  # type: ignore[misc]
        if len(self._positions) < min(self.count, n):
            self._positions = {m.id: i for i, m in enumerate(transcript[: self.count])}
        if self.count >= n:
            return
        for i in range(self.count, n):
            self._positions.setdefault(transcript[i].id, i)
        start = min(self.carry_from, self.count)
        self._fold(transcript[start:], start, queued, self.count)
        self._fold_errors(transcript, max(min(self.errors_from, start), n - MAX_ERROR_WINDOW_MESSAGES), n)
        self.count, self.last_digest = n, transcript[-1].digest
        self.carry_from = _open_call_start(transcript, start, n)
        self.dirty = True

    def _fold_errors(self, transcript: Sequence[Message], start: int, end: int) -> None:
        """Errors and their resolutions over the window from the oldest unresolved error: a fix or a
        retry that comes many calls later resolves it exactly as a one-shot reading would."""
        window = [(i, m) for i, m in enumerate(transcript[start:end], start) if m.origin is Origin.CONVERSATION]
        index = [i for i, _ in window]
        messages = [m for _, m in window]
        called_at = {rec.call.id: index[rec.index] for rec in facts.tool_calls(messages)}
        for e in facts.tool_errors(messages):
            self.records.errors[e.call_id] = dataclasses.replace(e, index=index[e.index])
        unresolved = [called_at[e.call_id] for e in self.records.errors.values()
                      if not e.resolved and e.call_id in called_at]
        self.errors_from = min(unresolved, default=end)

    def _fold(self, window: Sequence[Message], base: int, queued: Sequence[tuple[str | None, str]],
              new_from: int) -> None:
        r = self.records
        for i, m in enumerate(window):
            if m.origin is Origin.CONVERSATION:
                r.conversation_seen = max(r.conversation_seen, base + i + 1)
            elif m.origin is Origin.SUMMARY and not any(
                    w.origin is Origin.CONVERSATION for w in window[:i]) and r.conversation_seen <= base:
                r.own_summaries[m.id] = m.text  # its history is not in this transcript: carry what it says
        keep = [(base + i, m) for i, m in enumerate(window) if m.origin is Origin.CONVERSATION]
        if not keep:
            return
        index = [g for g, _ in keep]
        messages = [m for _, m in keep]
        for m in messages:
            if m.meta.get("is_compact_summary"):
                self.records.earlier[m.id] = m.text.strip()

        def at(i: int) -> int:
            return index[i] if 0 <= i < len(index) else i

        for u in facts.user_messages(messages, queued):
            u = dataclasses.replace(u, index=at(u.index))
            r.requests[f"{u.message_id}:{int(u.queued)}:{_fold_text(u.text)[:80]}"] = u
        for c in facts.standing_constraints(messages, queued):
            key = _fold_text(c.text)
            if key not in r.constraints:
                r.constraints[key] = dataclasses.replace(c, index=at(c.index))
        for a in facts.excluded_approaches(messages, queued):
            key = f"{a.kind}:{_fold_text(a.text)}"
            if key not in r.approaches:
                r.approaches[key] = dataclasses.replace(a, index=at(a.index))
        for s in facts.task_specs(messages):
            r.specs[s.origin] = dataclasses.replace(s, index=at(s.index))
        records = facts.tool_calls(messages)
        for g2 in edit_gists(records):
            r.edits[f"{g2.message_id}:{g2.target}:{g2.gist[:40]}"] = dataclasses.replace(g2, index=at(g2.index))
        if len(r.edits) > MAX_EDIT_GISTS:
            newest = sorted(r.edits.items(), key=lambda kv: kv[1].index)[-MAX_EDIT_GISTS:]
            r.edits = dict(newest)
        self.files.feed(messages, index, new_from)
        r.files = _with_newest_contents(self.files.facts())
        for t in facts.test_runs(messages):
            r.tests[f"{t.message_id}:{t.command}"] = dataclasses.replace(t, index=at(t.index))
        for c2 in facts.commits(messages):
            r.commits[c2.hash] = dataclasses.replace(c2, index=at(c2.index))
        for u2 in facts.tracker_updates(messages):
            r.tracker[f"{u2.message_id}:{u2.command}"] = dataclasses.replace(u2, index=at(u2.index))
        for s2 in facts.skills_invoked(messages):
            r.skills[s2.name] = dataclasses.replace(s2, index=at(s2.index))
        for a2 in facts.announced_tools(messages):
            r.announcements[f"{a2.kind}:{a2.message_id}"] = dataclasses.replace(a2, index=at(a2.index))
        r.subagents = subagent_facts.fold(r.subagents, messages, at, queued)
        for g in facts.agents_used(messages):
            r.agents[f"{g.agent_type}:{g.message_id}"] = dataclasses.replace(g, index=at(g.index))
        for name in facts.mcp_servers(messages):
            r.mcp[name] = max(r.mcp.get(name, -1), index[-1])
        todo = facts.todo_state(messages)
        if todo is not None and (r.todo is None or at(todo.index) >= r.todo.index):
            r.todo = dataclasses.replace(todo, index=at(todo.index))
        plan = facts.plan_mode(messages)
        if plan.message_id is not None or plan.active or plan.plan:
            where = self._positions.get(plan.message_id) if plan.message_id else None
            r.plan, r.plan_index = plan, where if where is not None else index[-1]
        self._merge_identifiers(facts.identifiers(messages))

    def _merge_identifiers(self, new: Identifiers) -> None:
        """Every list field keeps the newest values first (the extractor's order), capped."""
        old = self.records.identifiers
        if old is None:
            self.records.identifiers = new
            return
        merged: dict[str, Any] = {}
        for f in dataclasses.fields(Identifiers):
            ours, theirs = getattr(old, f.name), getattr(new, f.name)
            if not isinstance(theirs, tuple):
                merged[f.name] = theirs or ours  # cwd: the newest known
                continue
            values = list(theirs) + [v for v in ours if v not in theirs]
            merged[f.name] = tuple(values[: IDENTIFIER_CAPS.get(f.name, DEFAULT_IDENTIFIER_CAP)])
        self.records.identifiers = Identifiers(**merged)

    # --- reading --------------------------------------------------------------------------------------

    def position(self, message_id: str) -> int | None:
        """Where a message stands in the transcript (None: not folded, or worksurface's own)."""
        return self._positions.get(message_id)

    def upto(self, cut: int | None = None) -> "LedgerView":
        """The state as of the messages before `cut` (everything when None)."""
        return LedgerView(self.records, self.count if cut is None else cut)

    def entry_counts(self) -> dict[str, int]:
        """How many records of each kind the ledger holds (reports, the HTML page)."""
        r = self.records
        counts = {name: len(getattr(r, name)) for name in _RECORD_TYPES}
        counts.update(mcp=len(r.mcp), todo=int(r.todo is not None), plan=int(r.plan is not None),
                      earlier=len(r.earlier), own_summaries=len(r.own_summaries))
        return counts

    # --- persistence --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        r = self.records
        data: dict[str, Any] = {"version": LEDGER_VERSION, "count": self.count, "last_digest": self.last_digest,
                                "carry_from": self.carry_from, "file_tracker": self.files.to_json()}
        for name in _RECORD_TYPES:
            data[name] = {k: codec.to_json(v) for k, v in getattr(r, name).items()}
        data.update(errors_from=self.errors_from, mcp=dict(r.mcp), todo=codec.to_json(r.todo), plan=codec.to_json(r.plan),
                    plan_index=r.plan_index, identifiers=codec.to_json(r.identifiers),
                    earlier=dict(r.earlier), own_summaries=dict(r.own_summaries),
                    conversation_seen=r.conversation_seen)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Ledger":
        ledger = cls()
        if not data or data.get("version") != LEDGER_VERSION:
            return ledger  # a new session, or an older format: folded again from the transcript
        ledger.count, ledger.last_digest = int(data["count"]), data.get("last_digest")
        ledger.carry_from = int(data.get("carry_from", ledger.count))
        ledger.files = FileTracker.from_json(data.get("file_tracker"))
        ledger.saved_count = ledger.count
        r = ledger.records
        for name, kind in _RECORD_TYPES.items():
            setattr(r, name, {k: codec.from_json(kind, v) for k, v in data.get(name, {}).items()})
        ledger.errors_from = int(data.get("errors_from", ledger.count))
        r.mcp = {k: int(v) for k, v in data.get("mcp", {}).items()}
        r.todo = codec.from_json(TodoState, data["todo"]) if data.get("todo") else None
        r.plan = codec.from_json(PlanMode, data["plan"]) if data.get("plan") else None
        r.plan_index = int(data.get("plan_index", -1))
        r.identifiers = codec.from_json(Identifiers, data["identifiers"]) if data.get("identifiers") else None
        r.earlier = dict(data.get("earlier", {}))
        r.own_summaries = dict(data.get("own_summaries", {}))
        r.conversation_seen = int(data.get("conversation_seen", 0))
        return ledger


class LedgerView:
    """The ledger as of a cut, answering `FactSource` questions (records established before the cut)."""

    def __init__(self, records: _Records, cut: int) -> None:
        self.r = records
        self.cut = cut

    def _before(self, items: Iterable[T], index: Callable[[T], int]) -> list[T]:
        return sorted((x for x in items if index(x) < self.cut), key=index)

    def user_messages(self) -> list[UserMessage]:
        return self._before(self.r.requests.values(), lambda u: u.index)

    def standing_constraints(self) -> list[Constraint]:
        return self._before(self.r.constraints.values(), lambda c: c.index)

    def excluded_approaches(self) -> list[Approach]:
        return self._before(self.r.approaches.values(), lambda a: a.index)

    def task_specs(self) -> list[TaskSpec]:
        return self._before(self.r.specs.values(), lambda s: s.index)

    def tool_errors(self) -> list[ErrorFact]:
        return self._before(self.r.errors.values(), lambda e: e.index)

    def file_activity(self) -> list[FileFact]:
        files = [f for f in self.r.files.values() if f.first_index < self.cut]
        return sorted(files, key=lambda f: -f.last_index)

    def test_runs(self) -> list[TestRun]:
        return self._before(self.r.tests.values(), lambda t: t.index)

    def todo_state(self) -> TodoState | None:
        todo = self.r.todo
        return todo if todo is not None and todo.index < self.cut else None

    def plan_mode(self) -> PlanMode:
        plan = self.r.plan
        if plan is None or self.r.plan_index >= self.cut:
            return PlanMode(False, None, None, False, None)
        return plan

    def commits(self) -> list[Commit]:
        return self._before(self.r.commits.values(), lambda c: c.index)

    def tracker_updates(self) -> list[TrackerUpdate]:
        return self._before(self.r.tracker.values(), lambda u: u.index)

    def identifiers(self) -> Identifiers:
        ids = self.r.identifiers
        if ids is None:
            return Identifiers(**{f.name: None if f.name == "cwd" else () for f in dataclasses.fields(Identifiers)})
        return ids

    def skills_invoked(self) -> list[SkillUse]:
        return self._before(self.r.skills.values(), lambda s: s.index)

    def recent_edits(self, n: int) -> list[EditGist]:
        return self._before(self.r.edits.values(), lambda e: e.index)[::-1][:n]

    def announced_tools(self) -> list[Announcement]:
        return self._before(self.r.announcements.values(), lambda a: a.index)

    def subagent_tasks(self) -> list[SubagentTask]:
        """Sub-agent and background tasks launched before the cut, with their latest state."""
        return self._before(self.r.subagents.values(), lambda t: t.index)

    def agents_used(self) -> list[AgentUse]:
        return self._before(self.r.agents.values(), lambda a: a.index)

    def mcp_servers(self) -> list[str]:
        return sorted(self.r.mcp, key=lambda n: self.r.mcp[n])

    def earlier_summaries(self) -> list[str]:
        return list(self.r.earlier.values())

    def own_summaries(self) -> list[str]:
        return list(self.r.own_summaries.values())


def _with_newest_contents(files: Sequence[FileFact]) -> dict[str, FileFact]:
    """The file records by path; only the newest files keep their content (capped), the others are
    re-read from the workspace or named without content."""
    out: dict[str, FileFact] = {}
    with_content = 0
    for f in sorted(files, key=lambda f: -f.last_index):
        if f.content is not None:
            with_content += 1
            if with_content > MAX_FILES_WITH_CONTENT:
                f = dataclasses.replace(f, content=None, content_message_id=None)
            elif len(f.content) > MAX_CONTENT_CHARS:
                f = dataclasses.replace(f, content=f.content[:MAX_CONTENT_CHARS], partial=True)
        out[f.path] = f
    return out


def _open_call_start(transcript: Sequence[Message], start: int, end: int) -> int:
    """The earliest index (within the last MAX_CARRY_MESSAGES) whose tool call has no result yet."""
    lo = max(start, end - MAX_CARRY_MESSAGES)
    answered = {r.call_id for m in transcript[lo:end] for r in m.tool_results}
    for i in range(lo, end):
        if any(c.id not in answered for c in transcript[i].tool_calls):
            return i
    return end
