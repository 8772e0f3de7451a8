"""The calibration on every real session in the shared corpus: the size it predicts for each measured
request is within 5% of what the provider measured (the figures the issue asks for: fixed part, ratio,
worst and median error per session are printed with -s)."""

from __future__ import annotations

import statistics

import pytest

from shared import LONG_CC, TRANSCRIPTS, needs_shared
from worksurface.core.calibration import fit_measurements
from worksurface.core.errors import FormatError
from worksurface.core.tokens import TokenCounter
from worksurface.formats import read_transcript
from worksurface.probes.cut import first_boundary

FIELD = sorted(p for p in (TRANSCRIPTS / "field").rglob("*.jsonl") if "subagents" not in p.parts) \
    if (TRANSCRIPTS / "field").is_dir() else []
SESSIONS = FIELD + [p for p in LONG_CC if p.name[:8] in ("258c7280", "8463c716")]
TOLERANCE = 0.05


@needs_shared()
@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: str(p.relative_to(TRANSCRIPTS)))
def test_every_measured_request_is_predicted_within_5_percent(path) -> None:
    try:
        transcript = read_transcript(path)
    except FormatError as exc:  # pragma: no cover - until damaged lines are read (issue 24, item 1)
        pytest.skip(f"not readable yet: {exc}")
    counter = TokenCounter()
    boundary = first_boundary(transcript.messages)
    scopes = {"whole": transcript.messages}
    if boundary is not None:
        scopes["at its first compaction"] = transcript.messages[:boundary]
    for scope, messages in scopes.items():
        fit = fit_measurements(messages, counter)
        assert fit is not None, f"{path.name}: no measured request"
        errors = [abs(e) for e in fit.errors()]
        cal = fit.calibration
        print(f"{path.relative_to(TRANSCRIPTS)} ({scope}): fixed {cal.fixed:,}, ratio {cal.ratio:.3f}, "
              f"{cal.points} requests in {cal.segments} segments, worst {max(errors):.2%}, "
              f"median {statistics.median(errors):.2%}")
        assert max(errors) <= TOLERANCE, f"{path.name} ({scope}): worst prediction error {max(errors):.2%}"
        # What every request carries can be no more than the smallest request measured (the old straight
        # line put it at 67k on a session whose first request measured 28k).
        assert 0 < cal.fixed <= min(m.measured for m in fit.measurements)
