"""`worksurface status`: the status bar derived from a saved transcript."""

from __future__ import annotations

import json
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, Optional

import typer
from rich.table import Table

from ..core.config import Config
from ..core.errors import WorksurfaceError
from ..formats import read_transcript
from ..status.display import display
from ..status.publish import DEFAULT_STRATEGY, STRATEGIES
from ..status.render import render
from ..status.replay import Replay, replay
from .output import console, echo, markup, text
from .app import InputFormat, app, choices, fail, STRICT_HELP

# Message ids are UUIDs in Claude Code; the first characters are enough to find one.
SHORT_ID = 8
if TYPE_CHECKING:     # the members are STRATEGIES; to mypy, a str Enum
    class Strategy(str, Enum): ...
else:
    Strategy = choices("Strategy", STRATEGIES)


@app.command()
def status(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    strategy: Strategy = typer.Option(DEFAULT_STRATEGY, "--strategy", help="Publish strategy to replay."),
    format: InputFormat = typer.Option("auto", "--format", help="Input format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    window: Optional[int] = typer.Option(None, "--window", help="Context window in tokens (default 200000)."),
    as_json: bool = typer.Option(False, "--json", help="Print the snapshot (fields with source and "
                                                       "freshness, signals) and the replay as JSON."),
) -> None:
    """Derive the status bar from a saved transcript, replaying its publication under a strategy."""
    try:
        transcript = read_transcript(path, format.value, strict=strict)
        result = replay(transcript.messages, strategy=strategy.value, window=window or Config.load().window)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    bar = render(result.snapshot, epoch=result.state.epoch, seq=result.state.seq, now=result.now)
    if as_json:
        typer.echo(json.dumps({"path": str(path), "snapshot": result.snapshot.to_json(),
                               "replay": result.to_json(), "rendered": bar}, indent=2, ensure_ascii=False))
        return
    _print(result, bar, path)


def _print(result: Replay, bar: str, path: Path) -> None:
    table = Table(title=f"worksurface status: {markup(path.name)}")
    for col in ("section", "field", "value", "source", "message", "freshness"):
        table.add_column(col)
    for section, fields in result.snapshot.sections.items():
        for name, f in fields.items():
            # Text cells: values such as "[x] done" must not be read as rich markup.
            table.add_row(markup(section), markup(name), text(display(section, name, f), lines=True),
                          markup(f.source), markup((f.message_id or "")[:SHORT_ID]), markup(f.freshness))
    out = console()
    out.print(table)
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(result.kinds.items())) or "none"
    out.print(text(
        f"strategy {result.state.strategy}: {result.publications} publications ({kinds}), "
        f"{result.state.epoch} epoch(s), {result.bytes_published:,} bytes published; "
        f"{len(result.state.published_ids)} status message(s) in view at the end "
        f"({result.visible_bytes:,} bytes)"))
    # The bar quotes the transcript (todo items, test ids): shown as the model reads it, controls escaped.
    echo(bar, lines=True)
