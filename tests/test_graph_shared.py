"""Sessions with the same parts share one composed graph, compiled once per process (a gateway opens a
session per request; compiling LangGraph's graph costs milliseconds each time), and sharing it across
threads and configurations decides exactly as separate graphs would."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from builders import Convo, words
from worksurface import Session
from worksurface.core.model import message_text
from worksurface.graph.compose import StagedGraph


def _long_session(seed: int) -> Convo:
    c = Convo()
    c.user(f"fix the parser, take {seed}")
    for i in range(12):
        c.tool("Read", {"file_path": f"/repo/p{seed}_{i}.py"}, words(900, seed=seed * 100 + i))
    c.say("Read them all.")
    c.user("now summarise what you found")
    return c


def _view(target: int, seed: int) -> list[str]:
    with Session.open(None, post_compact_target_tokens=target) as session:
        prepared = session.compact(_long_session(seed).messages, now=1.0)
    return [message_text(m) for m in prepared.messages]


def test_two_sessions_share_one_graph_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[StagedGraph] = []
    original = StagedGraph._compile

    def counting(self: StagedGraph) -> object:
        compiled.append(self)
        return original(self)

    monkeypatch.setattr(StagedGraph, "_compile", counting)
    with Session.open(None) as first, Session.open(None, snip={"min_gain_tokens": 1}) as second:
        assert first._graph is second._graph  # same parts, whatever their settings
        first.compact(_long_session(1).messages, now=1.0)
        second.compact(_long_session(2).messages, now=1.0)
    assert len(compiled) <= 1  # compiled at most once in this process (maybe by an earlier test)


def test_a_shared_graph_decides_per_config_on_parallel_threads() -> None:
    jobs = [(target, seed) for seed in (1, 2) for target in (3_000, 6_000, 12_000)] * 2
    alone = {job: _view(*job) for job in set(jobs)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda job: (job, _view(*job)), jobs))
    for job, view in together:
        assert view == alone[job], job
    assert len({tuple(alone[(t, 1)]) for t in (3_000, 6_000, 12_000)}) == 3  # the configs really differ
