"""The sizes worksurface acts on: a transcript's usage made usable (anchor, calibration, what was
refused), and the two figures of a view, counted and as the provider measures.

Two units appear everywhere: *counted* (worksurface's cl100k count of the messages) and *measured*
(the provider's tokens, system prompt and tools included: the anchor's figure, or the calibration's
prediction once the view is no longer the one the provider measured). Reports key figures by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .calibration import Calibration, Fit, Measurement, fit_points, measurements
from .model import Message
from .usage import message_usage
from .view import live_slice, live_start

COUNTED, MEASURED = "counted", "measured"


@dataclass(frozen=True)
class MeasuredUsage:
    """A transcript's recorded usage as worksurface uses it: the anchor (the newest plausible
    measurement the harness still sends: message id, tokens up to and including it), the fit over the
    whole transcript, and the measurements refused as implausible."""

    anchor: tuple[str, int] | None
    fit: Fit | None
    refused: tuple[Measurement, ...] = ()
    messages: Sequence[Message] = field(default=(), repr=False, compare=False)

    @property
    def calibration(self) -> Calibration | None:
        return self.fit.calibration if self.fit is not None else None

    def notices(self, source: str | None) -> list[str]:
        """What a report says about refused measurements, naming the file."""
        if not self.refused:
            return []
        first = self.refused[0]
        where = f"{source}: " if source else ""
        mid = self.messages[first.index].id if first.index < len(self.messages) else "?"
        more = f" (and {len(self.refused) - 1} more)" if len(self.refused) > 1 else ""
        return [f"{where}the usage recorded at message {mid}{more} measures {first.measured:,} input tokens, "
                f"under half of the {first.live_counted:,} tokens of text before it: it cannot be the whole "
                "request (only the uncached input recorded?), so it is not used"
                + ("" if self.anchor else "; sizes are counted")]


def measured_usage(messages: Sequence[Message], counter: Any,
                   found: Sequence[Measurement] | None = None) -> MeasuredUsage:
    """The usage of a transcript (`messages` as read, earlier compactions included): fitted over all
    of it, anchored on the newest plausible measurement of its live part. `found`: the measurements of
    a longer transcript that `messages` begins (a replay takes them once); those inside are used."""
    inside = measurements(messages, counter) if found is None else [m for m in found if m.index < len(messages)]
    start = live_start(messages)
    refused = tuple(m for m in inside if m.index >= start and not m.plausible)
    refused_inputs = {m.measured for m in refused}
    anchor = None
    for i in range(len(messages) - 1, start - 1, -1):
        usage = message_usage(messages[i])
        if usage is not None and usage.input not in refused_inputs:
            anchor = (messages[i].id, usage.context)
            break
    return MeasuredUsage(anchor, fit_points(inside), refused, messages)


def plausible(measured: int, counted: int) -> bool:
    """Whether `measured` tokens can be a whole request over `counted` tokens of text."""
    return Measurement(0, counted, counted, measured).plausible


@dataclass(frozen=True)
class Figures:
    """Both sizes of a view: worksurface's text count, and the size as the provider measures it."""

    counted: int
    measured: int

    def to_json(self) -> dict[str, int]:
        return {COUNTED: self.counted, MEASURED: self.measured}


def view_figures(view: Sequence[Message], live: Sequence[Message], anchor: tuple[str, int] | None,
                 counter: Any, calibration: Calibration | None = None) -> Figures:
    """The sizes of `view`, a view of the transcript `live`: the measured figure plus the count of
    later messages while the view still holds the anchor message with everything before it unchanged
    (how `Session.prepare` anchors), else `calibration`'s prediction (after a compaction the measured
    figure no longer describes what is sent); the count without an anchor."""
    counted = counter.messages(view)
    if anchor is None:
        return Figures(counted, counted)
    index = next((i for i in range(len(view) - 1, -1, -1) if view[i].id == anchor[0]), None)
    if index is not None and list(view[: index + 1]) == list(live[: index + 1]):
        return Figures(counted, counter.estimate(view, anchor))
    return Figures(counted, calibration.size(counted) if calibration else counted)


def call_usage(messages: Sequence[Message], previous_view: Sequence[Message], counter: Any,
               usage: MeasuredUsage | None = None) -> tuple[str, int] | None:
    """The usage a replayed call passes to `prepare` for the transcript `messages`: the previous
    call's view as the provider would have measured it, anchored at that view's last message. While
    worksurface has changed nothing the transcript's own measurement holds; after a compaction it
    describes the original harness's context, not worksurface's view, so the size comes from the
    calibration. `usage`: `measured_usage(messages)` when the caller has it. None when nothing
    plausible was measured."""
    usage = usage or measured_usage(messages, counter)
    if usage.anchor is None or not previous_view:
        return usage.anchor
    live = live_slice(messages)
    figures = view_figures(previous_view, live, usage.anchor, counter, usage.calibration)
    return previous_view[-1].id, figures.measured
