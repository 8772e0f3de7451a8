"""Skills: the skills invoked in the session, newest first, so their instructions stay in force.

Each is head-truncated (the instructions come first) with a marker saying how to reload the rest.
"""

from __future__ import annotations

from worksurface.core.config import ReinjectConfig
from worksurface.core.model import Message
from worksurface.core.escape import escape_attr, escape_tags
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, is_shown, reinjected, report, shown_text, tail_of
from worksurface.engine.state import Reinjection, Reinjector, StageContext
from worksurface.core.tokens import truncate_to_tokens

NAME = "skills"
# A skill body shorter than this is not worth its framing; skip rather than reinject a stub.
MIN_SKILL_TOKENS = 40


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    src = facts_of(ctx, view)
    before = ctx.counter.messages(view)
    tail = shown_text(tail_of(view))
    left = min(budget, config.skills_tokens)
    out: list[Message] = []
    restored, skipped, dropped = [], [], []
    for skill in sorted(src.skills_invoked(), key=lambda s: s.index, reverse=True):
        if not skill.content:
            skipped.append({"skill": skill.name, "why": "no content seen in the transcript"})
            continue
        if is_shown(skill.content[:400], tail):
            skipped.append({"skill": skill.name, "why": "kept tail shows it"})
            continue
        marker = f"\n[... skill truncated; invoke the {skill.name} skill again (or read its SKILL.md) for the rest]"
        header = f'<skill name="{escape_attr(skill.name)}" source="{escape_attr(skill.source)}">\n'
        room = min(config.skill_tokens, left) - ctx.counter.text(header + "\n</skill>") - 8
        if room < MIN_SKILL_TOKENS:
            dropped.append(skill.name)
            continue
        body = truncate_to_tokens(escape_tags(skill.content, "skill"), room, marker=marker)
        msg = reinjected(ctx, NAME, str(len(out)), header + body + "\n</skill>", skill=skill.name)
        cost = ctx.counter.message(msg)
        left -= cost
        out.append(msg)
        restored.append({"skill": skill.name, "tokens": cost})
    return Reinjection(out, report(NAME, before, ctx.counter.messages(out), restored, skipped, dropped,
                       "no skill invoked in the session"))


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"counter"}) | FACTS_READS | MESSAGE_READS)
