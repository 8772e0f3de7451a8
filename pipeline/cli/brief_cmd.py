"""`worksurface brief`: a briefing for a fresh sub-agent, selected from a transcript's working state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.errors import WorksurfaceError
from ..formats import read_transcript
from ..formats.base import Transcript
from ..probes.cut import cut, cut_transcript
from .app import InputFormat, app, fail, STRICT_HELP


@app.command()
def brief(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    task: str = typer.Option(..., "--task", "-t", help="What the sub-agent should do (its goal, in full)."),
    budget: int = typer.Option(3000, "--budget", "-b", help="Most tokens the brief may take (cl100k)."),
    at: Optional[str] = typer.Option(None, "--at",
                                     help="The working state as it stood at a point: 'boundary' (just before "
                                          "the first compaction) or a number of messages. Default: the end."),
    format: InputFormat = typer.Option("auto", "--format", "-f", help="Input format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print {task, tokens, budget, text, lines: [{section, "
                                                       "text, sources (message ids), relevance}]}."),
) -> None:
    """Print a briefing for a fresh sub-agent on TASK: the goal, the rules that apply, the relevant files,
    what was tried and excluded, the identifiers it needs and what to report back, packed by value per
    token into the budget. The same transcript and task give the same brief."""
    from ..session.session import Session  # LangGraph is slow to import; only commands that need it pay for it
    from ..subagents.brief import BriefError

    try:
        transcript = read_transcript(path, format.value, strict=strict)
        if at is not None:
            transcript = _cut(transcript, at)
        with Session.open(None) as session:
            session.ledger.update(transcript.messages, queued=transcript.queued_inputs)
            result = session.brief(task, budget)
    except BriefError as exc:
        raise fail(str(exc)) from None
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{path}: {exc.strerror or exc}") from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        typer.echo(result.text)


def _cut(transcript: Transcript, at: str) -> Transcript:
    """The transcript as it stood at `--at` (as `compact --at` cuts it): its messages before the cut and
    the queued inputs that had arrived by then."""
    before = cut(transcript.messages, at).before
    cut_to = cut_transcript(transcript, before)
    return cut_to if isinstance(cut_to, Transcript) else Transcript(before, transcript.format, transcript.path)
