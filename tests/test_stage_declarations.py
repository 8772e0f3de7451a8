"""Stages and reinjectors declare themselves (`engine.state.Stage`, `engine.state.Reinjector`), and the
graph composes them from those declarations alone: a part reads only the context fields it declares,
its config is found by its declared type, the graph skips a stage under its declared trigger (unless a
cold cache or a forced call says otherwise), and the quiet-call walk visits exactly the stages the
compiled graph visits."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, Callable

import pytest

from builders import Convo, words
from worksurface import Session
from worksurface.core.config import AutocompactConfig, BudgetConfig, Config, PricingConfig, ReinjectConfig
from worksurface.core.errors import ConfigError
from worksurface.core.tokens import TokenCounter
from worksurface.engine.state import (CONTEXT_FIELDS, Artifact, PipelineState, Reinjector, Stage, StageContext,
                                      StageReport, StageResult, section_name)
from worksurface.engine.reinject import MESSAGE_READS
from worksurface.graph.compose import Handoff, StagedGraph
from worksurface.graph.registry import REINJECTORS, STAGES
import worksurface.graph.registry as registry_module


class _Reading:
    """A context that notes every field a part reads, then answers from the real one."""

    def __init__(self, ctx: StageContext, seen: set[str]) -> None:
        self._ctx, self._seen = ctx, seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(name)
        return getattr(self._ctx, name)


def _noting(fn: Callable[..., Any], seen: set[str], ctx_at: int) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        args = list(args)
        args[ctx_at] = _Reading(args[ctx_at], seen)
        return fn(*args)
    return call


def _busy_session() -> Convo:
    """Every stage has something to do: noisy, long and huge outputs, re-reads, greps, a plan, a skill."""
    c = Convo().system("You are a coding agent.").user("Port the service to async. Don't touch vendor/.")
    c.tool("TodoWrite", {"todos": [{"content": "port the client", "status": "in_progress", "activeForm": "porting"}]},
           "Todos have been modified successfully.")
    c.tool("Skill", {"command": "async-port"}, "Launching skill: async-port")
    c.tool("Bash", {"command": "curl -s localhost:8080/items"},
           json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(400)]))
    for i in range(48):
        if i % 4 == 0:
            c.tool("Read", {"file_path": f"/repo/mod{i % 3}.py"}, words(2_500, seed=i % 3))
        elif i % 4 == 1:
            c.tool("Bash", {"command": f"pytest tests/test_{i}.py"}, "\x1b[32m" + words(1_200, seed=i) + "\x1b[0m\n"
                   + "Compiling module ...\n" * 200)
        elif i % 4 == 2:
            c.tool("Bash", {"command": "cat build.log"}, words(30_000, seed=i))
        else:
            c.tool("Grep", {"pattern": f"async def f{i}"}, words(800, seed=i))
        c.say(f"step {i} done")
    return c


def _exploring_session() -> Convo:
    """Re-reads, near and exact copies of outputs, and long exploration spans: snip and collapse weigh
    their edits (with microcompact kept out of their way by the configuration of the replay)."""
    c = Convo().system("You are a coding agent.").user("Refactor the parser.")
    for i in range(60):
        if i % 5 == 0:
            c.tool("Read", {"file_path": f"/r/m{i % 3}.py"}, words(900, seed=i % 3))
        elif i % 5 == 1:
            c.tool("Bash", {"command": "pytest -q"}, words(700, seed=7) + f"\n{i % 2} failed")
        elif i % 5 == 2:
            c.tool("Bash", {"command": "git status"}, words(500, seed=11))
        else:
            c.tool("Grep", {"pattern": f"def f{i}"}, words(1_400, seed=100 + i))
        c.say(f"step {i}")
    return c


def _replay(session: Session, c: Convo, pause_every: int = 0) -> int | None:
    """Call by call; with `pause_every`, a pause past the cache's lifetime now and then (a cold cache).
    The harness reports what the previous view measured (a fixed part more than worksurface counts);
    returns what the last one measured."""
    usage: int | None = None
    for n in range(3, len(c.messages) + 1):
        if c.messages[n - 1].role == "assistant":
            now = 1_000.0 + 40 * n + (400 if pause_every and n % pause_every == 0 else 0)
            usage = session.prepare(c.messages[:n], usage=usage, now=now).report.tokens_after + 900
    return usage


def test_every_part_reads_only_the_context_fields_it_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, set[str]] = {}

    def stage(s: Stage[Any]) -> Stage[Any]:
        notes = seen.setdefault(s.name, set())
        decline = s.decline and _noting(s.decline, notes, 2)
        return dataclasses.replace(s, run=_noting(s.run, notes, 2), decline=decline)

    def reinjector(r: Reinjector) -> Reinjector:
        return dataclasses.replace(r, run=_noting(r.run, seen.setdefault(r.name, set()), 2))

    monkeypatch.setattr(registry_module, "STAGES", tuple(stage(s) for s in STAGES))
    monkeypatch.setattr(registry_module, "REINJECTORS", tuple(reinjector(r) for r in REINJECTORS))
    c = _busy_session()
    with Session.open(None, window=60_000) as session:
        usage = _replay(session, c, pause_every=9)
        session.snip([c.messages[5].id], "the skill launch is noise")
        # The harness recorded what its last turns measured: the compaction is sized on that calibration.
        counted = itertools.accumulate(session.counter.message(m) for m in c.messages)
        measured = [dataclasses.replace(m, meta={**m.meta, "usage": {"input_tokens": int(n * 1.1) + 900}})
                    if m.role == "assistant" else m for m, n in zip(c.messages, counted)]
        session.prepare(measured, usage=usage, now=9_000.0, force=True, instructions="keep the async plan")
    with Session.open(None, window=60_000, snip={"min_gain_tokens": 1_500}, microcompact={"compactable_tools": []},
                      autocompact={"economic_from": 1.0}) as session:
        _replay(session, _exploring_session())
    with Session.open(None) as session:  # a manual compaction of a short session keeps its newer half
        session.compact(Convo().user("Fix the login bug.").say(words(300)).user("Compact now.").messages, now=5.0)
    declared = {p.name: p.reads for p in (*STAGES, *REINJECTORS)}
    assert set(seen) == set(declared) and all(seen.values())  # every part ran
    for name, fields in seen.items():
        assert fields <= declared[name], f"{name} reads {sorted(fields - declared[name])} it does not declare"
        assert declared[name] <= CONTEXT_FIELDS, f"{name} declares fields StageContext does not have"
    # The declarations are not padded: each declared field is read by its part on this replay, except
    # the facts' fallback for a context without a ledger (a session always has one) and the epoch a
    # reinjector reads only when it has something to restore.
    fallback = {"transcript", "queued_inputs"} | MESSAGE_READS
    for name, fields in declared.items():
        unread = fields - seen[name]
        assert unread <= fallback, f"{name} declares {sorted(unread)} but never read them"


def test_every_shared_field_is_read_by_some_part() -> None:
    """What only one part needs travels as that part's input, and nothing sits in the context unread."""
    read = set().union(*(p.reads for p in (*STAGES, *REINJECTORS)))
    assert read == CONTEXT_FIELDS
    readers = {f: [p.name for p in (*STAGES, *REINJECTORS) if f in p.reads] for f in CONTEXT_FIELDS}
    # Shared: read by more than one part, but for the call's clock (the status bar's; the graph reads
    # it too, for the cache's coldness).
    assert {f for f, names in readers.items() if len(names) < 2} == {"now"}


def test_the_inputs_a_part_declares_are_what_the_session_supplies(monkeypatch: pytest.MonkeyPatch) -> None:
    supplied: list[frozenset[type]] = []
    run = StagedGraph.run

    def noting(self: StagedGraph, state: PipelineState, ctx: StageContext) -> PipelineState:
        supplied.append(ctx.inputs.types())
        return run(self, state, ctx)

    monkeypatch.setattr(StagedGraph, "run", noting)
    c = _busy_session()
    with Session.open(None) as session:
        session.prepare(c.messages[:8], now=10.0)
    wanted = {t for p in (*STAGES, *REINJECTORS) for t in p.needs}
    memories = {type(s.memory()) for s in STAGES if s.memory is not None}
    assert supplied and all(types == wanted | memories for types in supplied)


def test_a_config_section_is_found_by_its_type() -> None:
    assert section_name(BudgetConfig) == "budget" and section_name(ReinjectConfig) == "reinject"
    assert section_name(PricingConfig) == "pricing"
    assert [section_name(s.config) for s in STAGES] == [s.name for s in STAGES]  # each stage's own section

    class Elsewhere(AutocompactConfig):
        pass

    with pytest.raises(ConfigError, match="Elsewhere is not one section of Config"):
        section_name(Elsewhere)


# --- composing from the declarations alone ----------------------------------------------------------

class _Sink:
    def put_artifact(self, content: str, *, kind: str, meta: dict[str, Any] | None = None) -> Artifact:
        return Artifact("a0", None, 0)


def _stage(name: str, visits: list[str], trigger: int, cold: bool = False) -> Stage[Any]:
    def run(state: PipelineState, config: Any, ctx: StageContext) -> StageResult:
        visits.append(name)
        return StageResult([], StageReport(name, state["tokens"], state["tokens"], skipped="nothing to do"))
    return Stage(name, BudgetConfig, run, reads=frozenset(), trigger=lambda config: trigger, fires_when_cold=cold)


def _walks(stages: Callable[[list[str]], list[Stage[Any]]], tokens: int, **ctx: Any) -> tuple[list[str], list[str]]:
    """(stages the direct walk visited, stages the compiled graph visited) on one call."""
    out = []
    for walk in (True, False):
        visits: list[str] = []
        graph = StagedGraph(stages(visits), ())
        context = StageContext(config=Config(), counter=TokenCounter(), artifacts=_Sink(), now=0.0, **ctx)
        state: PipelineState = {"view": [], "tokens": tokens, "edits": [], "reports": [], "cache_edits": [],
                                "compacted": False}
        final = graph.walk(state, context) if walk else graph.invoke(state, context)
        if walk and ctx.get("forced"):
            assert final == Handoff(0, [])  # a forced call is the compiled graph's, from the start
            final = graph.invoke(state, context)
        assert not isinstance(final, Handoff)
        assert [r.name for r in final["reports"]] == visits
        out.append(visits)
    return out[0], out[1]


def _three(visits: list[str]) -> list[Stage[Any]]:
    return [_stage("first", visits, 0), _stage("cheap", visits, 0),
            _stage("costly", visits, 5_000, cold=True), _stage("last", visits, 9_000)]


@pytest.mark.parametrize("tokens, ctx, expected", [
    (1_000, {}, ["first", "cheap"]),                               # under every later trigger: the graph ends
    (6_000, {}, ["first", "cheap", "costly"]),                     # over costly's trigger, under last's
    (9_500, {}, ["first", "cheap", "costly", "last"]),
    (1_000, {"idle_seconds": 3_600.0}, ["first", "cheap", "costly"]),  # a cold cache: costly fires at any size
    (1_000, {"idle_seconds": 10.0}, ["first", "cheap"]),
    (1_000, {"forced": True}, ["first", "cheap", "costly", "last"]),   # a forced call visits every stage
])
def test_the_graph_follows_the_declared_triggers(tokens: int, ctx: dict[str, Any], expected: list[str]) -> None:
    walked, compiled = _walks(_three, tokens, **ctx)
    assert compiled == expected
    if not ctx.get("forced"):
        assert walked == expected


def test_a_stage_with_a_decline_is_only_asked_that_on_a_quiet_call() -> None:
    runs: list[str] = []

    def costly(state: PipelineState, config: Any, ctx: StageContext) -> StageResult:
        runs.append("run")
        raise AssertionError("the quiet walk must not run a stage that declares a decline")

    def decline(state: PipelineState, config: Any, ctx: StageContext) -> StageResult | None:
        runs.append("decline")
        return None if state["tokens"] > 8_000 else StageResult([], StageReport("summary", 0, 0, skipped="small"))

    graph = StagedGraph([Stage("summary", BudgetConfig, costly, reads=frozenset(), decline=decline)], ())
    context = StageContext(config=Config(), counter=TokenCounter(), artifacts=_Sink(), now=0.0)
    state: PipelineState = {"view": [], "tokens": 100, "edits": [], "reports": [], "cache_edits": [], "compacted": False}
    final = graph.walk(state, context)
    assert not isinstance(final, Handoff) and [r.skipped for r in final["reports"]] == ["small"]
    # A decline that cannot answer hands the stage to the graph, to decide in full there.
    assert graph.walk({**state, "tokens": 9_000}, context) == Handoff(0, [])
    assert runs == ["decline", "decline"]


def test_stage_names_must_be_distinct() -> None:
    visits: list[str] = []
    with pytest.raises(ConfigError, match="distinct names"):
        StagedGraph([_stage("a", visits, 0), _stage("a", visits, 0)], ())
    with pytest.raises(ConfigError):
        StagedGraph([_stage("reinject", visits, 0)], ())


def test_a_stage_whose_config_is_no_section_reads_its_plugin_options() -> None:
    class Unlisted(BudgetConfig):
        pass

    seen: list[Any] = []

    def run(state: PipelineState, config: Any, ctx: StageContext) -> StageResult:
        seen.append(config)
        return StageResult([], StageReport("a", state["tokens"], state["tokens"], skipped="nothing to do"))

    graph = StagedGraph([Stage("a", Unlisted, run, reads=frozenset())], ())
    config = Config(plugins={"options": {"a": {"max_result_tokens": 1234}}})
    context = StageContext(config=config, counter=TokenCounter(), artifacts=_Sink(), now=0.0)
    state: PipelineState = {"view": [], "tokens": 0, "edits": [], "reports": [], "cache_edits": [], "compacted": False}
    graph.run(state, context)
    assert isinstance(seen[0], Unlisted) and seen[0].max_result_tokens == 1234
