"""Cache economics: what a provider bills for each call of a session, and whether an edit pays.

Prices are USD per million tokens (not multiples of the input price), so a preset reads like the
provider's price page and a custom model is the four numbers from it. A call's view is billed in three
parts: the longest prefix still in the provider's cache (cache read price), the rest written to the
cache (cache write price; equal to the input price where caching is automatic), and, for views too
short to cache, plain input.

The firing rule (`worth_editing`): an edit of an already-sent part of the view re-bills every cached
token after the edit point once (written instead of read); it pays only when the tokens it removes,
over the calls still expected, save more than that. Paying is not enough: an edit that pays now pays
more later, once more tokens can be removed for the same re-billing, so edits are batched to the
economic batch size (`economic_batch_tokens`, the economic-order-quantity trade-off between re-billing
the tail once per batch and reading the removable tokens on every call until the batch). A view over
the threshold, a cold cache (idle past the TTL: the whole prefix is re-billed anyway) and an explicit
`force` fire regardless.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..core.config import PRICE_PRESETS, PricingConfig
from ..core.edits import Edit, ReplaceMessages, ReplaceResult
from ..core.errors import ConfigError
from ..core.cached import cached
from ..core.model import Message, begins_with, message_text
from ..core.tokens import TokenCounter, get_encoding

if TYPE_CHECKING:  # state.py imports this module for CallStats
    from .state import PipelineState, StageContext

PER_MILLION = 1_000_000
# How many earlier views a provider's cache is modeled to hold at once. Providers keep several
# prefixes; past the last few an agent session never comes back to an older one.
MAX_CACHE_ENTRIES = 4


@dataclass(frozen=True)
class PriceModel:
    """A provider's prices in USD per million tokens, its cache TTL and its minimum cacheable prompt."""

    name: str
    input: float
    cache_read: float
    cache_write: float
    cache_ttl_seconds: float
    output: float | None = None
    min_cache_tokens: int = 0

    def cost(self, *, cached: int, written: int, uncached: int, output: int = 0) -> float:
        """USD for one call: `uncached` includes `written` (tokens stored in the cache on the way)."""
        plain = max(0, uncached - written)
        usd = cached * self.cache_read + written * self.cache_write + plain * self.input
        if output and self.output is not None:
            usd += output * self.output
        return usd / PER_MILLION

    def to_json(self) -> dict[str, Any]:
        return dict(self._json)

    @cached
    def _json(self) -> dict[str, Any]:
        """Worked out once (frozen): a session stores it with the billing state on every call."""
        return dataclasses.asdict(self)


# Each preset is one representative model from the provider's price page (2025-2026). Pick another
# model's prices with the CLI flags or the [pricing] config fields.
PRESETS: dict[str, PriceModel] = {
    # Claude Sonnet 4.x: cache reads 0.1x input, 5-minute cache writes 1.25x, 1,024-token minimum.
    "anthropic": PriceModel("anthropic", input=3.00, cache_read=0.30, cache_write=3.75,
                            cache_ttl_seconds=300.0, output=15.00, min_cache_tokens=1024),
    # GPT-5: automatic caching, cached input at 90% off (older models: 50-75%), no write premium;
    # prefixes stay cached for 5-10 minutes of inactivity; 1,024-token minimum.
    "openai": PriceModel("openai", input=1.25, cache_read=0.125, cache_write=1.25,
                         cache_ttl_seconds=300.0, output=10.00, min_cache_tokens=1024),
    # Gemini 2.5 Pro (prompts up to 200k): implicit caching at 90% off, no write charge for implicit
    # caches; the TTL is not documented, a few minutes is assumed; 2,048-token minimum.
    "gemini": PriceModel("gemini", input=1.25, cache_read=0.125, cache_write=1.25,
                         cache_ttl_seconds=300.0, output=10.00, min_cache_tokens=2048),
    # deepseek-chat: disk cache on by default, a hit costs about a quarter of a miss ($0.07 / $0.27);
    # entries live hours, an hour is assumed; 64-token storage unit.
    "deepseek": PriceModel("deepseek", input=0.27, cache_read=0.07, cache_write=0.27,
                           cache_ttl_seconds=3600.0, output=1.10, min_cache_tokens=64),
}
assert set(PRESETS) == set(PRICE_PRESETS), "config.PRICE_PRESETS and pricing.PRESETS must agree"


def price_model(config: PricingConfig | None = None, **overrides: float | int | str | None) -> PriceModel:
    """The preset named by `config` with its single-value overrides, then keyword overrides
    (`preset`, `input`, `cache_read`, `cache_write`, `output`, `cache_ttl_seconds`, `min_cache_tokens`;
    None leaves a value alone)."""
    config = config or PricingConfig()
    name = str(overrides.pop("preset", None) or config.preset)
    if name not in PRESETS:
        raise ConfigError(f"unknown price preset {name!r} (known: {', '.join(PRESETS)})")
    fields = {"input": config.input_per_mtok, "cache_read": config.cache_read_per_mtok,
              "cache_write": config.cache_write_per_mtok, "output": config.output_per_mtok,
              "cache_ttl_seconds": config.cache_ttl_seconds, "min_cache_tokens": config.min_cache_tokens}
    for key, value in overrides.items():
        if key not in fields:
            raise ConfigError(f"unknown price field {key!r} (known: {', '.join(fields)})")
        if value is not None:
            if isinstance(value, str) or (not isinstance(value, bool) and float(value) < 0):
                raise ConfigError(f"price field {key}: must be a number >= 0, not {value!r}")
            fields[key] = value
    chosen = {k: v for k, v in fields.items() if v is not None}
    base = PRESETS[name]
    custom = any(k in chosen and chosen[k] != getattr(base, k) for k in chosen)
    model = dataclasses.replace(base, **chosen)  # type: ignore[arg-type]
    return dataclasses.replace(model, name=f"{name} (custom)") if custom else model


# --- what a provider's cache serves ----------------------------------------------------------------

def same_content(a: Message, b: Message) -> bool:
    """Providers cache by content, not by worksurface's ids: equal role and blocks match."""
    return a is b or (a.role == b.role and a.blocks == b.blocks)


def common_prefix_tokens(previous: Sequence[Message], current: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens at the start of `current` equal to the start of `previous`. Whole equal messages count
    in full; at the first differing message the match continues token by token into its text (a
    provider caches at token granularity within a message too)."""
    return _common_prefix(previous, current, counter)[0]


def _common_prefix(previous: Sequence[Message], current: Sequence[Message], counter: TokenCounter,
                   previous_tokens: int | None = None) -> tuple[int, bool]:
    """`common_prefix_tokens`, and whether the match ended at a message that differs (rather than at
    the end of either list): a later view that extends `current` then shares exactly as much.
    `previous_tokens`: the tokens of all of `previous`, when known (the shared run of the very same
    objects is then counted from whichever of its two sides is shorter)."""
    # The leading run of the very same objects is found at C speed; the comparison by content goes on
    # from where it ends, as it would have from the start.
    same = list(map(operator.is_, previous, current))
    try:
        start = same.index(False)
    except ValueError:
        start = len(same)
    if previous_tokens is not None and start > len(previous) // 2:
        total = previous_tokens - counter.messages(previous[start:])
    else:
        total = counter.messages(previous[:start])
    for a, b in zip(previous[start:], current[start:]):
        if same_content(a, b):
            total += counter.message(b)
            continue
        if a.role == b.role:
            total += _common_token_prefix(message_text(a), message_text(b))
        return total, True
    return total, False


# How far past the first differing character the texts are encoded to find their last shared token.
_TOKEN_MATCH_MARGIN_CHARS = 256


def _common_token_prefix(a: str, b: str) -> int:
    """Tokens two texts share at their start. Only their common characters and a margin past them
    are encoded: a token ends within a few characters of the first difference (a pre-token longer
    than the margin, such as a long base64 run, may count a few tokens short)."""
    enc = get_encoding()
    shared = _common_char_prefix(a, b)
    if shared == len(a) == len(b):
        return len(enc.encode_ordinary(a))
    end = shared + _TOKEN_MATCH_MARGIN_CHARS
    n = 0
    for x, y in zip(enc.encode_ordinary(a[:end]), enc.encode_ordinary(b[:end])):
        if x != y:
            break
        n += 1
    return n


def _common_char_prefix(a: str, b: str) -> int:
    """Length of the longest common start of two strings (slice comparisons run in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True)
class SentCall:
    """One model call as sent: its view, when (epoch seconds; None: right after the previous call),
    and its output tokens when known."""

    messages: Sequence[Message]
    at: float | None = None
    output_tokens: int = 0


@dataclass(frozen=True)
class BilledCall:
    """One call's bill: tokens served from the cache, written to it, not served (written included),
    the call's cost and the running total (USD)."""

    call: int
    tokens: int
    cached: int
    written: int
    uncached: int
    cold: bool
    cost: float
    total: float

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["cost"], d["total"] = round(self.cost, 6), round(self.total, 6)
        return d


@dataclass
class _Entry:
    view: Sequence[Message]
    last_used: float | None
    tokens: int = 0
    # (a view this entry was compared with, the tokens they share) when the match ended at a differing
    # message: every later view that extends it shares as much, so it is not compared again.
    compared: tuple[list[Message], int] | None = None
    # The cached entry whose view this one's began with when it was sent (None: none, or it left the
    # cache): a view that begins with this one's begins with that one's too, unchecked.
    base: "_Entry | None" = None
    # The list the caller sent (`view` is a copy of it): a caller that says a later view begins with
    # that list (`PromptCache.send`'s `extends`) is taken at its word for this entry.
    sent: object = None

    def common_tokens(self, view: Sequence[Message], counter: TokenCounter, extends: bool | None = None) -> int:
        """Tokens at the start of `view` equal to this entry's view (`extends`: whether `view` begins
        with it, when the caller knows)."""
        if extends if extends is not None else begins_with(view, self.view):
            return self.tokens  # the same messages, extended: C-speed check, no recount
        known = self.compared
        if known is not None and begins_with(view, known[0]):
            return known[1]
        common, settled = _common_prefix(self.view, view, counter, self.tokens)
        self.compared = (list(view), common) if settled else None
        return common


@dataclass
class PromptCache:
    """A provider's prompt cache over a session, fed one sent view at a time (`send`). It holds the
    last few views sent; an entry unused for longer than the TTL is gone, and using one refreshes it
    (as Anthropic's and OpenAI's caches do)."""

    prices: PriceModel
    counter: TokenCounter = field(default_factory=TokenCounter)
    calls: int = 0
    total: float = 0.0
    _entries: list[_Entry] = field(default_factory=list)
    _last_at: float | None = None

    def send(self, view: Sequence[Message], at: float | None = None, output_tokens: int = 0,
             tokens: int | None = None, extends: Sequence[Message] | None = None) -> BilledCall:
        """Bill one call. `tokens`: the view's size when the caller knows it (a session keeps a
        running total), so a call that only appended messages costs no pass over the whole view.
        `extends`: a list sent before, unchanged since, that the caller knows `view` begins with (its
        entry is then not compared again)."""
        at = self._last_at if at is None else at
        live = [e for e in self._entries if not self._expired(e, at)]
        cold = bool(self._entries) and not live
        tokens = self.counter.messages(view) if tokens is None else tokens
        # Newest first, so that a view extending a newer entry vouches for the entries it extends
        # (one identity check per call instead of one per cached view).
        commons: dict[int, int] = {}
        vouched: set[int] = set()
        extended: _Entry | None = None
        for entry in reversed(live):
            grows = (id(entry) in vouched or (extends is not None and entry.sent is extends)
                     or begins_with(view, entry.view))
            commons[id(entry)] = entry.common_tokens(view, self.counter, grows)
            if grows:
                extended = extended or entry
                base = entry.base
                while base is not None:
                    vouched.add(id(base))
                    base = base.base
        cached, hit = 0, None
        for entry in live:
            common = commons[id(entry)]
            if common > cached:
                cached, hit = common, entry
        if cached < self.prices.min_cache_tokens:
            cached, hit = 0, None
        uncached = tokens - cached
        written = uncached if tokens >= self.prices.min_cache_tokens else 0
        cost = self.prices.cost(cached=cached, written=written, uncached=uncached, output=output_tokens)
        self.total += cost
        if hit is not None:
            hit.last_used = at
        entries = (live + [_Entry(list(view), at, tokens, base=extended, sent=view)])[-MAX_CACHE_ENTRIES:]
        kept = {id(e) for e in entries}
        for e in entries:  # an entry that left the cache vouches for nothing (and is freed)
            if e.base is not None and id(e.base) not in kept:
                e.base = None
        self._entries = entries
        self._last_at = at
        billed = BilledCall(self.calls, tokens, cached, written, uncached, cold, cost, self.total)
        self.calls += 1
        return billed

    def state_json(self) -> dict[str, Any]:
        """What a session stores to go on billing after a reopen: the calls, the running total, and
        when the cache was last used (the views themselves are the session's own to rebuild)."""
        last = self._entries[-1].last_used if self._entries else None
        return {"prices": self.prices.to_json(), "calls": self.calls, "total": self.total, "last_at": self._last_at,
                "last_used": last}

    def restore(self, data: dict[str, Any] | None, last_view: Sequence[Message] | None) -> None:
        """Continue from `state_json()` with the last view sent in cache (older cached views are not
        kept across a reopen: a slight over-estimate of the next call's cost at most)."""
        if not data or data.get("prices") != self.prices.to_json():
            return
        self.calls, self.total, self._last_at = int(data["calls"]), float(data["total"]), data.get("last_at")
        if last_view:
            self._entries = [_Entry(list(last_view), data.get("last_used"), self.counter.messages(last_view),
                                    sent=last_view)]

    def _expired(self, entry: _Entry, at: float | None) -> bool:
        if at is None or entry.last_used is None:
            return False
        return at - entry.last_used > self.prices.cache_ttl_seconds


def bill(calls: Iterable[SentCall], prices: PriceModel, counter: TokenCounter | None = None) -> list[BilledCall]:
    """Price a session's calls in order: per call, tokens served from the cached prefix (the longest
    common prefix with a view still in cache given the TTL), written, uncached, cost and running total."""
    cache = PromptCache(prices, counter if counter is not None else TokenCounter())
    return [cache.send(c.messages, c.at, c.output_tokens) for c in calls]


def summarize_bill(billed: Sequence[BilledCall]) -> dict[str, Any]:
    """Totals over a session's bill (tokens and USD)."""
    tokens = sum(b.tokens for b in billed)
    cached = sum(b.cached for b in billed)
    return {"calls": len(billed), "tokens": tokens, "cached": cached,
            "written": sum(b.written for b in billed), "uncached": sum(b.uncached for b in billed),
            "cold_calls": sum(b.cold for b in billed), "cached_share": round(cached / tokens, 4) if tokens else 0.0,
            "cost": round(billed[-1].total if billed else 0.0, 6)}


def preset_for_model(model: str | None) -> PriceModel:
    """The preset of the provider a model name belongs to (Anthropic when unknown)."""
    name = (model or "").lower()
    for key, marks in (("openai", ("gpt", "o1", "o3", "o4", "codex")), ("gemini", ("gemini",)),
                       ("deepseek", ("deepseek",))):
        if any(name.startswith(m) or f"/{m}" in name for m in marks):
            return PRESETS[key]
    return PRESETS["anthropic"]


def input_cost(*, input_tokens: int, cached_tokens: int, model: str | None = None,
               prices: PriceModel | None = None) -> float:
    """USD for a session's input given only its totals: cached tokens read, the rest written (the
    cache model of `PromptCache`, without per-call detail). `prices` default: by `model`'s provider."""
    prices = prices or preset_for_model(model)
    uncached = max(0, input_tokens - cached_tokens)
    return prices.cost(cached=cached_tokens, written=uncached, uncached=uncached)


# --- the firing rule -------------------------------------------------------------------------------

@dataclass(frozen=True)
class CallStats:
    """The session so far, as the firing rule estimates the future from it: model calls made before
    this one and the mean tokens the transcript grew per call."""

    calls: int
    tokens_per_call: float


@dataclass(frozen=True)
class EditDecision:
    """The firing rule's verdict with its figures (USD), for the stage's report."""

    fire: bool
    reason: str
    saving: float = 0.0
    rebilling: float = 0.0
    remaining_calls: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"fire": self.fire, "reason": self.reason, "saving": round(self.saving, 6),
                "rebilling": round(self.rebilling, 6), "remaining_calls": round(self.remaining_calls, 1)}


def worth_editing(prices: PriceModel, *, saved_tokens: int, rebilled_tokens: int, remaining_calls: float,
                  must_fire: bool = False, cold: bool = False, force: bool = False,
                  batch_tokens: float = 0.0, loses: str | None = None) -> EditDecision:
    """Whether an edit of the already-sent view pays for itself, and whether now is the time.

    `rebilled_tokens`: cached tokens from the edit point to the end of what was sent, which this call
    writes again instead of reading. `saved_tokens`: tokens the edit removes from every later view.
    Saving = the removed tokens not written now, plus not read on each of `remaining_calls` later
    calls; re-billing = the rebilled tokens at the write price instead of the read price.
    `batch_tokens`: the economic batch (`economic_batch_tokens`); an edit that pays but removes less
    waits, since the same re-billing will buy a larger saving a few calls later.
    `loses`: what the edit would cost besides money (a compaction that leaves the working state no
    room), which no saving pays for: the edit waits until the threshold or `force` requires it."""
    rebilling = max(0, rebilled_tokens) * (prices.cache_write - prices.cache_read) / PER_MILLION
    saving = max(0, saved_tokens) * (prices.cache_write + prices.cache_read * max(0.0, remaining_calls)) / PER_MILLION
    figures = {"saving": saving, "rebilling": rebilling, "remaining_calls": remaining_calls}
    if force:
        return EditDecision(True, "forced", **figures)
    if must_fire:
        return EditDecision(True, "over the threshold: the view must shrink", **figures)
    if loses:
        return EditDecision(False, f"a saving bought by forgetting is not a saving: {loses}", **figures)
    if cold:
        return EditDecision(True, "cache cold: the prefix is re-billed anyway", **figures)
    if saved_tokens <= 0:
        return EditDecision(False, "nothing to save", **figures)
    if saving <= rebilling:
        return EditDecision(False, f"would re-bill ${rebilling:.4f} to save ${saving:.4f} over "
                                   f"{remaining_calls:.0f} calls", **figures)
    if saved_tokens < batch_tokens:
        return EditDecision(False, f"waiting for a batch: {saved_tokens} tokens removable, the economic batch "
                                   f"for re-billing {rebilled_tokens} is {batch_tokens:.0f}", **figures)
    return EditDecision(True, f"saves ${saving:.4f} over {remaining_calls:.0f} calls, "
                              f"re-bills ${rebilling:.4f}", **figures)


def economic_batch_tokens(prices: PriceModel, *, setup_tokens: int, growth_per_call: float) -> float:
    """The removable tokens worth waiting for before an edit (the economic order quantity).

    Each batch re-bills `setup_tokens` once (what stays after the edit point, written instead of
    read); between batches the removable tokens grow by about `growth_per_call` and are read on every
    call. Per call that is setup / n + read price x growth x n / 2 for a batch every n calls, least at
    a batch of sqrt(2 x setup cost x growth / read price) tokens. Free reads never pay for an edit
    (infinite batch); nothing to re-bill or no growth: any batch."""
    extra = prices.cache_write - prices.cache_read
    if setup_tokens <= 0 or growth_per_call <= 0 or extra <= 0:
        return 0.0
    if prices.cache_read <= 0:
        return math.inf
    return math.sqrt(2.0 * extra * setup_tokens * growth_per_call / prices.cache_read)


def expected_remaining_calls(stats: CallStats, config: PricingConfig, *, tokens_after_edit: int,
                             threshold: int) -> float:
    """Calls an edit's saving is counted over (see PricingConfig.horizon)."""
    so_far = float(stats.calls)
    growth = stats.tokens_per_call
    until = max(0.0, (threshold - tokens_after_edit) / growth) if growth > 0 else float(config.max_horizon_calls)
    estimate = {"calls_so_far": so_far, "until_threshold": until, "fixed": float(config.horizon_calls),
                "auto": min(so_far, until)}[config.horizon]
    return min(estimate, float(config.max_horizon_calls))


def is_call_start(messages: Sequence[Message], i: int) -> bool:
    """A model call produced the assistant turn that starts at `i` (later records of one turn are not
    separate calls)."""
    return messages[i].role == "assistant" and (i == 0 or messages[i - 1].role != "assistant")


def stats_from_transcript(transcript: Sequence[Message], counter: TokenCounter) -> CallStats:
    """Call statistics read off a transcript: each assistant turn was one model call."""
    calls = sum(1 for i in range(len(transcript)) if is_call_start(transcript, i))
    tokens = counter.messages(transcript)
    return CallStats(calls, tokens / calls if calls else float(tokens))


def unsent_ids(transcript: Sequence[Message]) -> frozenset[str]:
    """Ids of the transcript messages no earlier call can have sent: the last assistant turn (the
    previous call's answer) and everything after it. A harness that calls before every assistant turn
    sent everything before it."""
    start = 0
    for i in range(len(transcript) - 1, -1, -1):
        if is_call_start(transcript, i):
            start = i
            break
    return frozenset(m.id for m in transcript[start:])


def edited_index(view: Sequence[Message], edits: Iterable[Edit], unsent: frozenset[str] = frozenset()) -> int | None:
    """The first already-sent view position that `edits` (already applied to `view`) changed, if any:
    where this call already breaks the cache, so later edits after it re-bill nothing more (edits of
    unsent messages break nothing)."""
    calls: set[str] = set()
    ids: set[str] = set()
    for e in edits:
        if isinstance(e, ReplaceResult):
            calls.add(e.call_id)
        elif isinstance(e, ReplaceMessages):
            ids.update(m.id for m in e.replacement)
    if not calls and not ids:
        return None
    for i, m in enumerate(view):
        if m.id not in unsent and (m.id in ids or any(r.call_id in calls for r in m.tool_results)):
            return i
    return None


def rebilled_tokens(view: Sequence[Message], start: int, counter: TokenCounter, unsent: frozenset[str],
                    broken_from: int | None = None) -> int:
    """Tokens of already-sent messages from view position `start` up to where the cache is already
    broken on this call (or the end): what an edit at `start` makes the provider write again."""
    if broken_from is not None and broken_from <= start:
        return 0  # an earlier stage already broke the cache before this edit: it re-bills nothing more
    stop = len(view) if broken_from is None else broken_from
    return counter.span(view, start, stop, unsent)


def result_index(view: Sequence[Message], call_id: str) -> int | None:
    """The view position of the message holding the result of `call_id`."""
    for i, m in enumerate(view):
        if any(r.call_id == call_id for r in m.tool_results):
            return i
    return None


# --- the rule as a stage applies it -----------------------------------------------------------------

def decide_edit(state: PipelineState, ctx: StageContext, *, first_index: int, saved_tokens: int,
                cold_fires: bool = True, loses: str | None = None) -> EditDecision:
    """The firing rule for a stage about to edit `state["view"]` from `first_index` on, saving
    `saved_tokens`: prices and horizon from `ctx.config.pricing`, call statistics from
    `ctx.call_stats` (else read off `ctx.transcript`), what was sent from `ctx.unsent_ids` (else the
    transcript's last turn), and the cache break an earlier stage already made on this call.
    `cold_fires=False` weighs a cold cache like a warm one: for an edit that costs more than money
    (a compaction below the threshold loses detail), an idle pause alone is no reason to make it.
    `loses`: what the edit would cost the agent besides money (see `worth_editing`)."""
    config = ctx.config.pricing
    prices = price_model(config)
    view, tokens = state["view"], state["tokens"]
    # The first call of a session has no evidence of a warm cache (the lead's contract: nothing
    # cached yet), and past the TTL the prefix is gone: either way nothing is re-billed by an edit.
    cold = cold_fires and (ctx.idle_seconds is None or ctx.idle_seconds > prices.cache_ttl_seconds)
    must = tokens > ctx.config.threshold
    if not config.firing_rule:
        return EditDecision(True, "firing rule off")
    stats = ctx.call_stats
    if stats is None and ctx.transcript:
        stats = stats_from_transcript(ctx.transcript, ctx.counter)
    if stats is None:
        return EditDecision(True, "no call statistics: the stage's own trigger decides")
    unsent = ctx.unsent_ids if ctx.unsent_ids is not None else unsent_ids(ctx.transcript)
    rebilled = rebilled_tokens(view, first_index, ctx.counter, unsent, edited_index(view, state.get("edits", ()), unsent))
    remaining = expected_remaining_calls(stats, config, tokens_after_edit=tokens - saved_tokens,
                                         threshold=ctx.config.threshold)
    # The re-billed stretch minus what the edit removes from it is what each batch writes again.
    batch = (economic_batch_tokens(prices, setup_tokens=max(0, rebilled - saved_tokens),
                                   growth_per_call=stats.tokens_per_call) if config.batching else 0.0)
    return worth_editing(prices, saved_tokens=saved_tokens, rebilled_tokens=rebilled, remaining_calls=remaining,
                         must_fire=must, cold=cold, force=ctx.forced, batch_tokens=batch, loses=loses)


# The context fields `decide_edit` reads: a stage that applies the firing rule reads them too.
FIRING_RULE_READS = frozenset({"config", "counter", "idle_seconds", "forced", "call_stats", "transcript", "unsent_ids"})
