"""Autocompact: summarize everything before a kept tail and write a compact boundary.

Fires when the view is over the threshold, or when asked (`session.compact`, `--force`), or earlier,
once the view is past the economic floor (`economic_from` of the threshold), when the firing rule
says a compaction pays for the re-billing it causes (`pricing.decide_edit`). The kept
tail never splits a call from its result. Sizes follow the post-compact target: the tail and the
summary take shares of it so the reinjectors keep room to rebuild the working surface.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from worksurface.core.artifacts import FETCH_TOOL_NAME
from worksurface.core.config import AutocompactConfig
from worksurface.core.edits import Compact, ReplaceMessages, stable_prefix_length
from worksurface.core.errors import SummarizerError
from worksurface.facts.commands import compaction_request
from worksurface.facts.text import strip_reminders
from worksurface.core.model import Message, Origin, Text, is_user_turn
from worksurface.engine import pins
from worksurface.engine.pricing import FIRING_RULE_READS, EditDecision, decide_edit
from worksurface.engine.state import (Compacted, PipelineState, SkipKind, Skipped, Stage, StageContext, StageReport,
                                      StageResult, TextRoom, compaction_target, measured_size, text_room,
                                      tokenizer_ratio)
from worksurface.summarizers.base import Summarizer, Summary, SummaryRequest
from worksurface.summarizers.structured import StructuredSummarizer
from worksurface.core.view import STANDING, standing_context, tail_start
from worksurface.engine.protection import last_user_turn_index

NAME = "autocompact"
SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier part of the conversation; the messages after it are the "
    "most recent ones, kept as they were. The \"Next step\" section is advisory: check it against "
    "the latest user request before acting on it.\n\n")
# Shares of the post-compact target (after the system prefix); the rest is left to reinjection.
# Measured with the forgetting probes: under a small target the summary holds the most facts per
# token, so it gets most of the room; with more room a longer verbatim tail pays off.
# Anchors (room after the system prefix) and the shares there, linear between and flat outside:
# the smaller the room, the more of it the summary takes (the status and the rules still need some).
SHARE_ANCHORS = (4_000, 10_000, 30_000)
TAIL_SHARE = (0.1, 0.1, 0.3)
SUMMARY_SHARE = (0.8, 0.7, 0.45)
# From the second compaction on, the summary says how many there were (accuracy degrades with each).
REPEATED_NOTICE_FROM = 2
# The smallest summary worth writing: the active request and a few rules.
MIN_SUMMARY_TOKENS = 200
# Boundary text, summary prefix and message framing.
OVERHEAD_TOKENS = 120


@dataclass(frozen=True)
class CompactionInputs:
    """What autocompact takes from the session on a call."""

    # The user's focus for a manual compaction, quoted in the summary.
    instructions: str | None = None
    # None: the structured summarizer (no model).
    summarizer: Summarizer | None = None
    # Compactions that failed in a row: the breaker stops trying at `max_consecutive_failures`.
    consecutive_failures: int = 0


NO_INPUTS = CompactionInputs()


def decline(state: PipelineState, config: AutocompactConfig, ctx: StageContext) -> StageResult | None:
    """The skipped result when this call does not compact, None when it does. Cheap (no summary is
    written), so the graph's direct walk can ask it on every call."""
    started = time.perf_counter()
    tokens = state["tokens"]
    threshold, floor = ctx.config.threshold, ctx.config.compaction_floor
    if not ctx.forced and not config.enabled:
        return _skip(tokens, started, SkipKind.DISABLED, "automatic compaction is off (autocompact.enabled = false)")
    if not ctx.forced and tokens <= floor:
        return _skip(tokens, started, SkipKind.UNDER_TRIGGER, f"{tokens} tokens, under the threshold of {threshold}"
                     + (f" (and the economic floor of {floor})" if floor < threshold else ""))
    failures = ctx.inputs.get(CompactionInputs, NO_INPUTS).consecutive_failures
    if failures >= config.max_consecutive_failures:
        return _skip(tokens, started, SkipKind.BREAKER_OPEN, f"stopped after {failures} consecutive failed compactions")
    if ctx.forced or tokens > threshold:
        return None
    decision = _economic(state, ctx)
    if not decision.fire:
        return _skip(tokens, started, SkipKind.NOT_WORTH_IT,
                     f"under the threshold of {threshold}; an earlier compaction is not worth it: {decision.reason}")
    return None


def _economic(state: PipelineState, ctx: StageContext) -> EditDecision:
    """The firing rule for a compaction below the threshold, priced against what it loses as well as
    the bill: it removes everything above the view it would leave (its measured size: the harness's
    fixed part plus the text room) and re-bills what stays; it never fires when that view would keep
    less text than the floor of the target (the fixed part leaves the working state no room). A cold
    cache is weighed like a warm one: a pause is no reason to give up detail early."""
    if not ctx.config.pricing.firing_rule:
        return EditDecision(False, "the firing rule is off: compaction only at the threshold")
    view = state["view"]
    first = stable_prefix_length(view)
    reserved = ctx.counter.messages(view[:first]) + OVERHEAD_TOKENS
    room = text_room(ctx, reserved)
    saved = state["tokens"] - measured_size(ctx, reserved + room.counted, compacted=True)
    if saved <= 0:
        return EditDecision(False, "the view is not above what a compaction would leave")
    loses = _floor_text(room, ctx) if room.floored else None
    return decide_edit(state, ctx, first_index=first, saved_tokens=saved, cold_fires=False, loses=loses)


def _floor_text(room: TextRoom, ctx: StageContext) -> str:
    """Why a view at the floor is no place for an early compaction (and what a compaction says)."""
    return (f"the harness's fixed part ({room.fixed} tokens as measured: system prompt, tools) leaves the text "
            f"{room.room} counted tokens of the post-compact target of {ctx.config.post_compact_target}, under the "
            f"floor of {room.floor} (autocompact.text_floor: {ctx.config.autocompact.text_floor:.0%} of the target, "
            f"text_floor_tokens: {ctx.config.autocompact.text_floor_tokens})")


def run(state: PipelineState, config: AutocompactConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    declined = decline(state, config, ctx)
    if declined is not None:
        return declined
    view, tokens = state["view"], state["tokens"]
    threshold = ctx.config.threshold
    inputs = ctx.inputs.get(CompactionInputs, NO_INPUTS)
    instructions = inputs.instructions
    # The user's `/compact [instructions]` (Claude Code's command record) asks for this compaction: its
    # words shape the summary and the command goes with the span (kept, it would read as the newest
    # request after the boundary). The compaction works on the view before it.
    request = compaction_request(view, stable_prefix_length(view) + 1)
    consumed: Message | None = None
    if request is not None:
        consumed, view = view[request[0]], view[:request[0]]
        instructions = instructions or request[1] or None

    counter = ctx.counter
    floor = stable_prefix_length(view)
    prefix_tokens = counter.messages(view[:floor])
    # Standing context after the prefix is carried whole (see below): it takes its room first.
    carried_tokens = counter.messages(standing_context(view[floor:]))
    # Of what the view keeps, the harness's standing instructions (in the system prefix or carried)
    # are its fixed part written as messages (see standing_room).
    standing_tokens = carried_tokens + counter.messages([m for m in view[:floor] if m.meta.get(STANDING)])
    room = standing_room(ctx, text_room(ctx, prefix_tokens + carried_tokens + OVERHEAD_TOKENS, cap=tokens),
                         prefix_tokens + carried_tokens + OVERHEAD_TOKENS - standing_tokens, standing_tokens, tokens)
    available = room.counted
    tail_share, summary_share = _shares(available)
    tail_budget = min(config.keep_tail_tokens, int(available * tail_share))
    start = tail_start(view, counter, tail_budget, floor)
    if start <= floor and ctx.forced:
        # A manual compaction of a short session: keep the newer half so there is something to summarize.
        start = tail_start(view, counter, max(0, tokens - ctx.token_offset - prefix_tokens) // 2, floor)
    head, tail = view[floor:start], view[start:]
    if not head:
        return _skip(tokens, started, SkipKind.NOTHING_TO_DO, "nothing before the kept tail to summarize")
    # Asked to compact (not over the threshold) with nothing after the last rebuilt surface: nothing new.
    if not _has_new_conversation(head, view if ctx.forced else ()):
        # An already compacted view (a compacted file compacted again): summarizing its own summary
        # would only grow it and bump the epoch.
        return _skip(tokens, started, SkipKind.NOTHING_TO_DO, "nothing new to compact since the last compaction")
    # A tail that must keep a large last turn can leave little for the summary; it still gets half
    # its share (the view then misses the target, and the session reports an overflow if it must):
    # a summary starved to nothing would forget everything before the tail.
    share = int(available * summary_share)
    summary_budget = max(MIN_SUMMARY_TOKENS, min(config.summary_tokens, share,
                                                 max(available - counter.messages(tail), share // 2)))

    primary = inputs.summarizer or StructuredSummarizer()
    summary, fallback_error = _summarize(primary, head, tail, summary_budget, config, ctx, instructions)
    latest = last_user_turn_index(view)
    kept: tuple[Message, ...] = ()
    if latest is not None and floor <= latest < start and not _quotes(summary.text, view[latest].text):
        # Invariant 3: the newest user message survives verbatim. It did not fit in the summary, so
        # the tail starts at it (the session raises ContextOverflowError if that cannot fit). When it
        # opens the span (a trajectory's one task statement), starting there would keep everything:
        # it stays verbatim right after the summary of what followed it instead.
        if latest > floor:
            start = latest
            head, tail = view[floor:start], view[start:]
        else:
            kept, head = (view[latest],), view[latest + 1:start]
            if not head:
                return _skip(tokens, started, SkipKind.NOTHING_TO_DO,
                             "nothing between the latest user message and the kept tail to summarize")
        summary, fallback_error = _summarize(primary, head, tail, summary_budget, config, ctx, instructions, kept)

    epoch = ctx.epoch + 1
    trigger = "manual" if ctx.forced else "auto"
    # Why an automatic compaction happened: the view passed the threshold, or it paid to compact early.
    reason = "manual" if ctx.forced else ("threshold" if tokens > threshold else "economic")
    standing = tuple(standing_context(head))  # carried verbatim after the boundary, never summarized
    carried = {m.id for m in standing}
    covered = tuple(m.id for m in head if m.origin is Origin.CONVERSATION and m.id not in carried)
    compactions = epoch - 1
    pinned = _check_pins(head, summary.text, (*standing, *tail, *kept), config, ctx)
    summary_msg = Message(f"summary-{epoch}-{_span_id(head)}", "user",
                          (Text(SUMMARY_PREFIX + repeated_notice(compactions) + summary.text
                                + pins.render(pinned.restored)),),
                          Origin.SUMMARY, {"stage": NAME, "epoch": epoch, "summarizer": summary.summarizer,
                                           "compactions": compactions})
    post = (prefix_tokens + counter.messages(standing) + counter.messages(tail) + counter.message(summary_msg)
            + counter.messages(list(kept)))
    boundary = Message(
        f"boundary-{epoch}-{_span_id(head)}", "system",
        (Text(f"[Conversation compacted ({trigger}): {len(head)} earlier messages summarized, "
              f"{tokens} -> {post} tokens, epoch {epoch}]"),),
        Origin.BOUNDARY,
        {"stage": NAME, "trigger": trigger, "pre_tokens": tokens, "post_tokens": post, "epoch": epoch,
         "covered": len(covered), "summarizer": summary.summarizer})
    post += counter.message(boundary)
    info = {"trigger": trigger, "reason": reason, "pre_tokens": tokens, "post_tokens": post, "epoch": epoch,
            "compactions": compactions,
            "covered_ids": list(covered), "summarizer": summary.summarizer,
            "summary_tokens": summary.tokens, "summary_budget": summary_budget, "text_budget": available,
            "tail_messages": len(tail),
            "latest_user_in_tail": any(is_user_turn(m) for m in tail), "latest_user_kept": bool(kept)}
    if room.floored:
        # The compaction keeps the floor: a summary never starves to a few hundred tokens because the
        # fixed part alone is near the target. The session reports the view over its target.
        info["text_floor"] = {"room": room.room, "floor": room.floor, "fixed": room.fixed,
                              "why": _floor_text(room, ctx)}
    if fallback_error:
        info["fallback"] = {"from": primary.name, "error": fallback_error}
    if ctx.config.pins:
        info["pins"] = {"restored": len(pinned.restored), "missed": pinned.missed}
    if summary.details:
        info["summarizer_details"] = summary.details  # retries, dropped rounds, trimmed sections
    edit = Compact(NAME, tail[0].id if tail else None, (boundary, *standing, summary_msg, *kept), covered, info)
    edits: list[Compact | ReplaceMessages] = [edit]
    if consumed is not None:
        info["instructions_from"] = consumed.id
        if tail:  # without a tail the compaction replaces the command with everything else
            edits.append(ReplaceMessages(NAME, (consumed.id,)))
    report = StageReport(NAME, tokens, post, items=len(head), ms=(time.perf_counter() - started) * 1000,
                         details=info, outcome=Compacted(epoch, reason, tokens, post))
    return StageResult(edits, report)


def standing_room(ctx: StageContext, room: TextRoom, reserved: int, carried: int, cap: int) -> TextRoom:
    """`room` as the harness's standing instructions the view keeps whole (`carried` counted tokens:
    Codex's permissions, AGENTS.md and environment) leave it: they are the harness's fixed part written
    as messages. Without a measured size the target is a text budget, which a fixed part outside the
    messages takes nothing of, so they take nothing of it either (`reserved`: the rest of what the view
    keeps); measured, when they leave the text under its floor, they leave it, as a measured fixed part
    does, autocompact.text_floor_tokens of the target (counted with `reserved`), not a sliver."""
    if not carried:
        return room
    if ctx.calibration is None:
        # Without a measured size the target is a text budget (the harness's fixed part is not in it
        # either): the standing start takes none of it.
        return text_room(ctx, reserved, cap=cap)
    if not room.floored:
        return room
    floor = int(min(ctx.config.autocompact.text_floor_tokens, compaction_target(ctx, cap)) / tokenizer_ratio(ctx))
    return replace(room, floor=max(room.floor, floor - reserved))


def repeated_notice(compactions: int) -> str:
    """What the model is told once a session has been compacted more than once (as Codex warns):
    the working state carries over, but details outside it may be gone, and where originals are."""
    if compactions < REPEATED_NOTICE_FROM:
        return ""
    return (f"Note: this session has now been compacted {compactions} times. The working state below is "
            "carried over whole, but details outside it may be lost; content that was replaced by a marker "
            f"can be fetched back by its artifact id (the file the marker names, or the {FETCH_TOOL_NAME} "
            "tool when the harness offers it).\n\n")


def _summarize(primary: Summarizer, head: list[Message], tail: list[Message], budget: int, config: AutocompactConfig,
               ctx: StageContext, instructions: str | None,
               kept: Sequence[Message] = ()) -> tuple[Summary, str | None]:
    """The primary summarizer's summary, or the structured one (and why) when it fails or overruns."""
    request = SummaryRequest(messages=head, tail=tail, budget_tokens=budget,
                             user_messages_tokens=min(config.user_messages_tokens, budget // 2),
                             instructions=instructions, queued_inputs=ctx.queued_inputs,
                             ledger=ctx.ledger, kept=kept, keep_full=_full_summary_keeper(ctx))
    try:
        summary = primary.summarize(request, ctx.counter)
        if summary.tokens > budget:
            raise SummarizerError(f"{primary.name} returned {summary.tokens} tokens, over its budget of {budget}")
        return summary, None
    except SummarizerError as exc:
        return StructuredSummarizer().summarize(request, ctx.counter), str(exc)


def _check_pins(head: Sequence[Message], summary: str, kept: Sequence[Message], config: AutocompactConfig,
                ctx: StageContext) -> pins.PinCheck:
    """The configured pins the summarized span holds and the kept view would lose (see engine.pins)."""
    if not ctx.config.pins:
        return pins.PinCheck()
    kept_text = "\n".join([summary, *(pins.message_text(m) for m in kept)])
    return pins.check(pins.compile_pins(ctx.config.pins), head, kept_text, config.pin_tokens, ctx.counter)


def _has_new_conversation(head: Sequence[Message], view: Sequence[Message]) -> bool:
    """Whether the span holds conversation a summary would cover (not only earlier summaries,
    boundaries, reinjected surface or standing context carried whole). With the whole `view`: when
    nothing arrived after the surface the last compaction rebuilt, the tail it kept verbatim (between
    its summary and that surface) is not new either."""
    carried = {m.id for m in standing_context(head)}
    kept = _kept_tail_when_nothing_followed(view)
    return any(m.origin is Origin.CONVERSATION and m.id not in carried and m.id not in kept for m in head)


def _kept_tail_when_nothing_followed(view: Sequence[Message]) -> set[str]:
    """The ids of the conversation the latest compaction kept after its summary, up to the first
    message it reinjected, if no conversation came after that surface (else, or without one: empty)."""
    summary = max((i for i, m in enumerate(view) if m.origin is Origin.SUMMARY), default=None)
    if summary is None:
        return set()
    surface = next((i for i in range(summary + 1, len(view))
                    if view[i].origin in (Origin.REINJECTION, Origin.STATUS)), None)
    if surface is None or any(m.origin is Origin.CONVERSATION for m in view[surface:]):
        return set()
    return {m.id for m in view[summary + 1:surface]}


def _full_summary_keeper(ctx: StageContext) -> Callable[[str], str]:
    """Stores the whole summary a tight budget cut, as an artifact the summary names."""
    def keep(text: str) -> str:
        artifact = ctx.artifacts.put_artifact(text, kind="summary")
        return (f"artifact {artifact.id} (the {FETCH_TOOL_NAME} tool, or `worksurface artifact <compacted file> "
                f"{artifact.id}`)")
    return keep


def _shares(available: int) -> tuple[float, float]:
    """(tail share, summary share) of the room after the system prefix."""
    return _between(available, TAIL_SHARE), _between(available, SUMMARY_SHARE)


def _between(available: int, shares: tuple[float, ...]) -> float:
    """The share at `available`, linear between the anchors and flat outside them."""
    if available <= SHARE_ANCHORS[0]:
        return shares[0]
    for (lo, hi), (a, b) in zip(zip(SHARE_ANCHORS, SHARE_ANCHORS[1:]), zip(shares, shares[1:])):
        if available <= hi:
            return a + (available - lo) / (hi - lo) * (b - a)
    return shares[-1]


def _quotes(summary: str, text: str) -> bool:
    """Whether the summary carries the user's words verbatim (hook reminders and spacing aside)."""
    fold = lambda s: " ".join(s.split())  # noqa: E731
    return fold(strip_reminders(text)) in fold(summary)


def _span_id(messages: list[Message]) -> str:
    """A short id for the summarized span (a digest of its first message's id), so the ids of a
    compaction of a compaction stay short and unique."""
    first = messages[0].id if messages else "empty"
    return hashlib.blake2b(first.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _skip(tokens: int, started: float, kind: SkipKind, why: str) -> StageResult:
    return StageResult([], StageReport(NAME, tokens, tokens, ms=(time.perf_counter() - started) * 1000,
                                       outcome=Skipped(kind, why)))


# Considered past the economic floor (at most the threshold); a quiet call asks only `decline`.
STAGE = Stage(NAME, AutocompactConfig, run, trigger=lambda config: config.compaction_floor,
              needs=(CompactionInputs,), decline=decline,
              # Its firing rule weighs a cold cache like a warm one: the idle time is not read.
              reads=frozenset({"config", "counter", "forced", "epoch", "token_offset", "calibration", "usage_offset",
                               "queued_inputs", "ledger", "inputs"}) | FIRING_RULE_READS - {"idle_seconds"})
