"""Constraints: standing rules and tried-and-excluded approaches, verbatim, with where they came from.

This is what agents lose first after a compaction ("don't touch X", "no migrations", "we already
tried Y and the user said no"), so it comes right after the status and is kept word for word.
"""

from __future__ import annotations

from typing import Callable, Sequence

from worksurface.core.config import ReinjectConfig
from worksurface.facts.approaches import Approach
from worksurface.facts.constraints import Constraint
from worksurface.core.model import Message
from worksurface.core.escape import escape_tags, inline_value
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, is_shown, reinjected, report, shown_text
from worksurface.engine.state import Reinjection, Reinjector, StageContext

NAME = "constraints"
HEADER = "<standing-constraints>\nRules still in force (verbatim; where each came from in brackets):"
EXCLUDED_HEADER = "Tried and excluded (do not retry without a new reason):"
FOOTER = "</standing-constraints>"


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    src = facts_of(ctx, view)
    before = ctx.counter.messages(view)
    shown = shown_text(view)
    rules = [c for c in src.standing_constraints()]
    approaches = src.excluded_approaches()
    # Strongest rules first, then the newest; the user's own words before inferred ones.
    rules.sort(key=lambda c: (-c.strength, c.source != "user", -c.index))
    approaches.sort(key=lambda a: -a.index)

    limit = min(budget, config.constraints_tokens)
    used = ctx.counter.text(f"{HEADER}\n{EXCLUDED_HEADER}\n{FOOTER}") + 8
    rule_lines: list[str] = []
    approach_lines: list[str] = []
    restored, skipped, dropped = [], [], []
    items: list[Constraint | Approach] = [*rules, *approaches]
    for item in items:
        if is_shown(item.text, shown):
            skipped.append(item.text[:80])
            continue
        line = _line(item)
        cost = ctx.counter.text(line) + 1
        if used + cost > limit:
            dropped.append(item.text[:80])
            continue
        used += cost
        (rule_lines if isinstance(item, Constraint) else approach_lines).append(line)
        restored.append(item.text[:80])
    if not restored:
        return Reinjection([], report(NAME, before, 0, [], skipped, dropped, "no constraint the view does not already show"))
    # Restore reading order (oldest first) once the budget has picked what stays.
    parts = [HEADER, *sorted(rule_lines, key=_order(rules))]
    if approach_lines:
        parts += [EXCLUDED_HEADER, *sorted(approach_lines, key=_order(approaches))]
    parts.append(FOOTER)
    msg = reinjected(ctx, NAME, "0", "\n".join(parts))
    return Reinjection([msg], report(NAME, before, ctx.counter.message(msg), restored, skipped, dropped))


def _line(item: Constraint | Approach) -> str:
    if isinstance(item, Constraint):
        where = inline_value(item.source + (f": {item.origin}" if item.origin else ""))
        return escape_tags(f"- {item.text} [{where}]", "standing-constraints")
    return escape_tags(f"- ({item.kind}) {item.text}", "standing-constraints")


def _order(items: Sequence[Constraint | Approach]) -> Callable[[str], int]:
    index = {_line(i): i.index for i in items}
    return lambda line: index.get(line, 0)


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"counter"}) | FACTS_READS | MESSAGE_READS)
