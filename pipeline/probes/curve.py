"""Retention along a replay: how much of what was established survives each successive compaction.

The transcript is replayed as a harness would send it, one model call at a time (before every
assistant message, and once at the end), through one session: the same replay as `worksurface
replay` (`offline.replay`), anchored on the usage the transcript records unless told otherwise, so
compactions happen where a harness would make them. After each compaction the view is scored on the
probes established before that point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..core.config import Config
from ..formats.base import Transcript
from ..core.model import Message
from ..offline.replay import PreparedView, replay
from ..offline.sizing import SizeFlags, prepare_once
from .match import Score, score
from .model import Probe, ProbeSet


@dataclass(frozen=True)
class CurvePoint:
    """One compaction of the replay: where it happened and what its view retained."""

    messages: int  # transcript messages sent when the compaction ran
    tokens_before: int  # counted: the transcript, and the view after
    tokens_after: int
    score: Score  # over the probes established before `messages`
    # The compaction could not bring the view under the threshold (the view is scored anyway).
    overflow: bool = False
    # A one-shot forced compaction of the same messages to the same target, when asked for.
    one_shot: Score | None = None
    compactions: int = 0  # compactions the session had by this point
    # Why it compacted (threshold, economic) and the sizes in both units (`PrepareReport.sizes`).
    reason: str | None = None
    sizes: dict[str, Any] | None = None
    summary_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        data = {"messages": self.messages, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "overflow": self.overflow, "compactions": self.compactions,
                "reason": self.reason, "summary_tokens": self.summary_tokens, "sizes": self.sizes,
                **self.score.to_json()}
        if self.one_shot is not None:
            data["one_shot"] = self.one_shot.to_json()
        return data


def curve(transcript: Transcript | Sequence[Message], probes: ProbeSet | Iterable[Probe], *,
          window: int | None = None, one_shot: bool = False, use_usage: bool = True,
          config: Config | None = None, **overrides: Any) -> list[CurvePoint]:
    """Replay `transcript` through a memory-only session (`config`, default the defaults, with context
    `window` and other config overrides over it; without a window, the one the transcript records) and
    score the view after each compaction. A probe without `established_at`, or with an id the
    transcript does not contain, counts as established from the start. A compaction that overflows is
    recorded (`overflow`) and the replay goes on. With `one_shot`, each point also scores a single
    forced compaction of the same messages to the same target, in a fresh session: what the repeated
    compactions should keep up with."""
    messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
    probe_list = list(ProbeSet.of(probes))
    position = {m.id: i for i, m in enumerate(messages)}
    cfg = SizeFlags(window=window).config(transcript, config or Config()).with_overrides(**overrides)
    points: list[CurvePoint] = []
    from ..session.session import Session  # LangGraph is slow to import; load it when needed

    def scored(n: int, end: int, prepared: PreparedView, overflow: bool) -> None:
        report = prepared.report
        if report.boundary is None:
            return
        established = [p for p in probe_list if position.get(p.established_at or "", -1) < end]
        single = None
        if one_shot:
            with Session.open(None, config=cfg) as fresh:
                single = score(prepare_once(fresh, _prefix(transcript, end), use_usage=use_usage,
                                            force=True).messages, established)
        boundary = report.boundary
        points.append(CurvePoint(end, report.tokens_before, report.tokens_after,
                                 score(prepared.messages, established), overflow, single,
                                 int(boundary.get("epoch", 1)) - 1, boundary.get("reason"), report.sizes,
                                 int(boundary.get("summary_tokens", 0))))

    with Session.open(None, config=cfg) as session:
        # What the harness sends at each call: its messages and the input the user queued by then.
        replay(messages, session, use_usage=use_usage, on_call=scored, sent=lambda end: _prefix(transcript, end))
    return points


def _prefix(transcript: Transcript | Sequence[Message], end: int) -> Transcript | list[Message]:
    """The transcript as it stood after `end` messages (its meta kept: the window it records)."""
    from .cut import cut_transcript

    messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
    return cut_transcript(transcript, list(messages[:end]))
