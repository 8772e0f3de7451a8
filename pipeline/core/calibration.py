"""How the provider's measured request sizes relate to worksurface's text count: the calibration.

A harness sends every request with something worksurface never counts (system prompt, tool schemas:
the fixed part) and the provider's tokenizer differs from cl100k (the ratio), so a measured request is
`fixed + ratio * counted`. Three things in real sessions break a straight line through every
measurement, and the fit is built around them:

- The request's input excludes the response it produced: a request is placed at the text counted
  before its response (the run of assistant records that carry its usage), never after.
- What the request measured can change without the transcript showing it: harness-side clearing
  (Claude Code's `microcompact_boundary`, marked `meta["harness_clearing"]`), a harness compaction
  (`meta["compact_boundary"]`), and unmarked changes (a measured drop; thinking sent whole but stored
  summarized, images, web search results). Each starts a new *segment*, anchored at its own first
  measurement; segments share the ratio and are never fitted as one line.
- The fixed part is what the earliest request shows: it carries almost no text, so its measurement
  less the ratio times its little text is what the harness adds to every request.

`fit_measurements` gives the whole fit (for tests and reports: each request's predicted size);
`calibrate` its `Calibration`, which sizes a compacted view.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

from .clearing import clearing_edits, clearing_of
from .edits import apply_edits
from .memo import RecentLists, forgotten_with_the_others
from .model import Message, Origin, begins_with
from .usage import message_usage

# The provider's tokenizer differs from cl100k by a factor; outside these bounds a fitted ratio is
# noise and 1.0 is used (the fixed part then absorbs the difference).
RATIO_BOUNDS = (0.5, 3.0)
# A ratio needs this much counted growth inside segments to be told apart from the fixed part; with
# less (one request, or a few close together) the ratio is 1.0.
MIN_FIT_SPREAD = 2_000
# Between two requests of one segment the measured growth is the counted growth times the ratio. A step
# off by more than this many tokens plus this share of the expected growth is content the transcript
# does not show (added or removed): a new segment. Measured on the 16 long real sessions (Claude Code
# and Codex): looser tolerances leave drifts of 6-10% inside segments, tighter ones split on the
# tokenizer's own variation from one tool result to the next.
STEP_TOLERANCE_TOKENS = 1_000
STEP_TOLERANCE_SHARE = 0.3
# Steps shorter than this (counted tokens) say little about the ratio: they only seed it when nothing
# longer exists.
MIN_RATIO_STEP = 200
# Segmenting and refitting the ratio alternate; the segmentation settles after two or three rounds.
FIT_ROUNDS = 3
# A measurement under this share of the text worksurface counts in the live part (at least
# MIN_PLAUSIBLE_TEXT of it) cannot be the whole request: a harness that records only uncached input, a
# rewritten usage. It is reported and never used.
IMPLAUSIBLE_SHARE = RATIO_BOUNDS[0]
MIN_PLAUSIBLE_TEXT = 1_000


@dataclass(frozen=True)
class Measurement:
    """One measured request: where its usage is recorded, the text counted before its response
    (from the start of the messages, and from the last harness compaction; tool results a harness
    clearing took out count as the harness sent them), and the input the provider read. `marked`: a
    harness clearing or compaction lies between it and the previous measurement."""

    index: int
    counted: int
    live_counted: int
    measured: int
    marked: bool = False
    output: int = 0

    @property
    def plausible(self) -> bool:
        return self.live_counted < MIN_PLAUSIBLE_TEXT or self.measured >= IMPLAUSIBLE_SHARE * self.live_counted


@dataclass(frozen=True)
class Calibration:
    """measured ~= fixed + ratio * counted, for a view the harness sends as it is (a compacted view
    included). `fixed` is what the harness sends on every request beyond the messages (system prompt,
    tool schemas), `ratio` the tokenizer difference, `points` the measurements fitted and `segments`
    how many separately anchored stretches they fell into."""

    fixed: int
    ratio: float
    points: int
    segments: int = 1

    def size(self, counted: int) -> int:
        """The measured size of a view of `counted` tokens (never negative)."""
        return max(0, self.fixed + round(self.ratio * max(0, counted)))

    def offset(self, counted: int) -> int:
        """What to add to a view's count for its measured size: it shrinks with the view (a compacted
        view's system prompt and tools stay, its tokenizer difference shrinks with its text)."""
        return self.size(counted) - counted

    def counted_for(self, measured: int) -> int:
        """The counted text that measures `measured` tokens with this calibration (0 when the fixed
        part alone is larger)."""
        return max(0, int((measured - self.fixed) / self.ratio))

    def to_json(self) -> dict[str, Any]:
        return {"fixed": self.fixed, "ratio": round(self.ratio, 4), "points": self.points,
                "segments": self.segments}


@dataclass(frozen=True)
class Fit:
    """The calibration with what it was fitted on: the plausible measurements and where each segment
    starts (indexes into `measurements`; the first is 0)."""

    calibration: Calibration
    measurements: tuple[Measurement, ...]
    starts: tuple[int, ...]
    # Measurements left out as implausible (see Measurement.plausible).
    implausible: tuple[Measurement, ...] = ()

    def predicted(self) -> list[int]:
        """Each measured request's size as the fit predicts it: its segment's first measurement grown
        by the ratio times the counted growth since (the first segment starts at the fixed part)."""
        ratio, starts = self.calibration.ratio, set(self.starts)
        out: list[int] = []
        base, anchor = 0, 0
        for k, m in enumerate(self.measurements):
            if k in starts:
                base = self.calibration.size(m.counted) if k == 0 else m.measured
                anchor = m.counted
            out.append(max(0, round(base + ratio * (m.counted - anchor))))
        return out

    def errors(self) -> list[float]:
        """Relative prediction error of each measured request: (predicted - measured) / measured."""
        return [(p - m.measured) / m.measured for p, m in zip(self.predicted(), self.measurements)]


def measurements(messages: Sequence[Message], counter: Any) -> list[Measurement]:
    """Every measured request in `messages`, in order, placed at the text counted before its response
    (its input never includes its own output). One response is one measurement: Claude Code writes it
    as several records with the same usage, interleaved with the results of its parallel tool calls."""
    return list(_read_log(messages, counter).found)


def _read_log(messages: Sequence[Message], counter: Any) -> "MeasurementLog":
    """The log of `messages` read whole: one offline command measures the same transcript for its
    sizes, its session's calibration and its writer."""
    found = _RECENT.get(messages, type(counter))
    if found:
        return found[0]
    log = MeasurementLog(counter)
    log.extend(messages)
    _RECENT.put(messages, [log], type(counter))
    return log


# The logs of the last few lists read whole, for the kind of counter that counted them (callers copy).
_RECENT: RecentLists["MeasurementLog"] = RecentLists()


class MeasurementLog:
    """`measurements` of a transcript that grows by appends, read incrementally: a session calibrates
    on every call that may compact, and reads only what is new since the previous one."""

    def __init__(self, counter: Any) -> None:
        self.counter = counter
        self._reset()

    def _reset(self) -> None:
        self.found: list[Measurement] = []
        self._seen: list[Message] = []
        self._running = self._run_start = self._boundary_at = 0
        self._marked = False
        self._last: tuple[object, int] | None = None  # (response id, input) of the newest measurement
        self._cleared: set[str] = set()  # tool results a harness clearing already took out of the count

    def update(self, messages: Sequence[Message]) -> list[Measurement]:
        """The measurements of `messages`: the new ones read when `messages` extends what was read
        before (the same message objects), else all of them again."""
        seen = self._seen
        if not begins_with(messages, seen):
            self._reset()
        if not self._seen:
            known = _RECENT.get(messages, type(self.counter))
            if known:
                self._take(known[0])
        self.extend(messages[len(self._seen):])
        return self.found

    def _take(self, other: "MeasurementLog") -> None:
        """Go on from where `other` (a log of the same list, read whole) stands, as a copy."""
        self.found, self._seen, self._cleared = list(other.found), list(other._seen), set(other._cleared)
        self._running, self._run_start, self._boundary_at = other._running, other._run_start, other._boundary_at
        self._marked, self._last = other._marked, other._last

    def extend(self, messages: Sequence[Message]) -> None:
        for message in messages:
            self._read(message)

    def _read(self, message: Message) -> None:
        previous = self._seen[-1] if self._seen else None
        if message.role != "assistant" or previous is None or previous.role != "assistant":
            self._run_start = self._running  # the records of a response start here
        if _is_compaction(message):
            self._boundary_at, self._marked = self._running, True
        usage = message_usage(message)
        response = message.meta.get("api_message_id")
        if usage is not None and usage.input > 0 and not self._repeats(response, usage.input):
            counted = self._run_start if message.role == "assistant" else self._running
            self.found.append(Measurement(len(self._seen), counted, max(0, counted - self._boundary_at), usage.input,
                                          self._marked, usage.output))
            self._marked, self._last = False, (response, usage.input)
        self._running += self.counter.message(message)
        self._seen.append(message)
        if clearing_of(message) is not None:
            # The clearing follows this message (core/clearing.py): its own usage was measured before
            # it, the next measurement is the first of what the harness sent cleared.
            self._marked = True
            self._running = max(self._boundary_at, self._running - self._cleared_tokens())

    def _cleared_tokens(self) -> int:
        """The counted tokens the clearing marked on the newest message took out of what the harness
        sends from then on: later requests are placed at the text as sent (the session counts its
        view so too), so their plausibility and the calibration's prediction hold across it."""
        edits = [e for e in clearing_edits(self._seen, len(self._seen) - 1) if e.call_id not in self._cleared]
        if not edits:
            return 0
        ids = {e.call_id for e in edits}
        self._cleared |= ids
        hit = [m for m in self._seen if any(r.call_id in ids for r in m.tool_results)]
        before = sum(self.counter.message(m) for m in hit)
        return max(0, before - sum(self.counter.message(m) for m in apply_edits(hit, edits)))

    def _repeats(self, response: object, measured: int) -> bool:
        """Whether a usage repeats the newest measurement: the same response (its records share an
        id), or, where a response id is missing, the same input. Two responses with their own ids are
        two requests even when they measured the same (a harness recording only a constant uncached
        input is then seen, and refused, on every request)."""
        if self._last is None:
            return False
        last_response, last_measured = self._last
        if response is not None and last_response is not None:
            return response == last_response
        return measured == last_measured


def fit_measurements(messages: Sequence[Message], counter: Any) -> Fit | None:
    """The calibration of the usage recorded on `messages` (a whole transcript: the earliest requests
    show the fixed part best, and later compactions are segmented, not mixed in); None when nothing
    plausible was measured."""
    return fit_points(measurements(messages, counter))


def fit_points(found: Sequence[Measurement]) -> Fit | None:
    """`fit_measurements` on measurements already taken (a replay takes them once for the whole
    transcript and fits each call's prefix)."""
    return _fit(tuple(found))


# One offline command fits the same measurements for its sizes, its session's calibration and its
# writer (a second each on 100k messages); hashing them to find the answer costs a fortieth of that.
@functools.lru_cache(maxsize=4)
def _fit(found: tuple[Measurement, ...]) -> Fit | None:
    points = tuple(m for m in found if m.plausible)
    implausible = tuple(m for m in found if not m.plausible)
    if not points:
        return None
    ratio = _seed_ratio(points, _marked_or_dropped(points)) or 1.0
    starts = _segment_starts(points, ratio)
    for _ in range(FIT_ROUNDS):
        refit = _anchored_ratio(points, starts)
        if refit is None:
            break
        ratio = refit
        starts = _segment_starts(points, ratio)
    if not RATIO_BOUNDS[0] <= ratio <= RATIO_BOUNDS[1] or _spread(points, starts) < MIN_FIT_SPREAD:
        ratio = 1.0
        starts = _segment_starts(points, ratio)
    first = points[0]
    fixed = max(0, round(first.measured - ratio * first.counted))
    calibration = Calibration(fixed, ratio, len(points), len(starts))
    return Fit(calibration, points, tuple(sorted(starts)), implausible)


forgotten_with_the_others(_fit.cache_clear)


def calibrate(messages: Sequence[Message], counter: Any) -> Calibration | None:
    """`fit_measurements(messages, counter).calibration`, or None when nothing was measured."""
    fitted = fit_measurements(messages, counter)
    return fitted.calibration if fitted is not None else None


def _is_compaction(message: Message) -> bool:
    return bool(message.meta.get("compact_boundary")) or message.origin is Origin.BOUNDARY


def _marked_or_dropped(points: Sequence[Measurement]) -> set[int]:
    """Segment starts known without a ratio: a marker, or a measured drop (the text only grows)."""
    return {k for k in range(1, len(points))
            if points[k].marked or points[k].measured < points[k - 1].measured}


def _segment_starts(points: Sequence[Measurement], ratio: float) -> set[int]:
    """Where a new segment starts: the first measurement, a marker, a drop, or a step whose measured
    growth the counted growth does not explain (see STEP_TOLERANCE_*)."""
    starts = {0} | _marked_or_dropped(points)
    for k in range(1, len(points)):
        grown = points[k].counted - points[k - 1].counted
        expected = ratio * grown
        if abs(points[k].measured - points[k - 1].measured - expected) > \
                STEP_TOLERANCE_TOKENS + STEP_TOLERANCE_SHARE * abs(expected):
            starts.add(k)
    return starts


def _seed_ratio(points: Sequence[Measurement], starts: set[int]) -> float | None:
    """The counted-growth-weighted median of the ratio over single steps: robust to the few steps
    where hidden content arrives, which a mean would follow."""
    steps = []
    for k in range(1, len(points)):
        grown = points[k].counted - points[k - 1].counted
        measured = points[k].measured - points[k - 1].measured
        if k not in starts and grown >= MIN_RATIO_STEP and measured > 0:
            steps.append((measured / grown, grown))
    if not steps:
        return None
    steps.sort()
    half, acc = sum(w for _, w in steps) / 2, 0
    for ratio, weight in steps:
        acc += weight
        if acc >= half:
            return ratio
    return steps[-1][0]  # pragma: no cover - the loop always reaches half


def _anchored_ratio(points: Sequence[Measurement], starts: set[int]) -> float | None:
    """The ratio that best predicts each measurement from its segment's first one, in relative terms
    (least squares of (ratio * counted growth - measured growth) / measured)."""
    num = den = 0.0
    anchor = points[0]
    for k, m in enumerate(points):
        if k in starts:
            anchor = m
            continue
        grown, measured = m.counted - anchor.counted, m.measured - anchor.measured
        weight = 1.0 / (m.measured * m.measured)
        num += grown * measured * weight
        den += grown * grown * weight
    return num / den if den > 0 else None


def _spread(points: Sequence[Measurement], starts: set[int]) -> int:
    """Counted growth inside segments: what the ratio was fitted on."""
    total, anchor = 0, points[0]
    for k, m in enumerate(points):
        if k in starts:
            anchor = m
        else:
            total = max(total, m.counted - anchor.counted)
    return total
