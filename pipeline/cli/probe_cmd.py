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
from .app import BUFFER_HELP, InputFormat, MAX_OUTPUT_HELP, app, fail, STRICT_HELP

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
            Console(stderr=True).print(f"{len(probes)} probes written to {output}", highlight=False)


@probe_app.command("check")
def check_cmd(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    probes: Path = typer.Option(..., "--probes", help="Probe file (JSON)."),
    at: Optional[str] = typer.Option(None, "--at", help=_AT_HELP),
    window: Optional[int] = typer.Option(None, "--window", help="Context window (default: configured)."),
    target: Optional[int] = typer.Option(None, "--target", help="Post-compact target tokens "
                                         "(default: configured post_compact_target)."),
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
        result = check(read_transcript(path, format.value, strict=strict), ProbeSet.load(probes), at=at, window=window,
                       target=target, baselines=names, use_usage=not no_usage)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        _print_check(result)


@probe_app.command("curve")
def curve_cmd(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    probes: Path = typer.Option(..., "--probes", help="Probe file (JSON)."),
    window: int = typer.Option(..., "--window", help="A window small enough to force several compactions."),
    target: Optional[int] = typer.Option(None, "--target", help="Post-compact target tokens "
                                         "(default: configured post_compact_target)."),
    max_output: Optional[int] = typer.Option(None, "--max-output", help=MAX_OUTPUT_HELP),
    buffer: Optional[int] = typer.Option(None, "--buffer", help=BUFFER_HELP),
    one_shot: bool = typer.Option(False, "--one-shot",
                                  help="Also score one forced compaction of the same messages at each point "
                                       "(what the repeated compactions should keep up with)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    format: InputFormat = typer.Option("auto", "--format", help="Transcript format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
) -> None:
    """Replay the whole transcript and report retention after each compaction (a compaction that
    overflows is marked and the replay goes on)."""
    with _errors():
        given = {"post_compact_target_tokens": target, "max_output": max_output, "autocompact_buffer": buffer}
        overrides = {k: v for k, v in given.items() if v is not None}
        points = curve(read_transcript(path, format.value, strict=strict), ProbeSet.load(probes), window=window,
                       one_shot=one_shot, **overrides)
    if not points:
        from ..core.config import Config
        threshold = Config().with_overrides(window=window, **overrides).threshold
        Console(stderr=True).print(
            f"note: no compaction happened: the view never passed the autocompact threshold of {threshold:,} "
            f"tokens (window {window:,} less the output reserve and the buffer; the earlier stages kept it under). "
            "Lower --window, or pass --max-output and --buffer, to compact this transcript.", highlight=False)
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
    console = Console()
    cats = _categories([m.score for m in result.methods.values()])
    table = Table(title=f"Probe retention (transcript at the cut: {result.tokens_before:,} tokens)")
    table.add_column("method", no_wrap=True)
    for col in ("tokens", "retained", *cats):
        table.add_column(col, justify="right", no_wrap=True)
    for name, m in result.methods.items():
        table.add_row(name, f"{m.tokens:,}", f"{len(m.score.retained)}/{m.score.total} "
                      f"({m.score.fraction:.0%})", *(_cell(m.score, c) for c in cats))
    console = _wide_enough(console, table)
    console.print(table)
    for name, m in result.methods.items():
        if m.score.forgotten:
            console.print(f"[bold]{name}[/bold] forgot: "
                          + ", ".join(f"{p.id}" for p in m.score.forgotten), highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    if result.usage is not None:
        before, after = result.usage["before"], result.usage["after"]
        console.print(f"worksurface size: counted {before['counted']:,} -> {after['counted']:,} tokens, anchored on "
                      f"measured usage {before['anchored']:,} -> {after['anchored']:,}"
                      + ("" if result.usage["anchor"] else " (no usage recorded)"), highlight=False)


def _print_curve(points: list[CurvePoint]) -> None:
    console = Console()
    if not points:
        console.print("no compaction happened: try a smaller --window")
        return
    cats = _categories([p.score for p in points])
    table = Table(title="Retention after each compaction")
    shots = any(p.one_shot is not None for p in points)
    for col in ("#", "messages", "tokens before", "after", "retained", *(["one-shot"] if shots else []), *cats):
        table.add_column(col, justify="right", no_wrap=True)
    for i, p in enumerate(points, 1):
        single = [f"{len(p.one_shot.retained)}/{p.one_shot.total}" if p.one_shot else "-"] if shots else []
        table.add_row(str(i) + (" overflow" if p.overflow else ""), str(p.messages), f"{p.tokens_before:,}",
                      f"{p.tokens_after:,}", f"{len(p.score.retained)}/{p.score.total} ({p.score.fraction:.0%})",
                      *single, *(_cell(p.score, c) for c in cats))
    _wide_enough(console, table).print(table)


def _wide_enough(console: Console, table: Table) -> Console:
    """A console at least as wide as the table: figures cut to '19…' are worse than a wrapped line
    (and output piped to a file gets rich's default 80 columns)."""
    needed = Console(width=1_000).measure(table).maximum
    return console if needed <= console.width else Console(width=needed)
