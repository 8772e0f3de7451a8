"""The price model, the bill of a session's calls, and the firing rule (alone and at the stages)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import Convo, words
from worksurface.core.config import Config, PricingConfig
from worksurface.core.errors import ConfigError
from worksurface.core.model import Message, Text
from worksurface.engine.pricing import (PRESETS, CallStats, SentCall, bill, common_prefix_tokens, input_cost, preset_for_model,
                                 price_model, stats_from_transcript, unsent_ids, worth_editing)
from worksurface.engine.state import Artifact, StageContext
from worksurface.stages import collapse, microcompact, snip
from worksurface.core.tokens import TokenCounter, get_encoding


class Sink:
    """An artifact sink that keeps what it is given (no session needed for a stage alone)."""

    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def put_artifact(self, content: str, *, kind: str, meta: dict[str, Any] | None = None) -> Artifact:
        artifact_id = f"a{len(self.stored)}"
        self.stored[artifact_id] = content
        return Artifact(artifact_id, None, len(content) // 4)


def msg(i: int, role: str, text: str) -> Message:
    return Message(f"m{i}", role, (Text(text),))  # type: ignore[arg-type]


# --- price model -------------------------------------------------------------------------------

def test_presets_follow_the_documented_ratios():
    a = PRESETS["anthropic"]
    assert a.cache_read == pytest.approx(a.input * 0.1) and a.cache_write == pytest.approx(a.input * 1.25)
    assert a.cache_ttl_seconds == 300
    for name in ("openai", "gemini"):
        assert PRESETS[name].cache_write == PRESETS[name].input  # automatic caching: no write premium
        assert PRESETS[name].cache_read < PRESETS[name].input
    d = PRESETS["deepseek"]
    assert 0.2 < d.cache_read / d.input < 0.3


def test_config_and_keyword_overrides_make_a_custom_model():
    cfg = Config.from_mapping({"pricing": {"preset": "openai", "cache_read_per_mtok": 0.625}}).pricing
    model = price_model(cfg)
    assert model.cache_read == 0.625 and model.input == PRESETS["openai"].input and "custom" in model.name
    model = price_model(cfg, input=2.0, cache_ttl_seconds=60)
    assert model.input == 2.0 and model.cache_ttl_seconds == 60
    assert price_model(PricingConfig()) == PRESETS["anthropic"]
    with pytest.raises(ConfigError, match="preset"):
        Config.from_mapping({"pricing": {"preset": "acme"}})
    with pytest.raises(ConfigError, match="unknown price field"):
        price_model(cfg, bogus=1.0)


# --- billing -----------------------------------------------------------------------------------

def _views(n: int, size: int = 2_000) -> list[list[Message]]:
    history: list[Message] = []
    out = []
    for i in range(n):
        history = history + [msg(i, "user" if i % 2 == 0 else "assistant", words(size, seed=i))]
        out.append(list(history))
    return out


def test_an_append_only_session_reads_its_previous_view_and_writes_only_the_new_part():
    counter = TokenCounter()
    prices = PRESETS["anthropic"]
    views = _views(4)
    billed = bill([SentCall(v, at=10.0 * k) for k, v in enumerate(views)], prices, counter)
    assert billed[0].cached == 0 and billed[0].written == billed[0].tokens
    for k in range(1, 4):
        assert billed[k].cached == counter.messages(views[k - 1])
        assert billed[k].written == billed[k].uncached == counter.message(views[k][-1])
        expected = (billed[k].cached * prices.cache_read + billed[k].written * prices.cache_write) / 1e6
        assert billed[k].cost == pytest.approx(expected)
    assert billed[-1].total == pytest.approx(sum(b.cost for b in billed))


def test_idle_past_the_ttl_rebills_the_whole_prefix():
    views = _views(3)
    billed = bill([SentCall(views[0], 0.0), SentCall(views[1], 100.0), SentCall(views[2], 100.0 + 301)],
                  PRESETS["anthropic"])
    assert billed[1].cached > 0 and not billed[1].cold
    assert billed[2].cached == 0 and billed[2].cold and billed[2].written == billed[2].tokens


def test_an_edit_in_the_middle_rebills_what_follows_it():
    counter = TokenCounter()
    views = _views(4)
    edited = list(views[3])
    edited[1] = msg(1, "assistant", "cleared")
    billed = bill([SentCall(views[2], 0.0), SentCall(edited, 1.0)], PRESETS["anthropic"], counter)
    assert billed[1].cached == counter.message(views[2][0]) + common_prefix_tokens([views[2][1]], [edited[1]], counter)
    assert billed[1].cached < counter.message(views[2][0]) + 5


_PIECES = st.sampled_from(["foo", "bar", " baz", "\n", "  ", "x=1;", "def ", "\u00fcn\u00ef", "123", "   \n", "\t"])


@settings(max_examples=200, deadline=None)
@given(shared=st.lists(_PIECES, max_size=300), a=st.lists(_PIECES, max_size=40), b=st.lists(_PIECES, max_size=40))
def test_a_differing_message_shares_the_tokens_its_whole_text_shares(shared, a, b):
    # Two views that differ inside a message: only the common start and a margin are encoded, and
    # the shared tokens are those of the two whole texts compared token by token.
    start = "".join(shared)
    left, right = start + "".join(a), start + "".join(b)
    enc = get_encoding()
    whole = 0
    for x, y in zip(enc.encode_ordinary(left), enc.encode_ordinary(right)):
        if x != y:
            break
        whole += 1
    counter = TokenCounter()
    previous = [Message("u1", "user", [Text("question")]), Message("t1", "user", [Text(left)])]
    current = [previous[0], Message("t2", "user", [Text(right)])]
    expected = counter.message(previous[0]) + (whole if left != right else 0)
    assert common_prefix_tokens(previous, current, counter) == (
        expected if left != right else counter.messages(current))


def test_short_prompts_are_never_cached():
    tiny = [[msg(0, "user", "hi")], [msg(0, "user", "hi"), msg(1, "assistant", "hello")]]
    billed = bill([SentCall(v, float(k)) for k, v in enumerate(tiny)], PRESETS["anthropic"])
    assert all(b.cached == 0 and b.written == 0 for b in billed)
    assert billed[1].cost == pytest.approx(billed[1].tokens * PRESETS["anthropic"].input / 1e6)


# --- the firing rule ---------------------------------------------------------------------------

def test_an_edit_that_loses_money_does_not_fire():
    d = worth_editing(PRESETS["anthropic"], saved_tokens=2_000, rebilled_tokens=120_000, remaining_calls=5)
    assert not d.fire and d.rebilling > d.saving


def test_an_edit_that_pays_over_the_remaining_calls_fires():
    d = worth_editing(PRESETS["anthropic"], saved_tokens=50_000, rebilled_tokens=100_000, remaining_calls=40)
    assert d.fire and d.saving > d.rebilling
    # The same edit with few calls left does not pay.
    assert not worth_editing(PRESETS["anthropic"], saved_tokens=50_000, rebilled_tokens=100_000,
                             remaining_calls=1).fire


@pytest.mark.parametrize("override", ["cold", "must_fire", "force"])
def test_a_cold_cache_the_threshold_and_force_override_the_rule(override):
    d = worth_editing(PRESETS["anthropic"], saved_tokens=2_000, rebilled_tokens=120_000, remaining_calls=5,
                      **{override: True})
    assert d.fire


def test_call_statistics_and_unsent_messages_are_read_off_the_transcript():
    c = Convo().user("go")
    c.tool("Bash", {"command": "ls"}, "a\nb")
    c.say("ok")
    c.tool("Bash", {"command": "pwd"}, "/repo")
    stats = stats_from_transcript(c.messages, TokenCounter())
    assert stats.calls == 2 and stats.tokens_per_call > 0
    # "ok" and the second call are one assistant turn (one model call): it and its result are unsent.
    assert unsent_ids(c.messages) == {m.id for m in c.messages[-3:]}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.booleans(), st.integers(0, 14), st.integers(0, 14),
                          st.sets(st.integers(0, 14), max_size=4)), min_size=1, max_size=12))
def test_span_sums_like_a_pass_over_the_messages(steps):
    """`TokenCounter.span` keeps running sums of the list it read last; on views that grow, change in
    the middle (a stage's edit), repeat an id, and exclude ids, it answers what summing the slice does."""
    pool = [Message(f"m{i}", "user" if i % 2 else "assistant", (Text(words(5 + 7 * i, seed=i)),)) for i in range(15)]
    twin = Message("m3", "user", (Text("another message with a taken id"),))
    counter, view = TokenCounter(), []
    for keep, grow, with_twin, start, stop, excluded in steps:
        view = view[:keep] + [Message(m.id, m.role, m.blocks) for m in pool[len(view[:keep]):][:grow]]
        if with_twin:
            view.append(twin)
        ids = frozenset(f"m{i}" for i in excluded)
        expected = sum(counter.message(m) for m in view[start:stop] if m.id not in ids)
        assert counter.span(view, start, stop, ids) == expected


# --- the rule at the stages --------------------------------------------------------------------

def _old_result_session(old_tokens: int, filler_tokens: int) -> Convo:
    """One old, clearable shell result, then a long stretch of conversation and a few new steps."""
    c = Convo().user("start")
    c.tool("Bash", {"command": "cat big.log"}, words(old_tokens, seed=1))
    for i in range(12):
        c.say(words(filler_tokens // 12, seed=100 + i))
        c.user(f"continue {i}")
    for i in range(6):
        c.tool("Grep", {"pattern": f"p{i}"}, words(300, seed=200 + i))
    return c


def _ctx(config: Config, transcript: list[Message], *, idle: float | None, forced: bool = False,
         calls: int = 3) -> StageContext:
    return StageContext(config=config, counter=TokenCounter(), artifacts=Sink(), now=1_000.0, idle_seconds=idle,
                        forced=forced, transcript=tuple(transcript),
                        call_stats=CallStats(calls=calls, tokens_per_call=2_000.0),
                        unsent_ids=unsent_ids(transcript))


def _state(view: list[Message], tokens: int) -> Any:
    return {"view": view, "tokens": tokens, "edits": [], "reports": [], "cache_edits": [], "compacted": False}


MC = Config.from_mapping({"microcompact": {"trigger_tokens": 20_000, "clear_at_least": 2_000,
                                           "protect_tokens": 2_000}})


def test_microcompact_does_not_fire_when_clearing_costs_more_than_it_saves():
    c = _old_result_session(old_tokens=6_000, filler_tokens=80_000)
    ctx = _ctx(MC, c.messages, idle=10.0)
    tokens = ctx.counter.messages(c.messages)
    result = microcompact.run(_state(c.messages, tokens), MC.microcompact, ctx)
    assert not result.edits and "not worth it" in (result.report.skipped or "")


def test_microcompact_fires_when_the_cache_is_cold_anyway():
    c = _old_result_session(old_tokens=6_000, filler_tokens=80_000)
    ctx = _ctx(MC, c.messages, idle=MC.microcompact.cache_ttl_seconds + 1)
    result = microcompact.run(_state(c.messages, ctx.counter.messages(c.messages)), MC.microcompact, ctx)
    assert result.edits


def test_microcompact_fires_over_the_threshold_and_when_forced():
    c = _old_result_session(old_tokens=6_000, filler_tokens=80_000)
    ctx = _ctx(MC, c.messages, idle=10.0)
    tokens = ctx.counter.messages(c.messages)
    over = microcompact.run(_state(c.messages, MC.threshold + 1), MC.microcompact, ctx)
    assert over.edits and over.report.details["firing"]["reason"].startswith("over the threshold")
    forced = microcompact.run(_state(c.messages, tokens), MC.microcompact, _ctx(MC, c.messages, idle=10.0, forced=True))
    assert forced.edits


def test_microcompact_fires_when_the_saving_pays_over_a_long_session():
    c = _old_result_session(old_tokens=30_000, filler_tokens=8_000)
    ctx = _ctx(MC, c.messages, idle=10.0, calls=60)
    result = microcompact.run(_state(c.messages, ctx.counter.messages(c.messages)), MC.microcompact, ctx)
    assert result.edits and result.report.details["firing"]["fire"]


def test_firing_rule_off_restores_the_stage_trigger_alone():
    cfg = MC.with_overrides(pricing={"firing_rule": False})
    c = _old_result_session(old_tokens=6_000, filler_tokens=80_000)
    ctx = _ctx(cfg, c.messages, idle=10.0)
    result = microcompact.run(_state(c.messages, ctx.counter.messages(c.messages)), cfg.microcompact, ctx)
    assert result.edits


def test_snip_holds_a_losing_batch_and_fires_it_on_a_cold_cache():
    c = Convo().user("fix app.py")
    for i in range(3):
        c.tool("Read", {"file_path": "/repo/app.py"}, words(3_000, seed=i))
        c.say(f"looked {i}")
    for i in range(10):
        c.say(words(6_000, seed=50 + i))
        c.user(f"more {i}")
    c.tool("Grep", {"pattern": "x"}, "app.py:1: x")
    cfg = Config()
    warm = _ctx(cfg, c.messages, idle=5.0)
    tokens = warm.counter.messages(c.messages)
    held = snip.run(_state(c.messages, tokens), cfg.snip, warm)
    assert not held.edits and "not worth it" in (held.report.skipped or "")
    cold = snip.run(_state(c.messages, tokens), cfg.snip, _ctx(cfg, c.messages, idle=cfg.microcompact.cache_ttl_seconds + 5))
    assert cold.edits


def test_collapse_holds_a_fold_that_does_not_pay_until_the_threshold():
    c = Convo().user("explore")
    for i in range(14):
        c.tool("Read", {"file_path": f"/repo/f{i}.py"}, words(1_500, seed=i))
    for i in range(8):
        c.say(words(8_000, seed=70 + i))
        c.user(f"go on {i}")
    c.tool("Grep", {"pattern": "y"}, "f1.py:2: y")
    cfg = Config.from_mapping({"collapse": {"trigger_fraction": 0.3, "keep_recent_steps": 2}})
    ctx = _ctx(cfg, c.messages, idle=5.0)
    tokens = ctx.counter.messages(c.messages)
    assert tokens > cfg.collapse_trigger
    held = collapse.run(_state(c.messages, tokens), cfg.collapse, ctx)
    assert not held.edits and "not worth it" in (held.report.skipped or "")
    forced = collapse.run(_state(c.messages, cfg.threshold + 1), cfg.collapse, ctx)
    assert forced.edits


def test_input_cost_prices_totals_by_the_model_provider():
    cost = input_cost(input_tokens=1_000_000, cached_tokens=900_000, model="claude-sonnet-4-5")
    assert cost == pytest.approx((900_000 * 0.30 + 100_000 * 3.75) / 1e6)
    assert preset_for_model("gpt-5-codex") is PRESETS["openai"]
    assert preset_for_model("models/gemini-2.5-pro") is PRESETS["gemini"]
    assert preset_for_model("deepseek-chat") is PRESETS["deepseek"]
    assert preset_for_model(None) is PRESETS["anthropic"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["extend", "edit", "rewind", "again"]), st.integers(0, 400)),
                min_size=1, max_size=14))
def test_the_cache_bills_the_longest_prefix_any_cached_view_shares(steps: list[tuple[str, int]]) -> None:
    """However views extend, edit, rewind or repeat one another, and entries expire, each call is billed
    the longest prefix it shares with a view still in cache: what comparing every cached view gives
    (the cache checks one and lets it vouch for those it extends)."""
    from worksurface.engine.pricing import MAX_CACHE_ENTRIES, PRESETS

    counter = TokenCounter()
    prices = PRESETS["anthropic"]
    pool = [Message(f"p{i}", "user" if i % 2 else "assistant", (Text(words(120, seed=i)),)) for i in range(60)]
    view: list[Message] = pool[:6]
    calls, at, fresh = [], 0.0, 0
    for kind, gap in steps:
        if kind == "extend":
            view = view + pool[len(view) % 60: len(view) % 60 + 3]
        elif kind == "edit" and len(view) > 2:
            fresh += 1
            view = view[:1] + [Message(f"e{fresh}", "user", (Text(words(100, seed=900 + fresh)),))] + view[2:]
        elif kind == "rewind":
            view = view[:max(1, len(view) // 2)]
        at += gap * 2.0  # gaps up to 800 s: some calls find the cache expired
        calls.append(SentCall(list(view), at))
    billed = bill(calls, prices, counter)
    cached_views: list[tuple[list[Message], float]] = []
    for call, got in zip(calls, billed):
        live = [(v, used) for v, used in cached_views if call.at - used <= prices.cache_ttl_seconds]
        best, hit = 0, None
        for n, (v, _) in enumerate(live):
            common = common_prefix_tokens(v, call.messages, counter)
            if common > best:
                best, hit = common, n
        if best < prices.min_cache_tokens:
            best, hit = 0, None
        assert got.cached == best
        if hit is not None:
            live[hit] = (live[hit][0], call.at)
        cached_views = (live + [(list(call.messages), call.at)])[-MAX_CACHE_ENTRIES:]
