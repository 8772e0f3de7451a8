"""The staged graph: the declared stages in their order [-> reinject].

A LangGraph `StateGraph` with conditional edges, composed from the stages' and reinjectors'
declarations (`engine.state.Stage`, `engine.state.Reinjector`) without naming any: once the view is
under the trigger of every remaining stage the reducing stages are skipped, and the reinjection node
runs only when this call wrote a new compact boundary. Each node wraps one stage function: it applies
the stage's edits to the view and recounts, so stages stay pure deciders. Most calls of a session
edit nothing; `StagedGraph.walk` walks the same nodes and edges directly for them and hands the call
to the compiled graph at the first stage that decides an edit (the framework's per-node cost is then
paid only when something happens, and no stage before it decides twice). Both follow one definition
of the order: `_next_step`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..core.config import Config
from ..core.edits import Compact, Insert, apply_edits
from ..core.errors import ConfigError
from ..core.model import Message
from ..core.view import insertion_point
from ..engine.state import (PipelineState, Reinjection, Reinjector, Stage, StageContext, StageReport, StageResult,
                            StatusUpdate, cache_is_cold, effective_target, own_section, part_config,
                            tokenizer_ratio, view_offset)

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    RunContext = Runtime[StageContext]
else:
    # LangGraph resolves its nodes' annotations when it compiles them, and passes `runtime` by name
    # whatever its type: at run time the alias needs no import of LangGraph.
    RunContext = Any

# LangGraph's names of the graph's entry and exit (langgraph.constants), spelled here: the direct walk,
# which most calls take, never imports LangGraph (over half a second), only the first call a stage edits.
START, END = "__start__", "__end__"


# Graphs shared by the sessions of one process (StagedGraph.shared), by the identity of their parts:
# a handful of entries (one per distinct set of plugins), never evicted.
_SHARED: dict[tuple[tuple[int, ...], tuple[int, ...]], "StagedGraph"] = {}
_SHARED_LOCK = threading.RLock()


def load_langgraph() -> None:
    """Import LangGraph now: a server calls this at its start, so no request pays for the import when
    a stage of its session first edits."""
    import langgraph.graph  # noqa: F401


REINJECT = "reinject"
# A part that reports the rebuilt view's size (the status baseline) quotes figures that can grow by a
# few tokens between its dry run and the real one.
RESERVE_SIZE_MARGIN = 16


class _StageNode(Protocol):
    """A stage as a LangGraph node. A Protocol, not a Callable: LangGraph passes `runtime` by name."""

    def __call__(self, state: PipelineState, *, runtime: RunContext) -> dict[str, Any]: ...


def _applied(result: StageResult, state: PipelineState, ctx: StageContext) -> dict[str, Any]:
    """A stage's decision as a state update: its report, and its edits applied to the view and recounted."""
    update: dict[str, Any] = {"reports": [result.report]}
    if result.edits:
        view = apply_edits(state["view"], result.edits)
        compacted = state["compacted"] or any(isinstance(e, Compact) for e in result.edits)
        counted = ctx.counter.messages(view)
        tokens = counted + view_offset(ctx, counted, compacted, state.get("measured_over"))
        result.report.tokens_after = tokens
        update.update(view=view, tokens=tokens, edits=result.edits, cache_edits=result.cache_edits,
                      compacted=compacted)
    return update


@dataclass(frozen=True)
class Handoff:
    """Where `StagedGraph.walk` hands a call to the compiled graph: the stage that edits (or that
    must decide in full), the reports of the stages before it, which edited nothing, and that stage's
    decision when the walk made it (the graph applies it instead of deciding again)."""

    index: int
    reports: list[StageReport]
    decided: StageResult | None = None


@dataclass(frozen=True)
class Rebuilt:
    """What the reinjectors rebuilt: their messages (the status baseline last), one report each, and
    the status epoch the status reinjector started (None when it made none)."""

    messages: list[Message]
    reports: list[StageReport]
    status: StatusUpdate | None


def run_reinjectors(reinjectors: Sequence[Reinjector], view: list[Message], budget: int,
                    ctx: StageContext) -> Rebuilt:
    """Run `reinjectors` over `view` in their order, each within what the ones before it left of
    `budget` (in the provider's tokens; reinjectors count with worksurface's tokenizer). Used by the
    graph after a compaction and by the harness hooks after the harness's own compaction."""
    reports: list[StageReport] = []
    added: list[Message] = []
    status: StatusUpdate | None = None
    budget_left = budget
    ratio = tokenizer_ratio(ctx)
    # Each part's config section, by its declared type (a reinjection is rare: looked up when it runs).
    parts = [(r, part_config(ctx.config, r.config, r.name)) for r in reinjectors]
    # A part that reports on the rebuilt view keeps its claim on the budget but runs last, so that it
    # reports the size of the rebuilt view (summary, tail and every other reinjected part). It
    # reserves what it takes (a dry run at the current size; the figures it quotes change by a few
    # tokens), not its whole cap: the rest of the cap is room the other reinjectors can use.
    last = [(i, r, section) for i, (r, section) in enumerate(parts) if r.reserve is not None]
    reserved: dict[int, int] = {}
    for i, r, section in last:
        assert r.reserve is not None
        cap = min(r.reserve(section), max(0, budget_left))
        dry = r.run(view, section, ctx, int(cap / ratio))
        reserved[i] = min(cap, round(ctx.counter.messages(dry.messages) * ratio) + RESERVE_SIZE_MARGIN)
        budget_left -= reserved[i]
    # A reinjected message's id names its epoch and a digest of its text: one the view already holds
    # (the same rebuild met again) is shown already and is not added twice. An earlier compaction's
    # reinjection kept in the tail has another epoch in its id; each reinjector skips what the view
    # shows instead (files: `_reinjected_in_tail`).
    present = {m.id for m in view}
    for i, reinjector, section in [(i, r, c) for i, (r, c) in enumerate(parts) if r.reserve is None] + last:
        budget_left += reserved.get(i, 0)
        started = time.perf_counter()
        result: Reinjection = reinjector.run(view + added, section, ctx, int(budget_left / ratio))
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


def _reinjected(reinjectors: Sequence[Reinjector], state: PipelineState, ctx: StageContext) -> dict[str, Any]:
    """The reinjection node's body: the reinjectors within what the post-compact target leaves."""
    view, tokens = state["view"], state["tokens"]
    # The floor of text a compaction keeps covers what reinjection restores (the working state); the
    # view the compaction started from (the stage that compacted ran last) caps it, as it capped the room.
    before = state["reports"][-1].tokens_before if state["reports"] else None
    rebuilt = run_reinjectors(reinjectors, view, effective_target(ctx, cap=before) - tokens, ctx)
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


class StagedGraph:
    """The stages and reinjectors of a session, composed: the compiled LangGraph (`invoke`) and the
    direct walk over the same order for calls on which no stage edits (`walk`). Sessions with the same
    parts share one (`shared`): compiling costs milliseconds, and a gateway opens sessions per request."""

    @classmethod
    def shared(cls, stages: Sequence[Stage[Any]], reinjectors: Sequence[Reinjector]) -> "StagedGraph":
        """The graph of exactly these parts (the same declaration objects, in this order), made and
        compiled once per process. Its per-call state travels in the state and the context, and what
        it keeps per Config is read into locals, so sessions on several threads can share it."""
        key = (tuple(map(id, stages)), tuple(map(id, reinjectors)))
        with _SHARED_LOCK:
            found = _SHARED.get(key)
            if found is None:  # the entry holds its parts, so their ids cannot be reused while it lives
                found = _SHARED[key] = cls(stages, reinjectors)
            return found

    def __init__(self, stages: Sequence[Stage[Any]], reinjectors: Sequence[Reinjector]) -> None:
        names = [s.name for s in stages]
        if not stages or len(set(names)) != len(names) or {REINJECT, START, END} & set(names):
            raise ConfigError(f"the graph needs stages with distinct names other than {REINJECT!r}, {START!r} "
                              f"and {END!r}: {names}")
        self.stages: tuple[Stage[Any], ...] = tuple(stages)
        self.reinjectors: tuple[Reinjector, ...] = tuple(reinjectors)
        self.names: tuple[str, ...] = tuple(names)
        # Each stage's config section, found by its declared type once, here (None: a third-party
        # stage's own type, read from plugins.options and kept per Config, see `_config_of`).
        self._sections = tuple(own_section(s.config) for s in self.stages)
        self._plugin_configs: tuple[Config, dict[int, Any]] | None = None
        self._cold_after = tuple(any(s.fires_when_cold for s in self.stages[i + 1:]) for i in range(len(self.stages)))
        self._triggers: tuple[Config, tuple[int, ...]] | None = None
        self._compiled: Any = None  # compiled on the first call a stage edits (see `invoke`)

    def _lowest_trigger_after(self, config: Config) -> tuple[int, ...]:
        """For each stage, the lowest trigger among the stages after it (kept per Config: it is frozen,
        and a session passes the same one on every call)."""
        # Read once into a local: sessions of other configs share this graph from other threads.
        cached = self._triggers
        if cached is None or cached[0] is not config:
            triggers = [s.trigger(config) for s in self.stages]
            cached = (config, tuple(min(triggers[i + 1:], default=0) for i in range(len(triggers))))
            self._triggers = cached
        return cached[1]

    def _config_of(self, index: int, config: Config) -> Any:
        """The stage's settings: its section of Config, or its validated plugins.options entry."""
        section = self._sections[index]
        if section is not None:
            return getattr(config, section)
        cached = self._plugin_configs
        if cached is None or cached[0] is not config:
            cached = (config, {})
            self._plugin_configs = cached
        known = cached[1]
        if index not in known:
            stage = self.stages[index]
            known[index] = part_config(config, stage.config, stage.name)
        return known[index]

    def _decide(self, index: int, state: PipelineState, ctx: StageContext) -> StageResult:
        return self.stages[index].run(state, self._config_of(index, ctx.config), ctx)

    def _next_step(self, index: int, state: PipelineState, ctx: StageContext) -> str:
        """Where the graph goes after the stage at `index`: reinjection after a compaction, the end once
        the view is under the trigger of every remaining stage (unless forced, or a cold cache
        invites one that fires when cold), else the next stage."""
        if state.get("compacted"):
            return REINJECT
        if index + 1 >= len(self.stages):
            return END
        cold = self._cold_after[index] and cache_is_cold(ctx)
        if not ctx.forced and not cold and state["tokens"] <= self._lowest_trigger_after(ctx.config)[index]:
            return END
        return self.names[index + 1]

    def walk(self, state: PipelineState, ctx: StageContext) -> "PipelineState | Handoff":
        """The graph's own path for a call on which no stage edits: the same stage functions and the
        same edges, walked directly, without the framework's per-node cost (most calls of a session are
        such calls). At the first stage that decides an edit, a `Handoff` to the compiled graph, which
        starts at that stage with the reports of the ones before (stage decisions are pure: they would
        decide the same again on the same state; artifacts are content-addressed). A stage that
        declares a `decline` is only asked that here (a summary may call a model), and a forced call
        goes to the graph from the start."""
        if ctx.forced:
            return Handoff(0, [])
        reports: list[StageReport] = []
        index = 0
        while True:
            stage = self.stages[index]
            if stage.decline is not None:
                declined = stage.decline(state, self._config_of(index, ctx.config), ctx)
                if declined is None:
                    return Handoff(index, reports)
                result = declined
            else:
                result = self._decide(index, state, ctx)
            if result.edits:
                return Handoff(index, reports, result)
            update = _applied(result, state, ctx)
            reports += update["reports"]
            step = self._next_step(index, state, ctx)
            if step == END:
                return {**state, "reports": list(state["reports"]) + reports}
            if step == REINJECT:  # only after an edit (a compaction): left to the graph, from the start
                return Handoff(0, [])
            index += 1

    def invoke(self, state: PipelineState, ctx: StageContext) -> PipelineState:
        """The compiled graph on one call (each invocation passes its StageContext as the run context)."""
        compiled = self._compiled
        if compiled is None:
            with _SHARED_LOCK:
                if self._compiled is None:
                    self._compiled = self._compile()
                compiled = self._compiled
        final: PipelineState = compiled.invoke(state, context=ctx)
        return final

    def run(self, state: PipelineState, ctx: StageContext) -> PipelineState:
        """One call: walked directly when no stage edits, else the compiled graph from the stage
        that edits."""
        walked = self.walk(state, ctx)
        if not isinstance(walked, Handoff):
            return walked
        start: PipelineState = {**state, "reports": list(state["reports"]) + walked.reports,
                                "start_at": self.names[walked.index]}
        if walked.decided is not None:
            start["decided"] = walked.decided
        return self.invoke(start, ctx)

    def _node(self, index: int) -> _StageNode:
        def node(state: PipelineState, runtime: RunContext) -> dict[str, Any]:
            decided = state.get("decided")
            if decided is not None and state.get("start_at") == self.names[index]:
                # The walk decided this stage on this very state before handing the call over.
                return {**_applied(decided, state, runtime.context), "decided": None}
            return _applied(self._decide(index, state, runtime.context), state, runtime.context)
        node.__name__ = self.names[index]
        return node

    def _entry(self, state: PipelineState) -> str:
        """The first stage the compiled graph runs: the first of all, or where a walk handed off."""
        return state.get("start_at") or self.names[0]

    def _route_after(self, index: int) -> Callable[[PipelineState, RunContext], str]:
        def route(state: PipelineState, runtime: RunContext) -> str:
            return self._next_step(index, state, runtime.context)
        return route

    def _reinject_node(self, state: PipelineState, runtime: RunContext) -> dict[str, Any]:
        return _reinjected(self.reinjectors, state, runtime.context)

    def _compile(self) -> Any:
        from langgraph.graph import END as GRAPH_END, START as GRAPH_START, StateGraph

        if (GRAPH_START, GRAPH_END) != (START, END):  # the walk's routes must name the graph's own ends
            raise RuntimeError(f"LangGraph's START/END are {(GRAPH_START, GRAPH_END)!r}, not {(START, END)!r}")
        graph = StateGraph(PipelineState, context_schema=StageContext)
        for i, name in enumerate(self.names):
            graph.add_node(name, self._node(i))
        graph.add_node(REINJECT, self._reinject_node)
        graph.add_conditional_edges(START, self._entry, list(self.names))
        for i, name in enumerate(self.names):
            targets = [REINJECT, END] + list(self.names[i + 1:i + 2])
            graph.add_conditional_edges(name, self._route_after(i), targets)
        graph.add_edge(REINJECT, END)
        return graph.compile()
