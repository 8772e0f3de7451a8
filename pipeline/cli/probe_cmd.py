"""`worksurface probe derive|check|curve`: measure what a compaction made the agent forget."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..core.errors import WorksurfaceError
from ..core.fileio import display_name, output_file
from ..formats import read_transcript
from ..probes.check import DEFAULT_BASELINES, CheckResult, check
from ..probes.curve import CurvePoint, curve
from ..probes.cut import cut
from ..probes.derivation import derive
from ..probes.match import Score
from ..probes.model import CATEGORIES, ProbeSet
from ..offline.sizing import SizeFlags
from .output import console, markup
from .app import BUFFER_HELP, InputFormat, MAX_OUTPUT_HELP, STRICT_HELP, WINDOW_HELP, app, fail

probe_app = typer.Typer(help="Forgetting probes: derive them, check a compaction, replay a curve.",
                        no_args_is_help=True)
app.add_typer(probe_app, name="probe")

_AT_HELP = "Cut: 'boundary' (before Claude Code's first compaction) or a number of messages. " \
           "Default: the boundary if there is one, else the whole transcript."


@contextmanager
def _errors() -> Iterator[None]:
    """Report worksurface's own errors as one line and exit code 2, without a traceback."""
    try:
        yield
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None


@probe_app.command("derive")
def derive_cmd(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    at: Optional[str] = typer.Option(None, "--at", help=_AT_HELP),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here (default: stdout)."),
    format: InputFormat = typer.Option("auto", "--format", help="Transcript format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
) -> None:
    """Derive probes mechanically from a transcript up to the cut."""
    with _errors():
        destination = output_file(output, inputs=[path], stdout=True)  # None: standard output
        transcript = read_transcript(path, format.value, strict=strict)
        probes = derive(cut(transcript.messages, at).before, display_name(path), transcript.queued_inputs)
        if destination is None:
            typer.echo(probes.dumps(), nl=False)
        else:
            probes.save(destination, inputs=[path])
            console(stderr=True).print(f"{len(probes)} probes written to {markup(output)}", highlight=False)


@probe_app.command("check")
def check_cmd(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    probes: Path = typer.Option(..., "--probes", help="Probe file (JSON)."),
    at: Optional[str] = typer.Option(None, "--at", help=_AT_HELP),
    window: Optional[int] = typer.Option(None, "--window", help=WINDOW_HELP),
    target: Optional[int] = typer.Option(None, "--target", help="Post-compact target tokens "
                                         "(default: configured post_compact_target)."),
    max_output: Optional[int] = typer.Option(None, "--max-output", help=MAX_OUTPUT_HELP),
    buffer: Optional[int] = typer.Option(None, "--buffer", help=BUFFER_HELP),
    baseline: str = typer.Option(",".join(DEFAULT_BASELINES), "--baseline",
                                 help="Comma-separated baselines to compare against."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    format: InputFormat = typer.Option("auto", "--format", help="Transcript format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    no_usage: bool = typer.Option(False, "--no-usage", help="Count the text only; by default the size is "
                                  "anchored on the input tokens the transcript records."),
) -> None:
    """Compact at the cut and score worksurface's view against baselines of the same size."""
    with _errors():
        names = [b.strip() for b in baseline.split(",") if b.strip()]
        base = SizeFlags(max_output=max_output, buffer=buffer).config(None)
        result = check(read_transcript(path, format.value, strict=strict), ProbeSet.load(probes), at=at,
                       window=window, target=target, baselines=names, use_usage=not no_usage, config=base)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        _print_check(result)


@probe_app.command("curve")
def curve_cmd(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    probes: Path = typer.Option(..., "--probes", help="Probe file (JSON)."),
    window: Optional[int] = typer.Option(None, "--window", help=WINDOW_HELP + " A smaller one forces more "
                                         "compactions."),
    target: Optional[int] = typer.Option(None, "--target", help="Post-compact target tokens "
                                         "(default: configured post_compact_target)."),
    max_output: Optional[int] = typer.Option(None, "--max-output", help=MAX_OUTPUT_HELP),
    buffer: Optional[int] = typer.Option(None, "--buffer", help=BUFFER_HELP),
    one_shot: bool = typer.Option(False, "--one-shot",
                                  help="Also score one forced compaction of the same messages at each point "
                                       "(what the repeated compactions should keep up with)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    format: InputFormat = typer.Option("auto", "--format", help="Transcript format, or auto to detect."),
    no_usage: bool = typer.Option(False, "--no-usage", help="Count the text only; by default each call is "
                                  "anchored on the input tokens the transcript records, as `replay` does."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
) -> None:
    """Replay the whole transcript call by call, as `worksurface replay` does (anchored on the measured
    usage), and report retention after each compaction (a compaction that overflows is marked and the
    replay goes on)."""
    with _errors():
        transcript = read_transcript(path, format.value, strict=strict)
        config = SizeFlags(window, target, max_output, buffer).config(transcript)
        points = curve(transcript, ProbeSet.load(probes), one_shot=one_shot, use_usage=not no_usage, config=config)
    if not points:
        console(stderr=True).print(
            f"note: no compaction happened: the view never passed the autocompact threshold of {config.threshold:,} "
            f"tokens (window {config.window:,} less the output reserve and the buffer; the earlier stages kept it "
            "under), and no earlier compaction paid. Lower --window, or pass --max-output and --buffer, to "
            "compact this transcript.", highlight=False)
    if as_json:
        typer.echo(json.dumps([p.to_json() for p in points], indent=2))
    else:
        _print_curve(points)


def _categories(scores: list[Score]) -> list[str]:
    present = {c for s in scores for c in s.by_category}
    return [c for c in CATEGORIES if c in present]


def _cell(score: Score, category: str) -> str:
    kept, total = score.by_category.get(category, (0, 0))
    return f"{kept}/{total}" if total else "-"


def _print_check(result: CheckResult) -> None:
    out = console()
    cats = _categories([m.score for m in result.methods.values()])
    table = Table(title=f"Probe retention (transcript at the cut: {result.tokens_before:,} tokens)")
    table.add_column("method", no_wrap=True)
    for col in ("tokens", "retained", *cats):
        table.add_column(col, justify="right", no_wrap=True)
    for name, m in result.methods.items():
        table.add_row(markup(name), f"{m.tokens:,}", f"{len(m.score.retained)}/{m.score.total} "
                      f"({m.score.fraction:.0%})", *(_cell(m.score, c) for c in cats))
    out = _wide_enough(out, table)
    out.print(table)
    for name, m in result.methods.items():
        if m.score.forgotten:
            out.print(f"[bold]{markup(name)}[/bold] forgot: "
                      + ", ".join(markup(p.id) for p in m.score.forgotten), highlight=False)
    for note in result.notes:
        out.print(f"[yellow]note:[/yellow] {markup(note)}", highlight=False)
    if result.usage is not None:
        from .compact_cmd import describe_sizes
        out.print("worksurface " + markup(describe_sizes(result.usage)), highlight=False)


def _print_curve(points: list[CurvePoint]) -> None:
    out = console()
    if not points:
        out.print("no compaction happened: try a smaller --window")
        return
    cats = _categories([p.score for p in points])
    table = Table(title="Retention after each compaction")
    shots = any(p.one_shot is not None for p in points)
    for col in ("#", "messages", "reason", "counted before", "after", "measured before", "after",
                "retained", *(["one-shot"] if shots else []), *cats):
        table.add_column(col, justify="right", no_wrap=True)
    for i, p in enumerate(points, 1):
        single = [f"{len(p.one_shot.retained)}/{p.one_shot.total}" if p.one_shot else "-"] if shots else []
        sizes = p.sizes or {}
        figures = [f"{sizes[k][unit]:,}" if k in sizes else "-" for unit in ("counted", "measured")
                   for k in ("before", "after")]
        table.add_row(str(i) + (" overflow" if p.overflow else ""), str(p.messages), markup(p.reason or ""),
                      *figures,
                      f"{len(p.score.retained)}/{p.score.total} ({p.score.fraction:.0%})",
                      *single, *(_cell(p.score, c) for c in cats))
    _wide_enough(out, table).print(table)
    unit = (points[0].sizes or {}).get("unit", "counted")
    out.print(f"compactions fired on the {unit} size (counted: worksurface's text count; measured: as the "
                  "provider measures, from the recorded usage)", highlight=False)


def _wide_enough(out: Console, table: Table) -> Console:
    """A console at least as wide as the table: figures cut to '19…' are worse than a wrapped line
    (and output piped to a file gets rich's default 80 columns)."""
    needed = Console(width=1_000).measure(table).maximum
    return out if needed <= out.width else console(width=needed)
