"""Batched edits of the sent prefix: the economic batch size, where re-billing stops, and the sawtooth
a session follows when microcompact clears in batches the firing rule pays for."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from builders import Convo, words
from worksurface import Session
from worksurface.core.config import Config
from worksurface.core.model import Message, Text
from worksurface.engine.pricing import (PRESETS, CallStats, PromptCache, economic_batch_tokens, rebilled_tokens, unsent_ids,
                                 worth_editing)
from worksurface.engine.state import Artifact, StageContext
from worksurface.stages import microcompact
from worksurface.core.tokens import TokenCounter

ANTHROPIC = PRESETS["anthropic"]


# --- the economic batch ------------------------------------------------------------------------

def test_the_economic_batch_balances_one_rebilling_against_reading_the_waiting_tokens():
    batch = economic_batch_tokens(ANTHROPIC, setup_tokens=10_000, growth_per_call=1_000)
    extra = ANTHROPIC.cache_write - ANTHROPIC.cache_read
    assert batch == pytest.approx(math.sqrt(2 * extra * 10_000 * 1_000 / ANTHROPIC.cache_read))
    # At that batch the two costs per call are equal: the re-billing spread over the calls it took to
    # gather the batch, and the mean waiting tokens read on each of them.
    calls = batch / 1_000
    assert 10_000 * extra / calls == pytest.approx(ANTHROPIC.cache_read * batch / 2)
    # A longer tail to re-bill or faster growth both call for larger, rarer batches.
    assert economic_batch_tokens(ANTHROPIC, setup_tokens=40_000, growth_per_call=1_000) == pytest.approx(2 * batch)
    assert economic_batch_tokens(ANTHROPIC, setup_tokens=10_000, growth_per_call=4_000) == pytest.approx(2 * batch)


def test_nothing_to_rebill_needs_no_batch_and_free_reads_never_pay_for_an_edit():
    assert economic_batch_tokens(ANTHROPIC, setup_tokens=0, growth_per_call=1_000) == 0.0
    free_reads = dataclasses.replace(ANTHROPIC, cache_read=0.0)
    assert economic_batch_tokens(free_reads, setup_tokens=10_000, growth_per_call=1_000) == math.inf


# --- the firing rule with a batch --------------------------------------------------------------

def test_an_edit_that_pays_waits_until_it_reaches_the_batch():
    kwargs: dict[str, Any] = {"rebilled_tokens": 30_000, "remaining_calls": 100, "batch_tokens": 12_000}
    small = worth_editing(ANTHROPIC, saved_tokens=5_000, **kwargs)
    assert not small.fire and small.reason.startswith("waiting for a batch")
    assert small.saving > small.rebilling  # it would pay: the batch, not the price, holds it
    assert worth_editing(ANTHROPIC, saved_tokens=13_000, **kwargs).fire


def test_an_edit_that_loses_money_does_not_fire_even_at_batch_size():
    d = worth_editing(ANTHROPIC, saved_tokens=20_000, rebilled_tokens=400_000, remaining_calls=2,
                      batch_tokens=10_000)
    assert not d.fire and d.reason.startswith("would re-bill")


@pytest.mark.parametrize("override", ["cold", "must_fire", "force"])
def test_a_cold_cache_the_threshold_and_force_fire_below_the_batch(override):
    d = worth_editing(ANTHROPIC, saved_tokens=1_000, rebilled_tokens=30_000, remaining_calls=100,
                      batch_tokens=50_000, **{override: True})
    assert d.fire


# --- where re-billing stops --------------------------------------------------------------------

def _view(n: int) -> list[Message]:
    return [Message(f"m{i}", "user" if i % 2 == 0 else "assistant", (Text(words(500, seed=i)),)) for i in range(n)]


def test_an_edit_after_an_earlier_break_on_the_same_call_rebills_nothing():
    view, counter = _view(10), TokenCounter()
    assert rebilled_tokens(view, 6, counter, frozenset(), broken_from=3) == 0
    assert rebilled_tokens(view, 6, counter, frozenset(), broken_from=6) == 0


def test_an_edit_before_an_earlier_break_rebills_only_up_to_it():
    view, counter = _view(10), TokenCounter()
    assert rebilled_tokens(view, 2, counter, frozenset(), broken_from=5) == counter.messages(view[2:5])
    assert rebilled_tokens(view, 2, counter, frozenset()) == counter.messages(view[2:])


# --- microcompact in a session: a sawtooth, not a clear on every call ---------------------------

def _reading_session(steps: int) -> Convo:
    c = Convo().user("port the module, file by file")
    for i in range(steps):
        c.tool("Read", {"file_path": f"/repo/src/m{i}.py"}, words(1_200, seed=i))
        c.say(f"m{i} read; next")
    return c


def _replay(config: Config, steps: int) -> tuple[list[int], float, int]:
    """Call after each step, 20 s apart (a warm cache): microcompact's cleared counts per call, the
    session's billed cost and the number of calls."""
    full = _reading_session(steps).messages
    cache = PromptCache(ANTHROPIC)
    cleared: list[int] = []
    calls = 0
    with Session.open(None, config=config) as session:
        for n in range(3, len(full) + 1):
            if full[n - 1].role != "user":
                continue  # a model call follows each user turn or tool result
            prepared = session.prepare(full[:n], now=1_000.0 + 20 * n)
            mc = next(s for s in prepared.report.stages if s.name == "microcompact")
            cleared.append(mc.items)
            cache.send(prepared.messages, 1_000.0 + 20 * n)
            calls += 1
    return cleared, cache.total, calls


def test_microcompact_clears_in_batches_and_batching_costs_less_than_clearing_whenever_it_pays():
    # A trigger far under the view so that the firing rule, not the trigger, decides when to clear.
    config = Config().with_overrides(microcompact={"trigger_tokens": 4_000})
    steps = 70
    batched, batched_cost, calls = _replay(config, steps)
    fires = [n for n in batched if n]
    assert len(fires) >= 3  # the view is kept small...
    assert len(fires) <= calls // 5  # ...by a few batches, not a clear on every call
    assert min(fires) >= 5  # each batch clears several results at once
    eager, eager_cost, _ = _replay(config.with_overrides(pricing={"batching": False}), steps)
    assert sum(1 for n in eager if n) > 3 * len(fires)  # without batching: a little on most calls
    assert batched_cost < 0.8 * eager_cost


# --- a compacting call keeps autocompact's verbatim tail whole ----------------------------------

class _Sink:
    def put_artifact(self, content: str, *, kind: str, meta: dict[str, Any] | None = None) -> Artifact:
        return Artifact(f"a{abs(hash(content)) % 10_000}", None, len(content) // 4)


def test_a_forced_call_does_not_clear_results_inside_the_tail_autocompact_keeps():
    c = _reading_session(40)
    config = Config()
    counter = TokenCounter()
    view = c.messages
    tokens = counter.messages(view)
    ctx = StageContext(config=config, counter=counter, artifacts=_Sink(), now=1_000.0, idle_seconds=10.0,
                       forced=True, transcript=tuple(view), call_stats=CallStats(40, 1_300.0),
                       unsent_ids=unsent_ids(view))
    state: Any = {"view": view, "tokens": tokens, "edits": [], "reports": [], "cache_edits": [], "compacted": False}
    result = microcompact.run(state, config.microcompact, ctx)
    cleared = {e.call_id for e in result.edits}  # type: ignore[attr-defined]
    assert cleared
    tail, seen = set(), 0
    for m in reversed(view):
        seen += counter.message(m)
        if seen > config.autocompact.keep_tail_tokens:
            break
        tail.update(r.call_id for r in m.tool_results)
    assert len(tail) > config.microcompact.keep_recent  # the tail is larger than what keep_recent keeps
    assert not cleared & tail


def _parallel_reads(c: Convo, first: int, n: int) -> None:
    """One assistant turn with `n` parallel reads, answered by one message with all the results."""
    from worksurface.core.model import ToolCall, ToolResult
    calls = [ToolCall(f"call-{first + k}", "Read", {"file_path": f"/repo/p{first + k}.py"}) for k in range(n)]
    c.messages.append(Message(f"pa{first}", "assistant", tuple(calls)))
    c.messages.append(Message(f"pr{first}", "user",
                              tuple(ToolResult(f"call-{first + k}", words(1_500, seed=first + k)) for k in range(n))))


def test_results_kept_beside_a_cleared_one_in_the_same_message_are_cleared_by_a_later_batch():
    c = Convo().user("read them all")
    _parallel_reads(c, 0, 4)
    c.say("read")
    c.user("go on")  # the results are no longer the newest turn, which stages leave alone
    config = Config().with_overrides(microcompact={"trigger_tokens": 1_000, "protect_tokens": 0,
                                                   "keep_recent": 2, "clear_at_least": 0})
    with Session.open(None, config=config) as session:
        first = session.prepare(c.messages, now=1_000.0)  # first call: cold, clears all but the newest 2
        assert next(s for s in first.report.stages if s.name == "microcompact").items == 2
        c.say("more")
        _parallel_reads(c, 10, 4)
        c.say("done")
        c.user("and now?")
        later = session.prepare(c.messages, now=1_000.0 + 3_600)  # idle past the TTL: clear what is left
        cleared = set(next(s for s in later.report.stages if s.name == "microcompact").details["cleared"])
    assert {"call-2", "call-3"} <= cleared  # the two kept beside call-0 and call-1 in the first message
