"""The direct walk of the graph (`StagedGraph.walk`) on calls where no stage edits gives exactly what
the compiled graph gives: same views, same stage reports, on every call of a replay that also has
calls where stages fire (so the hand-off to the graph, at the stage that edits, is exercised too)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import Convo, words
from replaying import after_each_assistant, replay_calls
from worksurface import Session
from worksurface.graph.compose import Handoff, StagedGraph
from worksurface.session.session import PrepareReport


def _session_with_every_stage(steps: int = 70) -> Convo:
    c = Convo().system("You are a coding agent.").user("Port the service to async. Don't touch vendor/.")
    for i in range(steps):
        if i % 4 == 0:
            c.tool("Read", {"file_path": f"/repo/mod{i % 5}.py"}, words(2_500, seed=i % 5))  # re-reads: snip
        elif i % 4 == 1:
            c.tool("Bash", {"command": f"pytest tests/test_{i}.py"}, "\x1b[32m" + words(1_200, seed=i) + "\x1b[0m\n"
                   + "Compiling module ...\n" * 200)  # repeated lines: ingest
        elif i % 4 == 2:
            c.tool("Bash", {"command": "cat build.log"}, words(30_000, seed=i))  # over the result budget
        else:
            c.tool("Grep", {"pattern": f"async def f{i}"}, words(800, seed=i))
        c.say(f"step {i} done")
    return c


def _summary(report: PrepareReport) -> list[tuple[Any, ...]]:
    return [(s.name, s.skipped, s.items, s.tokens_before, s.tokens_after) for s in report.stages]


def _replay(c: Convo, monkeypatch: pytest.MonkeyPatch | None) -> list[tuple[list[str], list[tuple[Any, ...]], bool]]:
    if monkeypatch is not None:
        monkeypatch.setattr(StagedGraph, "walk", lambda self, state, ctx: Handoff(0, []))  # the graph alone
    out = []
    with Session.open(None, window=60_000) as session:
        for _, prepared in replay_calls(session, c.messages, after_each_assistant(c.messages, 3),
                                        now=lambda step, n: 1000.0 + 10 * n):
            out.append(([m.text for m in prepared.messages], _summary(prepared.report),
                         prepared.report.boundary is not None))
    return out


def test_direct_walk_and_compiled_graph_agree_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _session_with_every_stage()
    handoffs: list[int | None] = []
    walk = StagedGraph.walk

    def counting(self: StagedGraph, state: Any, ctx: Any) -> Any:
        final = walk(self, state, ctx)
        handoffs.append(final.index if isinstance(final, Handoff) else None)
        return final

    monkeypatch.setattr(StagedGraph, "walk", counting)
    walked = _replay(c, None)
    monkeypatch.undo()
    # Walked directly on quiet calls, handed to the graph on others, and there past the first stage.
    assert None in handoffs and any(i is not None for i in handoffs)
    assert any(i for i in handoffs if i is not None)
    compiled = _replay(c, monkeypatch)
    assert len(walked) == len(compiled)
    for call, (a, b) in enumerate(zip(walked, compiled)):
        assert a == b, f"call {call} differs"
    fired = {s[0] for _, stages, _ in walked for s in stages if s[2] and not s[1]}
    # The replay exercised the hand-off: stages fired on some calls, none on others.
    assert {"ingest", "budget"} <= fired
    assert any(all(s[1] for s in stages) for _, stages, _ in walked)


def test_a_forced_call_is_left_to_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _session_with_every_stage(steps=4)
    with Session.open(None) as session:
        session.prepare(c.messages[:-1], now=10.0)
        calls = []
        walk = StagedGraph.walk

        def spy(self: StagedGraph, state: Any, ctx: Any) -> Any:
            final = walk(self, state, ctx)
            calls.append((ctx.forced, final))
            return final

        monkeypatch.setattr(StagedGraph, "walk", spy)
        prepared = session.compact(c.messages, now=20.0)
    assert calls == [(True, Handoff(0, []))]
    assert prepared.report.boundary is not None


def test_the_status_reserves_what_its_baseline_takes_not_its_whole_cap() -> None:
    """The reinjectors before the status get the target's room less the baseline's actual size."""
    from worksurface.core.config import Config
    from worksurface.reinjectors import status
    from worksurface.engine.state import Reinjection, Reinjector
    from worksurface.session.memstore import MemoryStore
    from worksurface.engine.reinject import report as reinject_report

    budgets: list[int] = []

    def record(view: Any, config: Any, ctx: Any, budget: int) -> Reinjection:
        budgets.append(budget)
        return Reinjection([], reinject_report("recorder", 0, 0, [], [], []))

    config = Config(window=60_000, post_compact_target_tokens=6_000)
    recorder = Reinjector("recorder", record, reads=frozenset())
    session = Session(MemoryStore(), config, reinjectors=(recorder, status.REINJECTOR))
    prepared = session.compact(_session_with_every_stage(steps=12).messages, now=10.0)
    base = next(m for m in prepared.messages if m.origin.value == "status")
    compacted = prepared.report.boundary["post_tokens"]
    assert budgets, "the recorder did not run"
    room = config.post_compact_target - compacted
    assert budgets[0] < room - session.counter.message(base)  # the baseline's room is kept for it
    assert budgets[0] > room - config.reinject.status_tokens + 300  # ... but not the whole 600 cap


def test_a_call_handed_to_the_graph_decides_each_stage_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The graph used to start again from the first stage, deciding every quiet stage before the one
    # that edits a second time.
    c = _session_with_every_stage(steps=40)
    decided: list[str] = []
    decide = StagedGraph._decide

    def noting(self: StagedGraph, index: int, state: Any, ctx: Any) -> Any:
        decided.append(self.names[index])
        return decide(self, index, state, ctx)

    monkeypatch.setattr(StagedGraph, "_decide", noting)
    handed_late = 0
    with Session.open(None, window=60_000) as session:
        for n in range(3, len(c.messages) + 1):
            if c.messages[n - 1].role != "assistant":
                continue
            decided.clear()
            report = session.prepare(c.messages[:n], now=1000.0 + 10 * n).report
            assert len(decided) == len(set(decided)), decided
            edited = [s.name for s in report.stages if s.items and not s.skipped]
            handed_late += bool(edited) and edited[0] != decided[0]
    assert handed_late  # calls where a later stage edited, the earlier ones decided once, in the walk


def test_calls_no_stage_edits_never_import_langgraph() -> None:
    """The direct walk needs no LangGraph: a process whose calls edit nothing never imports it (over
    half a second of a short command's start); the first call a stage edits compiles the graph."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from worksurface import Session\n"
        "from worksurface.core.model import Message, Text\n"
        "msgs = [Message('u1', 'user', (Text('hello'),)), Message('a1', 'assistant', (Text('hi'),))]\n"
        "with Session.open(None) as s:\n"
        "    s.prepare(msgs)\n"
        "    before = 'langgraph' in sys.modules\n"
        "    s.compact(msgs + [Message('u2', 'user', (Text('go on'),))])\n"
        "print(before, 'langgraph' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "True"]
