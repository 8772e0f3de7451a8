"""`worksurface batch`: run compact, probe, replay or inspect over many transcripts on Dask workers."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, Any, List, Optional

import typer
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table
from rich.text import Text

from ..batch.results import FORMATS as RESULT_FORMATS
from ..batch.tasks import TASKS
from ..core.errors import WorksurfaceError
from ..core.lazy import require_extra
from .output import console as make_console, echo, markup
from .app import STRICT_HELP, WINDOW_HELP, app, choices, fail

if TYPE_CHECKING:     # members are TASKS and RESULT_FORMATS; to mypy, str Enums
    class TaskName(str, Enum): ...
    class ResultsFormat(str, Enum): ...
else:
    TaskName = choices("TaskName", TASKS)
    ResultsFormat = choices("ResultsFormat", RESULT_FORMATS)

# Exit status after Ctrl-C, as a shell reports a process ended by SIGINT.
INTERRUPTED_EXIT = 130
# Failed transcripts listed after the summary (the table has them all).
SHOW_FAILURES = 10


class _RateColumn(ProgressColumn):
    """Transcripts per second over the run so far."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f}/s" if speed else "-/s", style="progress.data.speed")


def _targets(value: str) -> tuple[int, ...]:
    try:
        targets = tuple(int(t.replace("_", "")) for t in value.split(",") if t.strip())
    except ValueError:
        raise fail(f"--targets must be comma-separated token counts, not {value!r}") from None
    if not targets:
        raise fail("--targets needs at least one token count")
    return targets


@app.command("batch")
def batch(
    inputs: List[str] = typer.Argument(..., metavar="DIR_OR_GLOB...",
                                       help="Folders (searched recursively), globs, transcript files, or "
                                            "@FILE manifests listing one path per line."),
    task_name: TaskName = typer.Option(..., "--task", "-t", help="What to run on each transcript."),
    probes_from: str = typer.Option("derive", "--probes-from",
                                    help="probe: 'derive' (probes derived from each transcript) or a folder "
                                         "of probe files, matched by their 'transcript' path or by name."),
    targets: str = typer.Option("4000,10000,20000,40000", "--targets",
                                help="Post-compact targets in tokens; one row per transcript and target "
                                     "(not used by inspect)."),
    window: Optional[int] = typer.Option(None, "--window", help=WINDOW_HELP),
    no_usage: bool = typer.Option(False, "--no-usage",
                                  help="Count the text only; by default sizes are anchored on the input tokens "
                                       "each transcript records the provider measured."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler",
                                            help="Address of a running Dask scheduler (tcp://host:8786); "
                                                 "default: start a local cluster."),
    workers: int = typer.Option(os.cpu_count() or 2, "--workers", "-w",
                                help="Worker processes of the local cluster; 0 runs serially in this process."),
    out: Path = typer.Option(Path("batch-results"), "-o", "--out", help="Results folder."),
    results_format: ResultsFormat = typer.Option("parquet", "--results-format", help="Format of the results table."),
    resume: bool = typer.Option(False, "--resume",
                                help="Skip transcripts already in the results (same path and content hash)."),
    force: bool = typer.Option(False, "--force", help="Replace results already in the folder."),
    max_bytes: int = typer.Option(64 * 1024 * 1024, "--max-bytes",
                                  help="Files larger than this become error rows instead of being parsed."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
) -> None:
    """Run one task per transcript on Dask workers and write one row per transcript and target.

    Rows go to OUT/results.parquet (or .jsonl), with OUT/manifest.txt listing the transcripts and
    OUT/run.json the options and runs. A file that cannot be read or processed becomes an error row;
    Ctrl-C stops the workers and keeps every finished row (continue with --resume).
    """
    try:
        require_extra("batch", "worksurface batch", "distributed", "dask",
                      *(("pyarrow",) if results_format.value == "parquet" else ()))
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    from ..batch.job import BatchOptions, execute, plan
    from ..batch.results import summarize

    task = task_name.value
    options = BatchOptions(inputs=inputs, task=task, out=out, targets=_targets(targets), probes_from=probes_from,
                           window=window, fmt=results_format.value, scheduler=scheduler, workers=workers,
                           resume=resume, force=force, max_bytes=max_bytes, use_usage=not no_usage, strict=strict)
    console = make_console(stderr=True)
    try:
        p = plan(options)
        where = scheduler or ("this process" if workers == 0 else f"a local cluster of {workers} workers")
        console.print(f"{len(p.specs)} transcripts to run ({len(p.discovery.skipped)} files skipped as not "
                      f"transcripts" + (f", {p.skipped_done} already in the results" if resume else "")
                      + f") on {markup(where)}", highlight=False)
        progress = Progress(TextColumn(f"[bold]{task}[/bold]"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("[red]{task.fields[failed]} failed"), _RateColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)
        bar = progress.add_task(task, total=len(p.specs), failed=0)
        failures = 0

        def on_rows(spec: Any, rows: list[dict[str, Any]]) -> None:
            nonlocal failures
            failures += any(r.get("error") for r in rows)
            progress.update(bar, advance=1, failed=failures)

        with progress:
            outcome = execute(p, on_rows=on_rows)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:  # before the run started: nothing was written
        console.print("[yellow]interrupted[/yellow] before the batch started; nothing written")
        raise typer.Exit(INTERRUPTED_EXIT) from None
    try:
        _print_summary(summarize(outcome.rows), outcome.rows, task, make_console())
    except KeyboardInterrupt:  # the results are saved; only the printout is cut short
        outcome.stats.interrupted = True
    store = outcome.store
    assert store is not None
    stats = outcome.stats
    console.print(f"{stats.done} transcripts in {stats.seconds:.1f} s, {stats.failed} with errors; "
                  f"{len(outcome.rows)} rows in {markup(str(store.table_path))}", highlight=False, soft_wrap=True)
    if stats.interrupted:
        console.print(f"[yellow]interrupted[/yellow]: {stats.done} of {len(p.specs)} transcripts done and kept; "
                      "run the same command with --resume to continue", highlight=False)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exit with our status, not from another Ctrl-C
        raise typer.Exit(INTERRUPTED_EXIT)


def _print_summary(summary: list[dict[str, Any]], rows: list[dict[str, Any]], task: str, console: Console) -> None:
    """Per format (and target): transcripts, failures, mean tokens and the task's own figures."""
    from ..batch.results import summary_layout

    if not summary:
        return
    methods = [m for m in summary[0]["retention"]]
    table = Table(title=f"worksurface batch: {task}")
    head, body = summary_layout(summary, task, methods)
    for col in head:
        table.add_column(col, justify="left" if col == "format" else "right", no_wrap=True)
    for cells in body:
        table.add_row(*cells)
    if methods:
        table.caption = "retention: mean share of probes the view retains"
    # Figures cut to '19…' are worse than a wrapped line (and piped output gets rich's 80 columns).
    needed = Console(width=1_000).measure(table).maximum
    (console if needed <= console.width else make_console(width=needed)).print(table)
    failed = sorted({(r["path"], r.get("error") or "") for r in rows if r.get("error")})
    for path, error in failed[:SHOW_FAILURES]:
        console.print(f"[red]failed[/red] {markup(path)}: {markup(error)}", highlight=False, soft_wrap=True)
    if len(failed) > SHOW_FAILURES:
        console.print(f"... and {len(failed) - SHOW_FAILURES} more (rows with an 'error' in the table)")


def report_batch_page(directory: Path, out: Optional[Path]) -> Path:
    """`worksurface report --batch DIR`: write the batch page of a results folder (default
    DIR/report.html) and say where; errors exit with status 2."""
    from ..batch.page import load_page_data, render_batch_page
    from ..core.fileio import STDOUT, atomic_write, output_file

    try:
        to_stdout = out is not None and output_file(out, stdout=True) is None
        destination = out or directory / "report.html"
        if out is None:
            output_file(destination)
        page = render_batch_page(load_page_data(directory))
        if to_stdout:
            typer.echo(page, nl=False)
            return Path(STDOUT)
        atomic_write(destination, page)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{destination}: cannot write the report ({exc.strerror or exc})") from None
    echo(f"wrote {destination} ({len(page.encode('utf-8')) / 1024:,.0f} KB)")
    return destination
