"""`worksurface compact`: compact a saved transcript offline and write it back in its format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..config import Config
from ..errors import WorksurfaceError
from ..formats import WRITABLE_FORMATS, read_transcript, write_transcript
from ..probes.cut import cut, cut_transcript
from .app import app, fail

# Read-only inputs (SWE-agent, OpenHands, ...) are written as OpenAI chat messages unless told otherwise.
DEFAULT_EXPORT_FORMAT = "openai"


@app.command()
def compact(
    path: Path = typer.Argument(..., help="Transcript file (any supported format)."),
    out: Optional[Path] = typer.Option(None, "-o", "--out",
                                       help="Where to write the compacted transcript "
                                            "(default: <name>.compacted<ext> in the current directory)."),
    format: str = typer.Option("auto", "--format", help="Input format, or auto to detect."),
    at: Optional[str] = typer.Option(None, "--at",
                                     help="Compact the transcript as it stood at a point: 'boundary' (just "
                                          "before its first compaction marker) or a number of messages."),
    out_format: Optional[str] = typer.Option(None, "--out-format",
                                             help=f"Output format: one of {', '.join(WRITABLE_FORMATS)} "
                                                  "(default: the input's, or openai for read-only formats)."),
    window: Optional[int] = typer.Option(None, "--window", help="Context window in tokens (default 200000)."),
    target: Optional[int] = typer.Option(None, "--target",
                                         help="Post-compact target in tokens (default 20% of the window)."),
    force: bool = typer.Option(False, "--force", help="Compact now, as a manual /compact would."),
    session_dir: Optional[Path] = typer.Option(None, "--session", help="Keep the session in this directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Run the staged pipeline once on a saved transcript and write the resulting view."""
    from ..session import Session  # LangGraph is slow to import; only commands that compact pay for it

    try:
        transcript = read_transcript(path, format)
        if at is not None:
            transcript = cut_transcript(transcript, cut(transcript.messages, at).before)
        config = Config.load().with_overrides(window=window, post_compact_target_tokens=target)
        fmt = out_format or (transcript.format if transcript.format in WRITABLE_FORMATS else DEFAULT_EXPORT_FORMAT)
        destination = out or Path.cwd() / f"{path.stem}.compacted{path.suffix if fmt == transcript.format else '.json'}"
        with Session.open(session_dir, config=config) as session:
            prepared = session.prepare(transcript, force=force)
        write_transcript(transcript, destination, prepared.messages, fmt)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    report = prepared.report
    if as_json:
        typer.echo(json.dumps({**report.to_json(), "output": str(destination), "format": fmt}, indent=2))
        return
    _print_report(report, destination, fmt)


def _print_report(report: Any, destination: Path, fmt: str) -> None:
    table = Table(title="worksurface compact")
    for col, justify in (("stage", "left"), ("tokens before", "right"), ("tokens after", "right"),
                         ("items", "right"), ("ms", "right"), ("note", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in report.stages + report.reinjected:
        table.add_row(s.name, f"{s.tokens_before:,}", f"{s.tokens_after:,}", str(s.items), f"{s.ms:.1f}",
                      s.skipped or "")
    console = Console()
    console.print(table)
    console.print(f"transcript {report.tokens_before:,} tokens -> view {report.tokens_after:,} tokens "
                  f"in {report.ms:.0f} ms")
    if report.boundary:
        b = report.boundary
        console.print(f"boundary: {b['trigger']}, epoch {b['epoch']}, {b['pre_tokens']:,} -> {b['post_tokens']:,} "
                      f"tokens, {len(b['covered_ids'])} messages summarized by {b['summarizer']}")
    else:
        console.print("no compact boundary written (under the threshold; use --force to compact anyway)")
    console.print(f"wrote {destination} ({fmt})")
