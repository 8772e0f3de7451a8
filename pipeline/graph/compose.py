"""The staged graph: ingest -> budget -> snip -> microcompact -> collapse -> autocompact [-> reinject].

A LangGraph `StateGraph` with conditional edges: once the view is under every remaining trigger the
reducing stages are skipped, and the reinjection node runs only when this call wrote a new compact
boundary. Each node wraps one stage function: it applies the stage's edits to the view and
recounts, so stages stay pure deciders. Most calls of a session edit nothing; `run_unedited` walks
the same nodes and edges directly for them and hands the call to the compiled graph as soon as a
stage decides an edit (the framework's per-node cost is then paid only when something happens).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from worksurface.stages import autocompact, budget, collapse, ingest, microcompact, snip

from ..core.config import Config
from ..core.edits import Compact, Insert, apply_edits
from ..core.model import Message
from ..core.view import insertion_point
from ..engine.state import (PipelineState, Reinjection, Stage, StageContext, StageReport, StageResult, StatusUpdate,
                    tokenizer_ratio, view_offset)

REDUCING_STAGES: tuple[Stage, ...] = (ingest, budget, snip, microcompact, collapse, autocompact)
STAGE_NAMES = tuple(s.NAME for s in REDUCING_STAGES)
_STAGES = {s.NAME: s for s in REDUCING_STAGES}
SUMMARIZING_STAGE = autocompact.NAME
REINJECT = "reinject"
STATUS_REINJECTOR = "status"
# The status baseline quotes the rebuilt view's size: between its dry run and the real one its figures
# can grow by a few tokens.
STATUS_SIZE_MARGIN = 16


def _stage_config(config: Config, name: str) -> Any:
    return getattr(config, name)


class _StageNode(Protocol):
    """A stage as a LangGraph node. A Protocol, not a Callable: LangGraph passes `runtime` by name."""

    def __call__(self, state: PipelineState, *, runtime: Runtime[StageContext]) -> dict[str, Any]: ...


def _apply_stage(stage: Stage, state: PipelineState, ctx: StageContext) -> dict[str, Any]:
    """One stage's node body: decide, apply its edits to the view and recount."""
    result: StageResult = stage.run(state, _stage_config(ctx.config, stage.NAME), ctx)
    update: dict[str, Any] = {"reports": [result.report]}
    if result.edits:
        view = apply_edits(state["view"], result.edits)
        compacted = state["compacted"] or any(isinstance(e, Compact) for e in result.edits)
        counted = ctx.counter.messages(view)
        tokens = counted + view_offset(ctx, counted, compacted)
        result.report.tokens_after = tokens
        update.update(view=view, tokens=tokens, edits=result.edits, cache_edits=result.cache_edits,
                      compacted=compacted)
    return update


def _node(stage: Stage) -> _StageNode:
    def node(state: PipelineState, runtime: Runtime[StageContext]) -> dict[str, Any]:
        return _apply_stage(stage, state, runtime.context)
    node.__name__ = stage.NAME
    return node


@dataclass(frozen=True)
class Rebuilt:
    """What the reinjectors rebuilt: their messages (the status baseline last), one report each, and
    the status epoch the status reinjector started (None when it made none)."""

    messages: list[Message]
    reports: list[StageReport]
    status: StatusUpdate | None


def run_reinjectors(view: list[Message], budget: int, ctx: StageContext) -> Rebuilt:
    """Run the context's reinjectors over `view` in their order, each within what the ones before it
    left of `budget` (in the provider's tokens). The status baseline keeps its priority claim on the
    budget but runs last, so that it reports the size of the rebuilt view. Used by the graph after a
    compaction and by the harness hooks after the harness's own compaction."""
    reports: list[StageReport] = []
    added: list[Message] = []
    status: StatusUpdate | None = None
    budget_left = budget
    status_last = [r for r in ctx.reinjectors if r.NAME == STATUS_REINJECTOR]
    ratio = tokenizer_ratio(ctx)
    reserved = 0
    if status_last:
        # Reserve what the baseline takes (a dry run at the current size; the figures it quotes change
        # by a few tokens), not its whole cap: the rest of the cap is room the other reinjectors can use.
        cap = min(ctx.config.reinject.status_tokens, max(0, budget_left))
        dry = status_last[0].run(view, ctx.config.reinject, ctx, int(cap / ratio))
        reserved = min(cap, round(ctx.counter.messages(dry.messages) * ratio) + STATUS_SIZE_MARGIN)
    budget_left -= reserved
    # A reinjected message's id names its epoch and a digest of its text: one the view already holds
    # (the same rebuild met again) is shown already and is not added twice. An earlier compaction's
    # reinjection kept in the tail has another epoch in its id; each reinjector skips what the view
    # shows instead (files: `_reinjected_in_tail`).
    present = {m.id for m in view}
    for reinjector in [r for r in ctx.reinjectors if r.NAME != STATUS_REINJECTOR] + status_last:
        if reinjector.NAME == STATUS_REINJECTOR:
            budget_left += reserved
        started = time.perf_counter()
        # Reinjectors count with worksurface's tokenizer; the budget is in the provider's tokens.
        result: Reinjection = reinjector.run(view + added, ctx.config.reinject, ctx, int(budget_left / ratio))
        fresh = [m for m in result.messages if m.id not in present]
        present.update(m.id for m in fresh)
        budget_left -= round(ctx.counter.messages(fresh) * ratio)
        added.extend(fresh)
        status = result.status or status
        result.report.ms = (time.perf_counter() - started) * 1000
        reports.append(result.report)
    # The status baseline goes last: later status deltas follow it at the tail of the view.
    added.sort(key=lambda m: m.meta.get("reinjector") is None and m.origin.value == "status")
    return Rebuilt(added, reports, status)


def _reinject_node(state: PipelineState, runtime: Runtime[StageContext]) -> dict[str, Any]:
    ctx = runtime.context
    view, tokens = state["view"], state["tokens"]
    rebuilt = run_reinjectors(view, ctx.config.post_compact_target - tokens, ctx)
    if not rebuilt.messages:
        return {"reports": rebuilt.reports, "status_update": rebuilt.status}
    # After the view's last message, unless its last turn still waits for a tool result: then before
    # that turn (the rewind rule stays: dropped with the newest message, as at the end).
    point = insertion_point(view)
    anchor = view[point - 1].id if point else None
    edit = Insert(REINJECT, anchor, tuple(rebuilt.messages), view[-1].id if view and point < len(view) else None)
    new_view = apply_edits(view, [edit])
    return {"view": new_view, "tokens": ctx.counter.messages(new_view), "edits": [edit], "reports": rebuilt.reports,
            "status_update": rebuilt.status}


def _min_remaining_trigger(ctx: StageContext, after: str) -> int:
    """The lowest token trigger among the stages after `after`."""
    # Snip has no token trigger (it batches by gain), so it always gets its turn.
    triggers = {"budget": 0, "snip": 0, "microcompact": ctx.config.microcompact.trigger_tokens,
                "collapse": ctx.config.collapse_trigger,
                "autocompact": ctx.config.compaction_floor}
    remaining = STAGE_NAMES[STAGE_NAMES.index(after) + 1:]
    return min((triggers[n] for n in remaining if n in triggers), default=0)


def _next_step(name: str, state: PipelineState, ctx: StageContext) -> str:
    """Where the graph goes after stage `name`: reinjection after a compaction, the end once the view
    is under every remaining trigger (unless forced, or a cold cache invites microcompact), else the
    next stage."""
    if state.get("compacted"):
        return REINJECT
    index = STAGE_NAMES.index(name)
    if index + 1 >= len(STAGE_NAMES):
        return END
    cold = (ctx.idle_seconds is not None
            and ctx.idle_seconds >= ctx.config.microcompact.cache_ttl_seconds
            and index < STAGE_NAMES.index("microcompact"))
    if not ctx.forced and not cold and state["tokens"] <= _min_remaining_trigger(ctx, name):
        return END
    return STAGE_NAMES[index + 1]


def _route_after(name: str) -> Callable[[PipelineState, Runtime[StageContext]], str]:
    def route(state: PipelineState, runtime: Runtime[StageContext]) -> str:
        return _next_step(name, state, runtime.context)
    return route


def run_unedited(state: PipelineState, ctx: StageContext) -> PipelineState | None:
    """The graph's own path for a call on which no stage edits: the same stage functions and the same
    edges, walked directly, without the framework's per-node cost (most calls of a session are such
    calls). None as soon as a stage decides an edit: the caller then runs the compiled graph, which
    decides again from the start (stage decisions are pure; artifacts are content-addressed). At
    autocompact only its decision is taken here (`autocompact.decline`): a summary may call a model,
    so a compaction is left to the graph, and a forced call goes there from the start."""
    if ctx.forced:
        return None
    reports: list[StageReport] = []
    name = STAGE_NAMES[0]
    while True:
        update = _apply_stage(_STAGES[name], state, ctx)
        if "view" in update:
            return None
        reports += update["reports"]
        step = _next_step(name, state, ctx)
        if step == END:
            return {**state, "reports": list(state["reports"]) + reports}
        if step == REINJECT:
            return None
        if step == SUMMARIZING_STAGE:
            # Whether to compact is decided without writing a summary; only a compaction needs the graph.
            declined = autocompact.decline(state, _stage_config(ctx.config, step), ctx)
            if declined is None:
                return None
            return {**state, "reports": list(state["reports"]) + reports + [declined.report]}
        name = step


def build_graph() -> Any:
    """Compile the staged graph (done once per Session; each invocation passes its StageContext as
    the run context: `graph.invoke(state, context=ctx)`)."""
    graph = StateGraph(PipelineState, context_schema=StageContext)
    for stage in REDUCING_STAGES:
        graph.add_node(stage.NAME, _node(stage))
    graph.add_node(REINJECT, _reinject_node)
    graph.add_edge(START, STAGE_NAMES[0])
    for i, name in enumerate(STAGE_NAMES):
        nxt = STAGE_NAMES[i + 1] if i + 1 < len(STAGE_NAMES) else None
        targets = [REINJECT, END] + ([nxt] if nxt else [])
        graph.add_conditional_edges(name, _route_after(name), targets)
    graph.add_edge(REINJECT, END)
    return graph.compile()


@functools.cache
def shared_graph() -> Any:
    """The compiled graph every session of this process runs: it keeps no state between runs (each
    run's state and context are its own), so compiling it once per session would only cost time."""
    return build_graph()
