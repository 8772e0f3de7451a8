"""The ledger's record kinds, each declared once: its type, its extractor (over a fold's window, or
over the progress reader's reading of each result), the key records merge by, the merge rule, its
cap, and whether it is stored. The fold, the persistence, the report's entries and the views are
written once against this table, so a new kind of fact is one row here (plus its extractor in facts/
and the question it answers in `FactSource`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

from .. import facts
from ..core.model import Message
from ..facts import answers, followups, runtimes
from ..facts import (AgentUse, Announcement, Approach, Commit, Constraint, ErrorFact, FileFact, Finding, Outcome,
                     SkillUse, TaskSpec, TestRun, TrackerUpdate, UserMessage)
from ..facts.reading import ResultFacts
from ..facts.subagents import SubagentTask
from .source import EditGist, edit_gists

# Edit gists kept (newest): a summary offers at most a few dozen.
MAX_EDIT_GISTS = 60
# What the latest calls showed (a few output lines each): a summary quotes the newest few dozen.
MAX_OUTCOMES = 80
# The agent's follow-ups and verification reports kept (newest): a summary quotes a handful.
MAX_FOLLOW_UPS = 40
# Programs whose versions are kept (the newest queried).
MAX_RUNTIMES = 20


def fold_text(text: str) -> str:
    """Case and whitespace folded: the key of a record that is its text."""
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class Window:
    """What one fold reads: the conversation messages new since the last (with the open calls before
    them), the user text queued meanwhile, and what the user said in earlier windows."""

    messages: Sequence[Message]
    queued: Sequence[tuple[str | None, str]]
    earlier: tuple[str, ...]
    calls: Sequence[facts.CallRecord]


Merge = Literal["first", "latest"]


@dataclass(frozen=True)
class SummaryLine:
    """How a kind's records read in the structured summary, declared with the kind: one line per
    record (`text`), newest first, in the section headed `section` (one of `summarizers.sections`'
    headings), under the label `group`. The lines are filler: offered only once no section has a
    non-filler item left that fits, so a kind added this way never displaces another's facts."""

    section: str
    group: str
    text: Callable[[Any], str]


@dataclass(frozen=True)
class Kind:
    """One kind of record. `extract` yields its records from a window, `index` fields relative to it;
    `from_result` instead takes them from what the progress reader read of each result as its message
    arrived (`facts.reading`, indices the transcript's); with neither, the ledger folds it by its own
    rule, named in `folded_by`. `merge` says which of two records with one key stands: the first (a
    constraint keeps when it was first said) or the latest (a test run's newer result). `cap` keeps
    the newest that many; `stored` False: the kind is rebuilt from other stored state on load (the
    files, from the file tracker). `summary`: how its records read in the structured summary, when
    the summarizer renders them from this declaration (kinds with a section of their own leave it None)."""

    name: str
    type: type
    key: Callable[[Any], str]
    extract: Callable[[Window], Iterable[Any]] | None = None
    merge: Merge = "latest"
    cap: int | None = None
    stored: bool = True
    folded_by: str = ""
    from_result: Callable[[ResultFacts], Iterable[Any]] | None = None
    summary: SummaryLine | None = None

    def put(self, records: dict[str, Any], record: Any) -> bool:
        """Merge one record into this kind's records; True when that changed them."""
        key = self.key(record)
        if key in records and (self.merge == "first" or records[key] == record):
            return False
        records[key] = record
        return True

    def fold(self, records: dict[str, Any], window: Window, at: Callable[[int], int]) -> tuple[dict[str, Any], bool]:
        """This kind's records once the window's are merged (positions made the transcript's), capped;
        and whether they changed."""
        assert self.extract is not None, self.name
        changed = False
        for record in self.extract(window):
            changed |= self.put(records, dataclasses.replace(record, index=at(record.index)))
        if self.cap is not None and len(records) > self.cap:
            return dict(sorted(records.items(), key=lambda kv: kv[1].index)[-self.cap:]), True
        return records, changed


KINDS: tuple[Kind, ...] = (
    Kind("requests", UserMessage, lambda u: f"{u.message_id}:{int(u.queued)}:{fold_text(u.text)[:80]}",
         lambda w: facts.user_messages(w.messages, w.queued)),
    Kind("constraints", Constraint, lambda c: fold_text(c.text),
         lambda w: [*facts.standing_constraints(w.messages, w.queued, w.earlier), *answers.rules_given(w.messages)],
         "first"),
    Kind("approaches", Approach, lambda a: f"{a.kind}:{fold_text(a.text)}",
         lambda w: [*facts.excluded_approaches(w.messages, w.queued), *answers.declined_recommendations(w.messages)],
         "first"),
    # The user's answers to the agent's questions, from the harness's record of its question prompt.
    Kind("decisions", answers.Decision, lambda d: f"{d.message_id}:{fold_text(d.question)}",
         lambda w: answers.user_decisions(w.messages), "first"),
    # What the agent listed as left open and its latest reports of a check: the newest few dozen.
    Kind("followups", followups.FollowUp, lambda f: f"{f.kind}:{fold_text(f.text)}",
         lambda w: followups.follow_ups(w.messages), cap=MAX_FOLLOW_UPS),
    Kind("findings", Finding, lambda f: f"{f.kind}:{fold_text(f.text)}", lambda w: facts.findings(w.messages), "first"),
    Kind("specs", TaskSpec, lambda s: s.origin, lambda w: facts.task_specs(w.messages, w.queued, w.earlier)),
    Kind("errors", ErrorFact, lambda e: e.call_id,
         folded_by="the errors window: an error stays open until a later retry or fix resolves it"),
    Kind("files", FileFact, lambda f: f.path, stored=False,
         folded_by="the file tracker (stored per file), rendered with the newest contents"),
    Kind("tests", TestRun, lambda t: f"{t.message_id}:{t.command}", from_result=lambda f: (f.test,) if f.test else ()),
    Kind("commits", Commit, lambda c: c.hash, from_result=lambda f: f.commits),
    Kind("edits", EditGist, lambda g: f"{g.message_id}:{g.target}:{g.gist[:40]}", lambda w: edit_gists(w.calls),
         cap=MAX_EDIT_GISTS),
    Kind("outcomes", Outcome, lambda o: o.call_id, lambda w: facts.recent_outcomes(w.messages, MAX_OUTCOMES),
         cap=MAX_OUTCOMES),
    Kind("tracker", TrackerUpdate, lambda u: f"{u.message_id}:{u.command}", from_result=lambda f: f.tracker),
    Kind("skills", SkillUse, lambda s: s.name, lambda w: facts.skills_invoked(w.messages)),
    Kind("announcements", Announcement, lambda a: f"{a.kind}:{a.message_id}",
         lambda w: facts.announced_tools(w.messages)),
    Kind("agents", AgentUse, lambda g: f"{g.agent_type}:{g.message_id}", lambda w: facts.agents_used(w.messages)),
    # The runtime and tool versions the session's own version queries printed: the latest per program.
    Kind("runtimes", runtimes.RuntimeVersion, lambda r: r.tool, lambda w: runtimes.runtime_versions(w.messages),
         cap=MAX_RUNTIMES, summary=SummaryLine("Identifiers", "runtime and tool versions (as printed)",
                                               lambda r: f"{r.tool} {r.version}")),
    Kind("subagents", SubagentTask, lambda t: t.call_id,
         folded_by="the progress reader, as each message arrives (facts.subagents.fold over the message and "
                   "the held ones whose calls it answers): one task per call id, its latest state"),
)
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
# Kinds rebuilt from other stored state on load rather than stored themselves: re-encoding all the
# file records whenever one file changed was most of a call's save.
DERIVED_PARTS = frozenset(k.name for k in KINDS if not k.stored)
