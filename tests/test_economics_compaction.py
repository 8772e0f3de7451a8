"""Economic compaction: below the threshold, autocompact compacts only when the firing rule says it
pays (what it removes, read on every expected remaining call, against re-billing what stays)."""

from __future__ import annotations

from typing import Any

from builders import Convo, words
from worksurface import Session

# Threshold 83,500, economic floor 41,750, post-compact target 20,000.
WINDOW = 100_000


def _stage(prepared: Any, name: str) -> Any:
    return next(s for s in prepared.report.stages if s.name == name)


def _replay(steps: int, gap: float = 10.0, **config: Any) -> list[Any]:
    """A session whose view grows by prose the other stages cannot clear (about 1,500 tokens a call)."""
    c = Convo().user("Write the migration guide, section by section.")
    out = []
    with Session.open(None, window=WINDOW, **config) as session:
        for i in range(steps):
            c.say(words(1_100, seed=i))
            c.user(f"next section {i}")
            out.append(session.prepare(c.messages, now=1_000.0 + gap * i))
    return out


def test_a_growing_session_compacts_before_the_threshold_when_it_pays() -> None:
    calls = _replay(70)
    boundaries = [p.report.boundary for p in calls if p.report.boundary]
    assert boundaries, "no compaction"
    first = boundaries[0]
    assert first["reason"] == "economic" and first["pre_tokens"] < 83_500
    assert all(p.report.tokens_after < 83_500 for p in calls)
    # Between the floor and the compaction, the rule said why it waited.
    waited = [_stage(p, "autocompact").skipped or "" for p in calls if not p.report.boundary]
    assert any("not worth it" in w for w in waited)


def test_compaction_only_at_the_threshold_when_asked() -> None:
    calls = _replay(70, autocompact={"economic_from": 1.0})
    boundaries = [p.report.boundary for p in calls if p.report.boundary]
    assert boundaries and all(b["reason"] == "threshold" and b["pre_tokens"] > 83_500 for b in boundaries)


def test_with_the_firing_rule_off_nothing_compacts_early() -> None:
    calls = _replay(70, pricing={"firing_rule": False})
    assert all(b["reason"] == "threshold" for p in calls if (b := p.report.boundary))


def test_a_young_session_does_not_compact_early() -> None:
    """Past the floor on its third call: too few calls so far to expect the saving to come back."""
    c = Convo().user("Summarize these notes.")
    for i in range(3):
        c.say(words(16_000, seed=i))
        c.user(f"more {i}")
    with Session.open(None, window=WINDOW) as session:
        session.prepare(c.messages[:3], now=1_000.0)
        session.prepare(c.messages[:5], now=1_010.0)
        last = session.prepare(c.messages, now=1_020.0)
    assert last.report.boundary is None and last.report.tokens_after > 41_750
    assert "not worth it" in (_stage(last, "autocompact").skipped or "")


def test_an_idle_pause_alone_does_not_compact_early() -> None:
    """Past the TTL the cache is cold, but a compaction costs detail, not only money."""
    warm = _replay(40, gap=10.0)
    cold = _replay(40, gap=3_600.0)
    first_warm = next((i for i, p in enumerate(warm) if p.report.boundary), None)
    first_cold = next((i for i, p in enumerate(cold) if p.report.boundary), None)
    assert first_warm == first_cold
