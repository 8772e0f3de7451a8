"""Where the summary and the reinjectors get their facts: the session's ledger, or (without a
session) the fact extractors run directly over a list of messages. Both answer the same questions
with the same record types, so a rendering never knows which one it reads."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

from .. import facts
from ..facts import (AgentUse, Announcement, Approach, Commit, Constraint, ErrorFact, FileFact, Finding, Identifiers,
                     PlanMode, SkillUse, TaskSpec, TestRun, TodoState, TrackerUpdate, UserMessage)
from ..facts.meta import message_cwd
from ..core.model import Message, Origin


@dataclass(frozen=True)
class EditGist:
    """What a successful edit added first (verbatim), on which file: facts that often exist only in
    an edit's body."""

    target: str
    gist: str
    message_id: str
    index: int


def edit_gists(records: Sequence[facts.CallRecord]) -> list[EditGist]:
    """The gists of the successful edits among `records`, oldest first."""
    out = []
    for rec in records:
        if rec.kind == "edit" and rec.succeeded:
            gist = facts.edit_gist(dict(rec.call.input))
            if gist:
                out.append(EditGist(rec.target, gist, rec.message_id, rec.index))
    return out


class FactSource(Protocol):
    """The working state, as typed records; `index` fields order them (larger is newer)."""

    def user_messages(self) -> list[UserMessage]: ...
    def standing_constraints(self) -> list[Constraint]: ...
    def excluded_approaches(self) -> list[Approach]: ...
    def findings(self) -> list[Finding]: ...
    def task_specs(self) -> list[TaskSpec]: ...
    def tool_errors(self) -> list[ErrorFact]: ...
    def file_activity(self) -> list[FileFact]: ...
    def test_runs(self) -> list[TestRun]: ...
    def todo_state(self) -> TodoState | None: ...
    def plan_mode(self) -> PlanMode: ...
    def commits(self) -> list[Commit]: ...
    def tracker_updates(self) -> list[TrackerUpdate]: ...
    def identifiers(self) -> Identifiers: ...
    def skills_invoked(self) -> list[SkillUse]: ...
    def recent_edits(self, n: int) -> list[EditGist]:
        """The newest `n` edit gists, newest first."""
        ...
    def announced_tools(self) -> list[Announcement]: ...
    def agents_used(self) -> list[AgentUse]: ...
    def mcp_servers(self) -> list[str]: ...
    def tools_used(self) -> dict[str, int]:
        """Calls per tool name."""
        ...
    def main_cwd(self) -> str | None:
        """The working directory most messages report."""
        ...
    def earlier_summaries(self) -> list[str]:
        """Another harness's summaries (Claude Code's own compactions), verbatim, oldest first."""
        ...
    def own_summaries(self) -> list[str]:
        """worksurface's own earlier summaries that stand for history no longer available."""
        ...


class MessageFacts:
    """Facts extracted from `messages` on demand (the one-shot path: no session, no ledger)."""

    def __init__(self, messages: Sequence[Message], queued: Sequence[tuple[str | None, str]] = ()) -> None:
        self.messages = messages
        self.queued = queued

    def user_messages(self) -> list[UserMessage]:
        return facts.user_messages(self.messages, self.queued)

    def standing_constraints(self) -> list[Constraint]:
        return facts.standing_constraints(self.messages, self.queued)

    def excluded_approaches(self) -> list[Approach]:
        return facts.excluded_approaches(self.messages, self.queued)

    def findings(self) -> list[Finding]:
        return facts.findings(self.messages)

    def task_specs(self) -> list[TaskSpec]:
        return facts.task_specs(self.messages, self.queued)

    def tool_errors(self) -> list[ErrorFact]:
        return facts.tool_errors(self.messages)

    def file_activity(self) -> list[FileFact]:
        return facts.file_activity(self.messages)

    def test_runs(self) -> list[TestRun]:
        return facts.test_runs(self.messages)

    def todo_state(self) -> TodoState | None:
        return facts.todo_state(self.messages)

    def plan_mode(self) -> PlanMode:
        return facts.plan_mode(self.messages)

    def commits(self) -> list[Commit]:
        return facts.commits(self.messages)

    def tracker_updates(self) -> list[TrackerUpdate]:
        return facts.tracker_updates(self.messages)

    def identifiers(self) -> Identifiers:
        return facts.identifiers(self.messages)

    def skills_invoked(self) -> list[SkillUse]:
        return facts.skills_invoked(self.messages)

    def recent_edits(self, n: int) -> list[EditGist]:
        return edit_gists(facts.tool_calls(self.messages))[::-1][:n]

    def announced_tools(self) -> list[Announcement]:
        return facts.announced_tools(self.messages)

    def agents_used(self) -> list[AgentUse]:
        return facts.agents_used(self.messages)

    def mcp_servers(self) -> list[str]:
        return facts.mcp_servers(self.messages)

    def main_cwd(self) -> str | None:
        counts = Counter(c for c in (message_cwd(m) for m in self.messages) if c)
        if not counts:
            return None
        last = {message_cwd(m): i for i, m in enumerate(self.messages)}
        return max(counts, key=lambda c: (counts[c], last.get(c, -1)))

    def tools_used(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.messages:
            for call in m.tool_calls:
                counts[call.name] = counts.get(call.name, 0) + 1
        return counts

    def earlier_summaries(self) -> list[str]:
        return [m.text.strip() for m in self.messages
                if m.origin is Origin.CONVERSATION and m.meta.get("is_compact_summary")]

    def own_summaries(self) -> list[str]:
        # Only a summary with nothing before it stands for history these messages do not have.
        first = next((m for m in self.messages if m.origin in (Origin.CONVERSATION, Origin.SUMMARY)), None)
        return [first.text] if first is not None and first.origin is Origin.SUMMARY else []
