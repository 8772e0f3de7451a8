"""`worksurface report`: write a self-contained HTML page of what compaction did to a transcript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.errors import WorksurfaceError
from ..core.fileio import STDOUT, atomic_write, output_file
from ..formats import read_transcript
from ..offline.sizing import SizeFlags
from .output import echo
from .app import (BUFFER_HELP, MAX_OUTPUT_HELP, SESSION_HELP, SESSION_ID_HELP, STRICT_HELP, WINDOW_HELP, InputFormat,
                  app, fail, settle_input)


@app.command("report")
def report_command(
    path: Optional[Path] = typer.Argument(None, help="Transcript file (any supported format); none with --batch."),
    out: Optional[Path] = typer.Option(None, "-o", "--out",
                                       help="Where to write the page (default: <name>.report.html in the "
                                            "current directory)."),
    format: InputFormat = typer.Option("auto", "--format", help="Input format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    at: Optional[str] = typer.Option(None, "--at",
                                     help="Report the transcript as it stood at a point: 'boundary' (just before "
                                          "its first compaction marker) or a number of messages."),
    window: Optional[int] = typer.Option(None, "--window", help=WINDOW_HELP),
    max_output: Optional[int] = typer.Option(None, "--max-output", help=MAX_OUTPUT_HELP),
    buffer: Optional[int] = typer.Option(None, "--buffer", help=BUFFER_HELP),
    target: Optional[int] = typer.Option(None, "--target",
                                         help="Post-compact target in tokens (default 20% of the window)."),
    force: bool = typer.Option(False, "--force", help="Compact now, as a manual /compact would (without "
                                                      "--replay)."),
    probes: Optional[Path] = typer.Option(None, "--probes",
                                          help="Probe file (JSON): add retention versus budget and the "
                                               "forgotten probes."),
    replay: bool = typer.Option(False, "--replay",
                                help="Replay every model call (token sawtooth, prompt-cache share, cost) "
                                     "instead of one prepare."),
    session: Optional[str] = typer.Option(None, "--session", help=SESSION_HELP + " Then the artifact ids on the "
                                          "page can be fetched back."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
    no_usage: bool = typer.Option(False, "--no-usage",
                                  help="Count the text only; by default the size is anchored on the input "
                                       "tokens the transcript records the provider measured."),
    as_json: bool = typer.Option(False, "--json", help="Also print the report's data as JSON."),
    batch: Optional[Path] = typer.Option(None, "--batch",
                                         help="Render a `worksurface batch` results folder instead (default "
                                              "output: DIR/report.html)."),
) -> None:
    """Write one HTML file (no network needed to open it) showing every message's fate in the view,
    the stage waterfall, the surface the view carries, and with --replay / --probes the token
    sawtooth, cache share and probe retention."""
    if batch is not None:
        from .batch_cmd import report_batch_page
        report_batch_page(batch, out)
        return
    if path is None:
        raise fail("give a transcript PATH, or --batch DIR for a batch's results")
    from ..probes.model import ProbeSet
    from ..report import build_report, render_html

    inputs = [path] + ([probes] if probes is not None else [])
    try:
        to_stdout = out is not None and output_file(out, inputs=inputs, stdout=True) is None
        destination = Path(STDOUT) if to_stdout else out or Path.cwd() / f"{path.stem}.report.html"
        if out is None:
            output_file(destination, inputs=inputs)  # refused before any work, as every output path is
        settle_input()  # before reading: re-enabled after the read, the collector would scan all it made
        transcript = read_transcript(path, format.value, strict=strict)
        probe_set = ProbeSet.load(probes) if probes is not None else None
        flags = SizeFlags(window, target, max_output, buffer, use_usage=not no_usage)
        data = build_report(transcript, source=path.name, at=at, config=flags.config(transcript), force=force,
                            replay=replay, probes=probe_set, session=session, session_id=session_id,
                            use_usage=flags.use_usage)
        page = render_html(data)
        if to_stdout:
            typer.echo(page, nl=False)
            return
        atomic_write(destination, page, inputs=inputs)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{destination}: cannot write the report ({exc.strerror or exc})") from None
    data["output"] = str(destination)
    data["bytes"] = len(page.encode("utf-8"))
    if as_json:
        typer.echo(json.dumps(data, indent=1, ensure_ascii=False))
        return
    counts = ", ".join(f"{n} {fate}" for fate, n in data["counts"].items() if n)
    echo(f"wrote {destination} ({data['bytes'] / 1024:,.0f} KB): {len(data['cells']):,} cells ({counts})")
