"""Tool-result budget: an oversized result is stored as an artifact and replaced by a preview.

Runs on every call but only decides about results it has not seen decided, so a result is
replaced once (when it arrives) and the view's prefix never changes because of this stage later.
"""

from __future__ import annotations

import time
from collections import defaultdict

from worksurface.core.artifacts import how_to_fetch
from worksurface.core.config import BudgetConfig
from worksurface.core.edits import ReplaceResult, edited_stage
from worksurface.core.model import Message, Origin, ToolResult
from worksurface.engine.state import PipelineState, SkipKind, Skipped, Stage, StageContext, StageReport, StageResult
from worksurface.core.tokens import EXACT_COUNT_MAX_CHARS, get_encoding
from worksurface.core.toolkinds import call_target
from worksurface.core.view import calls_for, new_messages_start, turn_start

NAME = "budget"
# Results this small are never worth an artifact even when a turn is over its cap.
MIN_REPLACEABLE_TOKENS = 500
# A huge result's preview (one the counter estimates) takes its head and tail from this many
# characters per token at each end (cl100k tokens average about 4; the slack keeps the cut past the
# tokens shown).
PREVIEW_CHARS_PER_TOKEN = 32


def run(state: PipelineState, config: BudgetConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    view = state["view"]
    tokens = state["tokens"]
    counter = ctx.counter
    chosen: dict[str, int] = {}
    # Results before the turn that new messages answer were judged on earlier calls, and their turns
    # are closed: only that turn on can change (per-call work follows what is new).
    scan_from = turn_start(view, new_messages_start(view, ctx.unsent_ids))

    # Per result: anything over the cap that no stage has decided about yet.
    candidates: dict[str, ToolResult] = {}
    for m in view[scan_from:]:
        if m.origin is not Origin.CONVERSATION:
            continue
        for r in m.tool_results:
            if edited_stage(m, r.call_id) is None:
                candidates[r.call_id] = r
                # Characters bound tokens from above, so short results skip the count.
                if len(r.content) > config.max_result_tokens and counter.block(r) > config.max_result_tokens:
                    chosen[r.call_id] = counter.block(r)

    # Per turn: results answering one assistant turn together over the turn cap, largest first.
    for group in _turn_groups(view[scan_from:], candidates):
        sizes = [(counter.block(r), r.call_id) for r in group if r.call_id not in chosen]
        total = sum(s for s, _ in sizes) + sum(chosen.get(r.call_id, 0) for r in group)
        kept = sum(s for s, _ in sizes)
        if total <= config.max_turn_tokens:
            continue
        for size, call_id in sorted(sizes, reverse=True):
            if kept <= config.max_turn_tokens or size < MIN_REPLACEABLE_TOKENS:
                break
            chosen[call_id] = size
            kept -= size

    edits = []
    freed = 0
    calls = calls_for(view, chosen)
    for call_id, size in chosen.items():
        result = candidates[call_id]
        call = calls.get(call_id)
        artifact = ctx.artifacts.put_artifact(result.content, kind="tool_result",
                                              meta={"call_id": call_id, "tool": call.name if call else None})
        preview = _preview(result.content, size, artifact.id, artifact.path,
                           call.name if call else "tool", call_target(call) if call else "", config)
        new_size = counter.text(preview)
        if new_size >= size:
            continue  # a preview no smaller than the result saves nothing (a tiny cap in a tiny window)
        freed += size - new_size
        edits.append(ReplaceResult(NAME, call_id, preview, artifact=artifact.id,
                                   tokens_freed=max(0, size - new_size)))
    report = StageReport(NAME, tokens, tokens - freed, items=len(edits),
                         ms=(time.perf_counter() - started) * 1000,
                         outcome=None if edits else Skipped(SkipKind.NOTHING_TO_DO, "no oversized tool result"),
                         details={"replaced": sorted(chosen)} if edits else {})
    return StageResult(edits, report)


def _turn_groups(view: list[Message], undecided: dict[str, ToolResult]) -> list[list[ToolResult]]:
    """Undecided tool results grouped by the assistant turn they answer."""
    groups: dict[int, list[ToolResult]] = defaultdict(list)
    turn = -1
    for i, m in enumerate(view):
        if m.role == "assistant" and (i == 0 or view[i - 1].role != "assistant"):
            turn = i
        groups[turn].extend(r for r in m.tool_results if r.call_id in undecided)
    return [g for g in groups.values() if len(g) > 1]


def _preview(content: str, size: int, artifact_id: str, path: str | None, tool: str, target: str,
             config: BudgetConfig) -> str:
    enc = get_encoding()
    # The head and tail are cut from bounded slices, so a huge result is never encoded whole
    # (its size comes from the counter, which estimates a huge text from samples).
    span = PREVIEW_CHARS_PER_TOKEN * (config.preview_head_tokens + config.preview_tail_tokens)
    whole = len(content) <= EXACT_COUNT_MAX_CHARS
    head_ids = enc.encode_ordinary(content if whole else content[:span])
    tail_ids = head_ids if whole else enc.encode_ordinary(content[-span:])
    head = enc.decode(head_ids[: config.preview_head_tokens])
    tail = enc.decode(tail_ids[-config.preview_tail_tokens:]) if config.preview_tail_tokens else ""
    omitted = max(0, (len(head_ids) if whole else size) - config.preview_head_tokens - config.preview_tail_tokens)
    what = f"{tool} {target}".strip()
    return (f"[Tool result too large ({what}): {size} tokens, stored as artifact {artifact_id} ; "
            f"showing the first {config.preview_head_tokens} and last {config.preview_tail_tokens} tokens; "
            f"for the rest, {how_to_fetch(artifact_id, path)}.]\n{head}\n[... {omitted} tokens omitted ...]\n{tail}")


# Runs on every call (trigger 0): it decides only about results no stage has decided yet.
STAGE = Stage(NAME, BudgetConfig, run, reads=frozenset({"counter", "artifacts", "unsent_ids"}))
