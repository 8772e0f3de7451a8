"""Microcompact: clear old results of tools whose output can be fetched again.

Considered once the view is over `trigger_tokens`; fires when the firing rule says the batch pays and
has reached its economic size (`pricing.decide_edit`: the saving over the expected remaining calls
against the tail it re-bills, batched so the prefix changes in a few large steps), and removes at
least `clear_at_least`; or when the cache is cold (idle longer than `cache_ttl`, so the prefix is
rewritten anyway). The newest `keep_recent` results are kept, and on the token trigger also the newest
`protect_tokens` of the view (on a call that may compact, at least the tail autocompact keeps
verbatim; a cold cache has nothing to protect: the whole prefix is paid for again either way). The
cleared call ids are returned as `cache_edits` for providers that can delete server-side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from worksurface.core.config import MicrocompactConfig
from worksurface.core.edits import ReplaceResult, edited_stage
from worksurface.core.model import Message, Origin, ToolCall, ToolResult, shared_length
from worksurface.core.tokens import TokenCounter
from worksurface.engine.pricing import FIRING_RULE_READS, decide_edit
from worksurface.engine.state import PipelineState, SkipKind, Skipped, Stage, StageContext, StageReport, StageResult
from worksurface.core.toolkinds import effective_kind, normalize_name, tool_kind

NAME = "microcompact"
# The placeholder costs about 20 tokens (wording, size and artifact id). A result of a few lines (a
# path, a hash, a count) is dense with facts: it is cleared only when the placeholder saves at least
# twice what it costs.
MIN_CLEARABLE_TOKENS = 60
PLACEHOLDER = "[Old tool result content cleared: {size} tokens, artifact {artifact}]"


def run(state: PipelineState, config: MicrocompactConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    view, tokens = state["view"], state["tokens"]
    cold = ctx.idle_seconds is not None and ctx.idle_seconds >= config.cache_ttl_seconds
    over = tokens > config.trigger_tokens
    if not over and not cold:
        return _skip(tokens, started, SkipKind.UNDER_TRIGGER, f"{tokens} tokens, under the trigger of {config.trigger_tokens}")

    protect = config.protect_tokens if over else 0
    if ctx.forced or tokens > ctx.config.threshold:
        # Autocompact may run on this call and keep a verbatim tail: clearing results inside it would
        # throw away the only part of the history the model still reads word for word.
        protect = max(protect, ctx.config.autocompact.keep_tail_tokens)
    candidates = _candidates(view, config, ctx, protect_tokens=protect)
    gain = sum(size for *_, size in candidates)
    if not cold and gain < config.clear_at_least:
        return _skip(tokens, started, SkipKind.BELOW_MINIMUM, f"only {gain} tokens clearable, below clear_at_least {config.clear_at_least}")
    if not candidates:
        return _skip(tokens, started, SkipKind.NOTHING_TO_DO, "no clearable tool result")
    # Clearing edits the sent prefix: only when the saving outweighs the re-billing
    # (`pricing.decide_edit`: saving over the expected remaining calls).
    first = candidates[0][0]
    decision = decide_edit(state, ctx, first_index=first, saved_tokens=gain)
    if not cold and not decision.fire:
        return _skip(tokens, started, SkipKind.NOT_WORTH_IT, f"not worth it: {decision.reason}")

    edits = []
    freed = 0
    for _, call, result, size in candidates:
        artifact = ctx.artifacts.put_artifact(result.content, kind="tool_result",
                                              meta={"call_id": call.id, "tool": call.name})
        # The call just before the result already names the tool and its target: the placeholder
        # says only how large the output was and where it is kept (it is read on every later call).
        text = PLACEHOLDER.format(size=size, artifact=artifact.id)
        saved = max(0, size - ctx.counter.text(text))
        freed += saved
        edits.append(ReplaceResult(NAME, call.id, text, artifact=artifact.id, tokens_freed=saved))
    report = StageReport(NAME, tokens, tokens - freed, items=len(edits), ms=(time.perf_counter() - started) * 1000,
                         details={"trigger": "tokens" if over else "cache_cold", "cleared": [e.call_id for e in edits],
                                  "firing": decision.to_json()})
    return StageResult(edits, report, cache_edits=[e.call_id for e in edits])


def _skip(tokens: int, started: float, kind: SkipKind, why: str) -> StageResult:
    return StageResult([], StageReport(NAME, tokens, tokens, ms=(time.perf_counter() - started) * 1000,
                                       outcome=Skipped(kind, why)))


def _compactable(call: ToolCall, config: MicrocompactConfig) -> bool:
    name = normalize_name(call.name)
    if name in config.excluded_tools or tool_kind(call) in config.excluded_tools:
        return False
    return (name in config.compactable_tools or tool_kind(call) in config.compactable_tools
            or effective_kind(call) in config.compactable_tools)


@dataclass
class _Tail:
    """What the walk has read of the view: the results not cleared since the last one this stage
    cleared (oldest first, compactable ones only, as (view index, message, call, result)) and every call by
    id. Kept in the session's `MicrocompactMemory`, so a call reads only the messages new since the previous one."""

    config: MicrocompactConfig
    prefix: list[Message] = field(default_factory=list)
    results: list[tuple[int, Message, ToolCall, ToolResult, int]] = field(default_factory=list)
    calls: dict[str, tuple[int, ToolCall]] = field(default_factory=dict)  # id -> (view index, call)
    cleared_at: int = -1   # the message whose cleared result last emptied `results`
    reused_id: bool = False  # a call id seen twice: the calls cannot be taken back to a point

    def read(self, view: Sequence[Message], counter: TokenCounter) -> None:
        calls = self.calls
        for i in range(len(self.prefix), len(view)):
            m = view[i]
            for c in m.tool_calls:
                self.reused_id |= c.id in calls
                calls[c.id] = (i, c)
            if not m.tool_results:
                continue
            # Parallel results share a message: one of them cleared, the others may have been kept.
            if any(edited_stage(m, r.call_id) == NAME for r in m.tool_results):
                self.results.clear()
                self.cleared_at = i
            if m.origin is not Origin.CONVERSATION:
                continue
            for r in m.tool_results:
                found = calls.get(r.call_id)
                if found is not None and edited_stage(m, r.call_id) is None and _compactable(found[1], self.config):
                    self.results.append((i, m, found[1], r, counter.block(r)))
        self.prefix = list(view)

    def rewind(self, n: int) -> bool:
        """Forget what was read from view index `n` on, as if only `prefix[:n]` had been read (after an
        edit there, a call reads from `n`, not from the start); False when that cannot be undone."""
        if self.cleared_at >= n or self.reused_id:
            return False
        del self.prefix[n:]
        self.results = [entry for entry in self.results if entry[0] < n]
        self.calls = {cid: at for cid, at in self.calls.items() if at[0] < n}
        return True


class MicrocompactMemory:
    """What microcompact keeps of a session between calls (the session holds one per session, in
    `StageContext.inputs`): its walk over the view so far. Without it the walk reads the whole view."""

    __slots__ = ("tail",)

    def __init__(self) -> None:
        self.tail: _Tail | None = None


def _tail(view: Sequence[Message], config: MicrocompactConfig, ctx: StageContext) -> _Tail:
    """The walk over `view`, continued from the previous call's when the view still starts with it."""
    memory = ctx.inputs.get(MicrocompactMemory)
    tail = memory.tail if memory is not None else None
    if not isinstance(tail, _Tail) or tail.config is not config:
        tail = _Tail(config)
    elif (kept := shared_length(view, tail.prefix)) < len(tail.prefix) and not tail.rewind(kept):
        tail = _Tail(config)
    tail.read(view, ctx.counter)
    if memory is not None:
        memory.tail = tail
    return tail


def _candidates(view: Sequence[Message], config: MicrocompactConfig, ctx: StageContext,
                protect_tokens: int) -> list[tuple[int, ToolCall, ToolResult, int]]:
    """Compactable results older than the protected newest ones, oldest first, as (view index, call,
    result, tokens).

    Only results after the last one this stage cleared are looked at: each batch clears everything
    clearable before its protected tail, so what is older was cleared or can never be (another tool,
    too small, already replaced by another stage). The walk over the view continues from the previous
    call's (`_tail`), so a call reads only what is new."""
    counter = ctx.counter
    # Walk from the end: the newest `protect_tokens` and `keep_recent` compactable results stay.
    protected_from = len(view)
    seen = 0
    while protected_from > 0 and seen + counter.message(view[protected_from - 1]) <= protect_tokens:
        protected_from -= 1
        seen += counter.message(view[protected_from])
    tail = _tail(view, config, ctx)
    compactable = [(i, call, r, size) for i, m, call, r, size in tail.results if m.id not in ctx.protected]
    keep = compactable[-config.keep_recent:] if config.keep_recent else []
    kept_ids = {r.call_id for _, _, r, _ in keep}
    return [(i, call, r, size) for i, call, r, size in compactable
            if i < protected_from and r.call_id not in kept_ids and size > MIN_CLEARABLE_TOKENS]


STAGE = Stage(NAME, MicrocompactConfig, run, memory=MicrocompactMemory,
              trigger=lambda config: config.microcompact.trigger_tokens,
              fires_when_cold=True,
              reads=frozenset({"config", "counter", "artifacts", "idle_seconds", "forced", "protected", "inputs"})
              | FIRING_RULE_READS)
