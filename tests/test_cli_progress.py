"""Long commands show what they are doing on a terminal's stderr and nothing elsewhere: the library
reports phases and counts to a listener (`core.progress`), the CLI draws them only on a terminal."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.cli.progress import TerminalProgress
from worksurface.core import progress
from worksurface.formats import read_transcript
from worksurface.offline.replay import call_points, replay
from worksurface.session.session import Session

SMALL = Path(__file__).resolve().parents[1] / "fixtures" / "small.jsonl"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def phase(self, description: str, total: int | None = None) -> None:
        self.events.append(("phase", (description, total)))

    def advance(self, done: int) -> None:
        self.events.append(("advance", done))

    def finish(self) -> None:
        self.events.append(("finish", None))


def test_a_replay_reports_reading_and_every_call_to_the_listener() -> None:
    recorder = Recorder()
    with progress.listening(recorder):
        transcript = read_transcript(SMALL)
        with Session.open(None) as session:
            replay(transcript.messages, session)
    calls = len(call_points(transcript.messages))
    assert recorder.events[0] == ("phase", (f"reading {SMALL}", None))
    assert ("phase", ("replaying model calls", calls)) in recorder.events
    assert [e for kind, e in recorder.events if kind == "advance"] == list(range(1, calls + 1))
    assert recorder.events[-1] == ("finish", None)
    progress.advance(5)  # nobody listens any more: nothing is recorded, nothing fails
    assert recorder.events[-1] == ("finish", None)


def test_the_terminal_line_shows_the_phase_escaped_and_its_count() -> None:
    out = io.StringIO()
    line = TerminalProgress(Console(file=out, force_terminal=True, width=100), delay=0.0)
    line.phase("reading evil\x1b]0;owned\x07.jsonl", None)
    line.phase("replaying model calls", 4)
    line.advance(3)
    line.finish()
    drawn = out.getvalue()
    assert "replaying model calls" in drawn and "3/4" in drawn
    assert "\x1b]0;" not in drawn and "\\x1b]0;owned\\x07" in drawn  # a name's escape shown, not obeyed


def test_a_quick_line_draws_nothing_before_its_delay() -> None:
    out = io.StringIO()
    line = TerminalProgress(Console(file=out, force_terminal=True), delay=60.0)
    line.phase("compacting")
    line.advance(1)
    line.finish()
    assert out.getvalue() == ""


def test_off_a_terminal_the_output_is_only_the_commands_own() -> None:
    result = CliRunner().invoke(app, ["replay", str(SMALL), "--json"])
    assert result.exit_code == 0, result.output
    assert "replaying model calls" not in result.output and "\r" not in result.output
