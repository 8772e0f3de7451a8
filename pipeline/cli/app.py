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


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print a one-line error to stderr and return the Exit to raise (no traceback for user errors)."""
    typer.echo(f"worksurface: error: {message}", err=True)
    return typer.Exit(code)
