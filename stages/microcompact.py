"""Microcompact: clear old results of tools whose output can be fetched again.

Fires when the view is over `trigger_tokens` and at least `clear_at_least` tokens can be gained
(one large batch, so the cache is invalidated rarely), or when the cache is cold (idle longer than
`cache_ttl`, so the prefix is rewritten anyway). The newest `keep_recent` results are kept, and on
the token trigger also the newest `protect_tokens` of the view (a cold cache has nothing to protect:
the whole prefix is paid for again either way). The cleared call ids are returned as `cache_edits` for
providers that can delete server-side.
"""

from __future__ import annotations

import time
from typing import Sequence

from worksurface.config import MicrocompactConfig
from worksurface.edits import ReplaceResult, edited_stage
from worksurface.model import Message, Origin, ToolCall, ToolResult
from worksurface.pricing import decide_edit, result_index
from worksurface.state import PipelineState, StageContext, StageReport, StageResult
from worksurface.toolkinds import call_target, effective_kind, normalize_name, tool_kind
from worksurface.view import calls_by_id

NAME = "microcompact"
# The placeholder itself costs about this many tokens; clearing a smaller result gains nothing.
MIN_CLEARABLE_TOKENS = 40


def run(state: PipelineState, config: MicrocompactConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    view, tokens = state["view"], state["tokens"]
    cold = ctx.idle_seconds is not None and ctx.idle_seconds >= config.cache_ttl_seconds
    over = tokens > config.trigger_tokens
    if not over and not cold:
        return _skip(tokens, started, f"{tokens} tokens, under the trigger of {config.trigger_tokens}")

    candidates = _candidates(view, config, ctx, protect_tokens=config.protect_tokens if over else 0)
    gain = sum(size for _, _, size in candidates)
    if not cold and gain < config.clear_at_least:
        return _skip(tokens, started, f"only {gain} tokens clearable, below clear_at_least {config.clear_at_least}")
    if not candidates:
        return _skip(tokens, started, "no clearable tool result")
    # Clearing edits the sent prefix: only when the saving outweighs the re-billing
    # (`pricing.decide_edit`: saving over the expected remaining calls).
    first = min((i for i in (result_index(view, r.call_id) for _, r, _ in candidates) if i is not None), default=0)
    decision = decide_edit(state, ctx, first_index=first, saved_tokens=gain)
    if not cold and not decision.fire:
        return _skip(tokens, started, f"not worth it: {decision.reason}")

    edits = []
    freed = 0
    for call, result, size in candidates:
        artifact = ctx.artifacts.put_artifact(result.content, kind="tool_result",
                                              meta={"call_id": call.id, "tool": call.name})
        target = call_target(call)
        text = (f"[Old tool result content cleared: {call.name}{' ' + target if target else ''}, "
                f"{size} tokens, artifact {artifact.id}]")
        saved = max(0, size - ctx.counter.text(text))
        freed += saved
        edits.append(ReplaceResult(NAME, call.id, text, artifact=artifact.id, tokens_freed=saved))
    report = StageReport(NAME, tokens, tokens - freed, items=len(edits), ms=(time.perf_counter() - started) * 1000,
                         details={"trigger": "tokens" if over else "cache_cold", "cleared": [e.call_id for e in edits],
                                  "firing": decision.to_json()})
    return StageResult(edits, report, cache_edits=[e.call_id for e in edits])


def _skip(tokens: int, started: float, why: str) -> StageResult:
    return StageResult([], StageReport(NAME, tokens, tokens, ms=(time.perf_counter() - started) * 1000, skipped=why))


def _compactable(call: ToolCall, config: MicrocompactConfig) -> bool:
    name = normalize_name(call.name)
    if name in config.excluded_tools or tool_kind(call) in config.excluded_tools:
        return False
    return (name in config.compactable_tools or tool_kind(call) in config.compactable_tools
            or effective_kind(call) in config.compactable_tools)


def _candidates(view: Sequence[Message], config: MicrocompactConfig, ctx: StageContext,
                protect_tokens: int) -> list[tuple[ToolCall, ToolResult, int]]:
    """Compactable results older than the protected newest ones, oldest first."""
    calls = calls_by_id(view)
    counter = ctx.counter
    # Walk from the end: the newest `protect_tokens` and `keep_recent` compactable results stay.
    protected_from = len(view)
    seen = 0
    while protected_from > 0 and seen + counter.message(view[protected_from - 1]) <= protect_tokens:
        protected_from -= 1
        seen += counter.message(view[protected_from])
    compactable: list[tuple[int, ToolCall, ToolResult]] = []
    for i, m in enumerate(view):
        if m.origin is not Origin.CONVERSATION or m.id in ctx.protected:
            continue
        for r in m.tool_results:
            call = calls.get(r.call_id)
            if call is None or edited_stage(m, r.call_id) is not None or not _compactable(call, config):
                continue
            compactable.append((i, call, r))
    keep = compactable[-config.keep_recent:] if config.keep_recent else []
    kept_ids = {r.call_id for _, _, r in keep}
    out = []
    for i, call, r in compactable:
        if i >= protected_from or r.call_id in kept_ids:
            continue
        size = counter.block(r)
        if size > MIN_CLEARABLE_TOKENS:
            out.append((call, r, size))
    return out
