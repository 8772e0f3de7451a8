"""Collapse: fold old spans of exploration steps (read, search, list) into one digest line per step.

Exploration output is the bulk of a coding session and is cheap to redo; what the agent needs later
is that it looked, where, and what it found. Oldest spans go first, until the view is under the
collapse trigger.
"""

from __future__ import annotations

import hashlib
import time
from typing import Sequence

from worksurface.core.config import CollapseConfig
from worksurface.core.edits import ReplaceMessages
from worksurface.core.model import Message, Origin, Text, ToolResult
from worksurface.engine.pricing import FIRING_RULE_READS, decide_edit
from worksurface.engine.state import PipelineState, SkipKind, Skipped, Stage, StageContext, StageReport, StageResult
from worksurface.core.escape import escape_tags, inline_value
from worksurface.core.toolkinds import call_target, effective_kind
from worksurface.core.edits import stable_prefix_length
from worksurface.core.view import Round, rounds

NAME = "collapse"
# The wrapper of a folded span (what a tool printed inside it is escaped: core.escape).
COLLAPSED_TAG = "collapsed"
EXPLORATION_KINDS = frozenset({"read", "grep", "glob", "list", "search", "fetch"})
# One digest line per step keeps the outcome short; the full output stays in the session log.
OUTCOME_CHARS = 100


def run(state: PipelineState, config: CollapseConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    view, tokens = state["view"], state["tokens"]
    trigger = ctx.config.collapse_trigger
    if tokens <= trigger:
        return StageResult([], StageReport(NAME, tokens, tokens, ms=_ms(started),
                                           outcome=Skipped(SkipKind.UNDER_TRIGGER,
                                                           f"{tokens} tokens, under the collapse trigger of {trigger}")))
    steps = [r for r in rounds(view, stable_prefix_length(view)) if _is_exploration(r, view, ctx)]
    if config.keep_recent_steps:
        steps = steps[: -config.keep_recent_steps] if len(steps) > config.keep_recent_steps else []
    edits = []
    current = tokens
    for span in _spans(steps, config.min_span_steps):
        if current <= trigger:
            break
        members = [m for r in span for m in r.messages(view)]
        before = ctx.counter.messages(members)
        digest = _digest(span, view)
        after = ctx.counter.message(digest)
        if after >= before:
            continue
        edits.append(ReplaceMessages(NAME, tuple(m.id for m in members), (digest,), tokens_freed=before - after))
        current -= before - after
    firing: dict[str, object] = {}
    if edits:
        # Folding edits the sent prefix: only when the saving outweighs the re-billing
        # (`pricing.decide_edit`: saving over the expected remaining calls).
        first = next(i for i, m in enumerate(view) if m.id in edits[0].ids)
        decision = decide_edit(state, ctx, first_index=first, saved_tokens=tokens - current)
        if not decision.fire:
            return StageResult([], StageReport(NAME, tokens, tokens, ms=_ms(started),
                                               outcome=Skipped(SkipKind.NOT_WORTH_IT, f"not worth it: {decision.reason}")))
        firing = decision.to_json()
    report = StageReport(NAME, tokens, current, items=len(edits), ms=_ms(started),
                         outcome=None if edits else Skipped(SkipKind.NOTHING_TO_DO, "no foldable exploration span"),
                         details={"spans": len(edits), "firing": firing} if edits else {})
    return StageResult(edits, report)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _is_exploration(r: Round, view: Sequence[Message], ctx: StageContext) -> bool:
    msgs = r.messages(view)
    calls = [c for m in msgs for c in m.tool_calls]
    if not calls or any(m.origin is not Origin.CONVERSATION or m.id in ctx.protected for m in msgs):
        return False
    if any(m.role == "user" and not m.tool_results for m in msgs):
        return False
    return all(effective_kind(c) in EXPLORATION_KINDS for c in calls)


def _spans(steps: list[Round], min_steps: int) -> list[list[Round]]:
    """Maximal runs of adjacent exploration steps, oldest first."""
    spans: list[list[Round]] = []
    for r in steps:
        if spans and spans[-1][-1].end == r.start:
            spans[-1].append(r)
        else:
            spans.append([r])
    return [s for s in spans if len(s) >= min_steps]


def _digest(span: list[Round], view: Sequence[Message]) -> Message:
    lines = []
    results: dict[str, ToolResult] = {}
    for r in span:
        for m in r.messages(view):
            for res in m.tool_results:
                results[res.call_id] = res
    for r in span:
        for m in r.messages(view):
            for c in m.tool_calls:
                answer = results.get(c.id)
                line = inline_value(f"- {c.name} {call_target(c)} -> {_outcome(answer)}".rstrip())
                lines.append(escape_tags(line, COLLAPSED_TAG))  # tool output cannot close the fold
    first = view[span[0].start].id
    span_id = hashlib.blake2b(first.encode(), digest_size=4).hexdigest()
    text = (f'<{COLLAPSED_TAG} id="{span_id}" steps="{len(lines)}">\n'
            "Earlier exploration, folded (full output kept in the session):\n"
            + "\n".join(lines) + f"\n</{COLLAPSED_TAG}>")
    return Message(f"collapse-{first}", "user", (Text(text),), Origin.COLLAPSE,
                   {"stage": NAME, "covers": [m.id for r in span for m in r.messages(view)]})


def _outcome(result: ToolResult | None) -> str:
    if result is None:
        return "no result"
    content = result.content.strip()
    lines = content.count("\n") + 1 if content else 0
    first = content.splitlines()[0] if content else ""
    if len(first) > OUTCOME_CHARS:
        first = first[: OUTCOME_CHARS - 1] + "…"
    if result.is_error:
        return f"error: {first}"
    return f"{lines} lines: {first}" if content else "empty"


STAGE = Stage(NAME, CollapseConfig, run, trigger=lambda config: config.collapse_trigger,
              reads=frozenset({"config", "counter", "protected"}) | FIRING_RULE_READS)
