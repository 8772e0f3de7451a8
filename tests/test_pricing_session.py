"""The firing rule and ingestion inside a real Session: what the stages decide over successive calls."""

from __future__ import annotations

import pytest

from builders import Convo, words
from worksurface import Session
from worksurface.graph.registry import STAGE_NAMES

# Microcompact fires early on these sessions (a 20k trigger) so the rule, not the trigger, decides.
SMALL_MC = {"microcompact": {"trigger_tokens": 20_000, "clear_at_least": 2_000, "protect_tokens": 2_000}}


def _stage(prepared, name: str):
    return next(s for s in prepared.report.stages if s.name == name)


def _long_chat_after_one_big_result() -> Convo:
    c = Convo().user("start")
    c.tool("Bash", {"command": "cat big.log"}, words(6_000, seed=1))
    for i in range(12):
        c.say(words(7_000, seed=100 + i))
        c.user(f"continue {i}")
    return c


def test_a_warm_cache_holds_a_losing_clear_and_an_idle_gap_releases_it():
    c = _long_chat_after_one_big_result()
    with Session.open(None, **SMALL_MC) as session:
        session.prepare(c.messages, now=1_000.0)  # the first call: nothing cached yet
        for i in range(6):
            c.tool("Grep", {"pattern": f"p{i}"}, words(300, seed=200 + i))
        warm = session.prepare(c.messages, now=1_010.0)
        mc = _stage(warm, "microcompact")
        assert mc.items == 0 and (mc.skipped or "").startswith("not worth it")
        c.say("back after lunch")
        c.tool("Grep", {"pattern": "q"}, "x.py:1: q")
        cold = session.prepare(c.messages, now=1_010.0 + 3_600)
        assert _stage(cold, "microcompact").items >= 1


def test_turning_the_rule_off_restores_the_trigger_alone():
    c = _long_chat_after_one_big_result()
    with Session.open(None, pricing={"firing_rule": False}, **SMALL_MC) as session:
        session.prepare(c.messages, now=1_000.0)
        for i in range(6):
            c.tool("Grep", {"pattern": f"p{i}"}, words(300, seed=200 + i))
        assert _stage(session.prepare(c.messages, now=1_010.0), "microcompact").items >= 1


@pytest.mark.skipif("ingest" not in STAGE_NAMES, reason="the ingest stage is not wired into the graph yet")
def test_ingest_reduces_a_result_on_arrival_and_the_decision_sticks(tmp_path):
    log = "\n".join([f"[{i:05d}] step ok" for i in range(1_000)] + ["ERROR: step 1000 failed: disk full"]
                    + [f"[{i:05d}] step ok" for i in range(1_001, 2_000)])
    c = Convo().user("run it")
    call = c.tool("Bash", {"command": "make all"}, log)
    with Session.open(tmp_path / "s") as session:
        first = session.prepare(c.messages, now=0.0).messages
        shown = next(r for m in first for r in m.tool_results if r.call_id == call).content
        assert "ERROR: step 1000 failed: disk full" in shown and len(shown) < len(log) / 3
        artifact = shown.split("stored as artifact ")[1].split(" ")[0]
        assert session.artifact(artifact) == log
        c.say("it failed; looking")
        second = session.prepare(c.messages, now=5.0).messages
        assert second[: len(first)] == first  # sent once reduced, never changed again
