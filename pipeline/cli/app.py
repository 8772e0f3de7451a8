"""The `worksurface` command: one typer app; each command lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="worksurface",
    help="Keep an LLM agent's context healthy: inspect, compact, probe and replay transcripts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
