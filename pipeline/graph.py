"""The staged graph: budget -> snip -> microcompact -> collapse -> autocompact [-> reinject].

A LangGraph `StateGraph` with conditional edges: once the view is under every remaining trigger the
reducing stages are skipped, and the reinjection node runs only when this call wrote a new compact
boundary. Each node wraps one stage function: it applies the stage's edits to the view and
recounts, so stages stay pure deciders.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from worksurface.stages import autocompact, budget, collapse, microcompact, snip

from .config import Config
from .edits import Compact, Insert, apply_edits
from .state import PipelineState, StageContext, StageReport, StageResult

REDUCING_STAGES = (budget, snip, microcompact, collapse, autocompact)
STAGE_NAMES = tuple(s.NAME for s in REDUCING_STAGES)
REINJECT = "reinject"


def _stage_config(config: Config, name: str) -> Any:
    return getattr(config, name)


def _node(stage) -> Callable[[PipelineState, RunnableConfig], dict]:
    def node(state: PipelineState, config: RunnableConfig) -> dict:
        ctx: StageContext = config["configurable"]["ctx"]
        result: StageResult = stage.run(state, _stage_config(ctx.config, stage.NAME), ctx)
        update: dict[str, Any] = {"reports": [result.report]}
        if result.edits:
            view = apply_edits(state["view"], result.edits)
            tokens = ctx.counter.messages(view) + ctx.extras.get("token_offset", 0)
            result.report.tokens_after = tokens
            update.update(view=view, tokens=tokens, edits=result.edits, cache_edits=result.cache_edits,
                          compacted=state.get("compacted", False)
                          or any(isinstance(e, Compact) for e in result.edits))
        return update
    node.__name__ = stage.NAME
    return node


def _reinject_node(state: PipelineState, config: RunnableConfig) -> dict:
    ctx: StageContext = config["configurable"]["ctx"]
    reinjectors = ctx.extras.get("reinjectors", ())
    view, tokens = state["view"], state["tokens"]
    reports: list[StageReport] = []
    added = []
    budget_left = ctx.config.post_compact_target - tokens
    for reinjector in reinjectors:
        started = time.perf_counter()
        messages, report = reinjector.run(view + added, ctx.config.reinject, ctx, budget_left)
        cost = ctx.counter.messages(messages)
        budget_left -= cost
        added.extend(messages)
        report.ms = (time.perf_counter() - started) * 1000
        reports.append(report)
    if not added:
        return {"reports": reports}
    # The status baseline goes last: later status deltas follow it at the tail of the view.
    added.sort(key=lambda m: m.meta.get("reinjector") is None and m.origin.value == "status")
    anchor = view[-1].id if view else None
    edit = Insert(REINJECT, anchor, tuple(added))
    new_view = apply_edits(view, [edit])
    return {"view": new_view, "tokens": ctx.counter.messages(new_view), "edits": [edit], "reports": reports}


def _min_remaining_trigger(ctx: StageContext, after: str) -> int:
    """The lowest token trigger among the stages after `after`."""
    # Snip has no token trigger (it batches by gain), so it always gets its turn.
    triggers = {"snip": 0, "microcompact": ctx.config.microcompact.trigger_tokens,
                "collapse": ctx.config.collapse_trigger,
                "autocompact": ctx.config.threshold}
    remaining = STAGE_NAMES[STAGE_NAMES.index(after) + 1:]
    return min((triggers[n] for n in remaining if n in triggers), default=0)


def _route_after(name: str, next_name: str | None) -> Callable[[PipelineState, RunnableConfig], str]:
    def route(state: PipelineState, config: RunnableConfig) -> str:
        ctx: StageContext = config["configurable"]["ctx"]
        if state.get("compacted"):
            return REINJECT
        if next_name is None:
            return END
        cold = (ctx.idle_seconds is not None
                and ctx.idle_seconds >= ctx.config.microcompact.cache_ttl_seconds
                and STAGE_NAMES.index(name) < STAGE_NAMES.index("microcompact"))
        if not ctx.forced and not cold and state["tokens"] <= _min_remaining_trigger(ctx, name):
            return END
        return next_name
    return route


def build_graph():
    """Compile the staged graph (done once per Session; invocations pass the context in config)."""
    graph = StateGraph(PipelineState)
    for stage in REDUCING_STAGES:
        graph.add_node(stage.NAME, _node(stage))
    graph.add_node(REINJECT, _reinject_node)
    graph.add_edge(START, STAGE_NAMES[0])
    for i, name in enumerate(STAGE_NAMES):
        nxt = STAGE_NAMES[i + 1] if i + 1 < len(STAGE_NAMES) else None
        targets = [REINJECT, END] + ([nxt] if nxt else [])
        graph.add_conditional_edges(name, _route_after(name, nxt), targets)
    graph.add_edge(REINJECT, END)
    return graph.compile()
