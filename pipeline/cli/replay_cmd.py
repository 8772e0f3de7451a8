"""`worksurface replay`: run a saved transcript through `prepare` call by call, as a harness would."""

from __future__ import annotations

import json
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, List, Optional

import typer
from rich.table import Table

from ..core.config import PRICE_PRESETS
from ..core.errors import WorksurfaceError
from ..formats import read_transcript
from ..offline.sizing import SizeFlags
from ..status.publish import STRATEGIES
from .output import console, markup, shown
from .app import (BUFFER_HELP, MAX_OUTPUT_HELP, NO_AUTOCOMPACT_HELP, PIN_HELP, SESSION_HELP, SESSION_ID_HELP,
                  STRICT_HELP, THRESHOLD_HELP, WINDOW_HELP, InputFormat, app, choices, fail, with_pins)

if TYPE_CHECKING:     # members are STRATEGIES and PRICE_PRESETS; to mypy, str Enums
    class Strategy(str, Enum): ...
    class PricePreset(str, Enum): ...
else:
    Strategy = choices("Strategy", STRATEGIES)
    PricePreset = choices("PricePreset", PRICE_PRESETS)


@app.command("replay")
def replay_command(
    path: Path = typer.Argument(..., help="Transcript file (any supported format)."),
    session: Optional[str] = typer.Option(None, "--session", help=SESSION_HELP + " Default: in memory, as "
                                          "the other commands."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
    format: InputFormat = typer.Option("auto", "--format", help="Input format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    window: Optional[int] = typer.Option(None, "--window", help=WINDOW_HELP),
    target: Optional[int] = typer.Option(None, "--target",
                                         help="Post-compact target in tokens (default 20% of the window)."),
    max_output: Optional[int] = typer.Option(None, "--max-output", help=MAX_OUTPUT_HELP),
    buffer: Optional[int] = typer.Option(None, "--buffer", help=BUFFER_HELP),
    strategy: Optional[Strategy] = typer.Option(None, "--strategy", help="Status strategy (default: configured)."),
    as_json: bool = typer.Option(False, "--json", help="Print every call and the summary as JSON."),
    pin: List[str] = typer.Option([], "--pin", help=PIN_HELP),
    threshold: Optional[int] = typer.Option(None, "--threshold", min=1_000, help=THRESHOLD_HELP),
    no_autocompact: bool = typer.Option(False, "--no-autocompact", help=NO_AUTOCOMPACT_HELP),
    no_usage: bool = typer.Option(False, "--no-usage", help="Count the text only; by default each call is "
                                  "anchored on the input tokens the transcript records."),
    price: Optional[PricePreset] = typer.Option(None, "--price", help="Price preset (default: the config's "
                                                "pricing.preset, anthropic)."),
    price_input: Optional[float] = typer.Option(None, "--price-input", help="USD per million uncached input tokens."),
    price_cache_read: Optional[float] = typer.Option(None, "--price-cache-read",
                                                     help="USD per million input tokens read from the cache."),
    price_cache_write: Optional[float] = typer.Option(None, "--price-cache-write",
                                                      help="USD per million tokens written to the cache."),
    cache_ttl: Optional[float] = typer.Option(None, "--cache-ttl", help="Seconds a cached prefix lives unused."),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines",
                                   help="Also bill the baseline harnesses (worksurface.probes.harnesses) on the same calls."),
) -> None:
    """Replay a transcript one model call at a time and report, per call: view tokens (counted, and
    anchored on the measured usage), tokens served from the previous view's prefix (the provider
    cache), stages fired, status bytes, ms."""
    from ..probes.harnesses import default_harnesses
    from ..engine.pricing import price_model
    from ..offline.replay import replay
    from ..session.session import Session

    try:
        transcript = read_transcript(path, format.value, strict=strict)
        flags = SizeFlags(window, target, max_output, buffer, strategy.value if strategy else None,
                          use_usage=not no_usage)
        config = with_pins(flags.config(transcript).with_overrides(
            autocompact_threshold_tokens=threshold,
            autocompact={"enabled": False} if no_autocompact else None), pin)
        prices = price_model(config.pricing, preset=price.value if price else None, input=price_input,
                             cache_read=price_cache_read,
                             cache_write=price_cache_write, cache_ttl_seconds=cache_ttl)
        # In memory unless --session, as every other command: a session directory also gives the
        # budget's previews a file path, which changes their size (and so where compactions fall).
        with Session.open(session, session_id=session_id, config=config) as kept:
            harnesses = default_harnesses(config.threshold, config.post_compact_target, kept.counter) \
                if baselines else []
            result = replay(transcript.messages, kept, prices, harnesses, use_usage=flags.use_usage,
                            source=transcript.path)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    data = result.to_json()
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    table = Table(title=f"worksurface replay: {markup(path.name)}")
    for col in ("call", "messages", "counted", "measured", "cached", "fired", "status B", "ms"):
        table.add_column(col, justify="left" if col == "fired" else "right")
    for c in result.calls:
        if c.fired or c.call % 10 == 0 or c is result.calls[-1]:
            fired = ", ".join(c.fired) + (f" ({c.compaction['reason']})" if c.compaction else "")
            table.add_row(str(c.call), str(c.messages), f"{c.view_tokens:,}", f"{c.measured_tokens:,}",
                          f"{c.cached_tokens:,}", markup(fired), str(c.status_bytes), f"{c.ms:.1f}")
    out = console()
    out.print(table)
    s = data["summary"]
    out.print(f"{s['calls']} calls, {s['compactions']} compactions, cache share {s['cache_share']:.1%}, "
              f"median {s['median_ms']:.1f} ms per call, {s['status_bytes']:,} status bytes published "
              "(rows shown: calls where a stage fired, every 10th, and the last); view sizes counted "
              "(worksurface's text count) and measured (as the provider measures, from the recorded "
              f"usage); the stages acted on the {s['unit']} size")
    for notice in s["notices"]:
        out.print(f"notice: {shown(notice)}", markup=False, highlight=False)
    cost = s.get("cost") or {}
    if cost:
        others = "; ".join(f"{markup(name)} ${b['cost']:.4f}" for name, b in cost["baselines"].items())
        out.print(f"billed at {markup(cost['prices']['name'])} prices: worksurface ${cost['worksurface']:.4f}"
                  + (f"; on the same calls: {others}" if others else ""))
