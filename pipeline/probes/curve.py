"""Retention along a replay: how much of what was established survives each successive compaction.

The transcript is replayed as a harness would send it, one model call at a time (before every
assistant message, and once at the end), through one session whose small window forces several
compactions. After each compaction the view is scored on the probes established before that point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..formats.base import Transcript
from ..core.model import Message
from ..offline.replay import call_points, replay_clock
from .cut import cut_transcript
from .match import Score, score
from .model import Probe, ProbeSet


@dataclass(frozen=True)
class CurvePoint:
    """One compaction of the replay: where it happened and what its view retained."""

    messages: int  # transcript messages sent when the compaction ran
    tokens_before: int
    tokens_after: int
    score: Score  # over the probes established before `messages`
    # The compaction could not bring the view under the threshold (the view is scored anyway).
    overflow: bool = False
    # A one-shot forced compaction of the same messages to the same target, when asked for.
    one_shot: Score | None = None
    compactions: int = 0  # compactions the session had by this point

    def to_json(self) -> dict[str, Any]:
        data = {"messages": self.messages, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "overflow": self.overflow, "compactions": self.compactions,
                **self.score.to_json()}
        if self.one_shot is not None:
            data["one_shot"] = self.one_shot.to_json()
        return data


def curve(transcript: Transcript | Sequence[Message], probes: ProbeSet | Iterable[Probe], *,
          window: int, one_shot: bool = False, **config: Any) -> list[CurvePoint]:
    """Replay `transcript` through a memory-only session with context `window` (and other config
    overrides) and score the view after each compaction. A probe without `established_at`, or with an
    id the transcript does not contain, counts as established from the start. A compaction that
    overflows is recorded (`overflow`) and the replay goes on. With `one_shot`, each point also scores
    a single forced compaction of the same messages to the same target, in a fresh session: what the
    repeated compactions should keep up with."""
    messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
    probe_list = list(ProbeSet.of(probes))
    position = {m.id: i for i, m in enumerate(messages)}
    calls = list(call_points(messages))
    points: list[CurvePoint] = []
    now = 0.0
    from ..core.errors import ContextOverflowError
    from ..session.session import Session, compact  # LangGraph is slow to import; load it when needed

    with Session.open(None, window=window, **config) as session:
        for n in calls:
            now = replay_clock(messages[n - 1], now)
            overflow = False
            # What the harness sends at this call: its messages and the input the user queued by then.
            sent = cut_transcript(transcript, messages[:n])
            try:
                prepared = session.prepare(sent, now=now)
            except ContextOverflowError as exc:
                if exc.prepared is None:
                    raise
                prepared, overflow = exc.prepared, True
            report = prepared.report
            if report.boundary is None:
                continue
            established = [p for p in probe_list if position.get(p.established_at or "", -1) < n]
            single = None
            if one_shot:
                fresh = compact(sent, force=True, now=now, window=window, **config)
                single = score(fresh.messages, established)
            points.append(CurvePoint(n, report.tokens_before, report.tokens_after,
                                     score(prepared.messages, established), overflow, single,
                                     int(report.boundary.get("epoch", 1)) - 1))
    return points
