"""Details: the part of the working state the summary had no room for, packed by value per token into
what the post-compact target still leaves once the other reinjectors ran.

The summary's budget is a fixed share of the target; the tail, the files and the status take what
they need; the rest of the target would otherwise go unused while facts were cut. This reinjector
offers the same candidate items the structured summary ranked (from the same ledger), minus every
item the view already shows, and packs them with the same packer. At larger targets it also restores
the task texts of issues not closed yet, verbatim, newest first (what the work must still satisfy).
"""

from __future__ import annotations

from worksurface.core.config import ReinjectConfig
from worksurface.facts.constraints import TaskSpec
from worksurface.ledger.source import FactSource
from worksurface.core.model import Message, Origin
from worksurface.core.escape import escape_tags
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, is_shown, reinjected, report, shown_text, tail_of
from worksurface.engine.state import Reinjection, Reinjector, StageContext
from worksurface.summarizers.base import SummaryRequest
from worksurface.summarizers.packing import Item, Section, pack
from worksurface.summarizers.sections import CURRENT_WORK, NEXT_STEP, TITLE
from worksurface.summarizers.structured import candidate_sections

NAME = "details"
TAG = "working-state"
HEADER = (f"<{TAG}>\nMore of the working state before the compaction (the summary had no room for these; "
          "verbatim where quoted):")
FOOTER = f"</{TAG}>"
# Below this many tokens of room a few list lines say too little to be worth a message.
MIN_BUDGET = 60
# Wrapper, header and message framing.
OVERHEAD_TOKENS = 40
# Sections that describe the moment of the compaction: the summary and the tail already say it.
SKIPPED_SECTIONS = (CURRENT_WORK, NEXT_STEP)
TASK_TEXTS = "Task texts of issues not closed (verbatim, newest first)"
# Task texts rank after every other item (priority) and take what is left (share).
TASK_TEXT_PRIORITY, TASK_TEXT_SHARE = 20, 0.3


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    before = ctx.counter.messages(view)
    room = budget - OVERHEAD_TOKENS
    if room < MIN_BUDGET:
        return Reinjection([], report(NAME, before, 0, [], [], [], f"no room left in the post-compact target ({budget} tokens)"))
    src = facts_of(ctx, view)
    shown = shown_text(view)
    tail = tail_of(view)
    transcript = list(ctx.transcript or view)
    first = next((m.id for m in tail if m.origin is Origin.CONVERSATION), None)
    at = next((i for i, m in enumerate(transcript) if m.id == first), len(transcript)) if first else len(transcript)
    request = SummaryRequest(messages=transcript[:at], tail=tail, budget_tokens=budget,
                             queued_inputs=ctx.queued_inputs, ledger=ctx.ledger)
    sections: list[Section] = []
    skipped = 0
    for s in candidate_sections(request):
        if s.heading in SKIPPED_SECTIONS or not s.heading:
            continue
        fresh = [it for it in s.items if not _shown_item(it.text, shown)]
        skipped += len(s.items) - len(fresh)
        if fresh:
            s.items, s.chosen, s.used = fresh, [], 0
            s.cap = None
            sections.append(s)
    tasks = [Item(_task_item(spec), (n,), (n,), shrinkable=True) for n, spec in enumerate(open_task_texts(src))
             if not is_shown(spec.text, shown)]
    if tasks:
        sections.append(Section(TASK_TEXTS, tasks, TASK_TEXT_SHARE, TASK_TEXT_PRIORITY))
    if not sections:
        return Reinjection([], report(NAME, before, 0, [], [], [], "the view already shows every item"))
    body = pack(sections, room, ctx.counter, omit_empty=True)
    if not body.strip() or body.strip() == TITLE:
        return Reinjection([], report(NAME, before, 0, [], [], [], "no item fits the room left"))
    restored = [{"section": s.heading, "items": len(s.chosen)} for s in sections if s.chosen]
    dropped = [{"section": s.heading, "items": len(s.items) - len(s.chosen)} for s in sections
               if len(s.items) > len(s.chosen)]
    msg = reinjected(ctx, NAME, "0", f"{HEADER}\n{escape_tags(body, TAG)}\n{FOOTER}")
    return Reinjection([msg], report(NAME, before, ctx.counter.message(msg), restored,
                                     [{"items": skipped, "why": "the view shows them"}], dropped))


def _shown_item(text: str, shown: str) -> bool:
    """Whether the view shows an item: its text, or for a labelled quote ("Latest user request
    (verbatim):" and the text below it) the quoted text, which a harness's own summary or its kept
    messages show without worksurface's label."""
    body = text.removeprefix("- ")
    if is_shown(body, shown):
        return True
    label, newline, quoted = body.partition("\n")
    return bool(newline) and label.rstrip().endswith(":") and is_shown(quoted, shown)


def _task_item(spec: TaskSpec) -> str:
    return f"- From `{spec.origin}`:\n{spec.text}"


def open_task_texts(src: FactSource) -> list[TaskSpec]:
    """Task texts read, newest first, except those of an issue a tracker update closed later."""
    closed: dict[str, int] = {}
    reopened: dict[str, int] = {}
    for u in src.tracker_updates():
        for change in u.changes:
            if change.status == "completed":
                closed[change.issue] = max(closed.get(change.issue, -1), u.index)
            elif change.status is not None:
                reopened[change.issue] = max(reopened.get(change.issue, -1), u.index)
    out = []
    for spec in sorted(src.task_specs(), key=lambda s: -s.index):
        issue = spec.issue
        if issue and closed.get(issue, -1) > max(spec.index, reopened.get(issue, -1)):
            continue
        out.append(spec)
    return out


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"counter"}) | FACTS_READS | MESSAGE_READS)
