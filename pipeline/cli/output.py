"""What the command line prints for a person: every name, path and quoted text passes one escaper.

A file name, a path, a tool name or a line quoted from a transcript can hold what a terminal acts on
instead of showing (an escape sequence that clears the screen, sets the window title or opens an
OSC 8 link, a carriage return that writes over the line, a C1 control, a bidi override), and rich
reads `[...]` in it as markup (`[link=...]` makes a link too). `shown` writes the controls as
visible escapes (core.escape.for_terminal); `markup` also escapes rich markup, for values placed in a
markup string. The consoles `console` makes escape whatever control characters still reach them (a
table cell, a Text), after rich's layout and before its own styling. Machine output (JSON, a
transcript, a page written to stdout) is data, written as it is.
"""

from __future__ import annotations

import logging
from typing import Any

import typer
from rich.console import Console, ConsoleOptions, RenderableType, RenderHook, RenderResult
from rich.markup import escape as escape_markup
from rich.segment import Segment
from rich.text import Text

from ..core.escape import for_terminal


def shown(value: object, *, lines: bool = False) -> str:
    """`value` as text a terminal shows as written (controls as visible escapes; newlines and tabs
    kept only when `lines`)."""
    return for_terminal(str(value), lines=lines)


def markup(value: object) -> str:
    """`value` for a rich markup string: controls as visible escapes, `[` as rich's escape."""
    return escape_markup(for_terminal(str(value)))


def text(value: object, *, lines: bool = False) -> Text:
    """`value` as a rich Text (never read as markup), controls as visible escapes."""
    return Text(shown(value, lines=lines))


def echo(message: object, *, err: bool = False, nl: bool = True, lines: bool = False) -> None:
    """A message for a person (a notice, a status line naming paths) on one line, escaped as `shown`
    (a newline inside a name cannot start a line that passes for another message); `lines` keeps the
    line breaks of a text meant to span lines (the status bar)."""
    typer.echo(shown(message, lines=lines), err=err, nl=nl)


class _Escaped:
    """A renderable whose text segments come out escaped: what rich laid out, minus anything a
    terminal would act on (rich's own styles and control segments are left alone)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            if segment.control or segment.text == for_terminal(segment.text, lines=True):
                yield segment
            else:
                yield Segment(for_terminal(segment.text, lines=True), segment.style)


class _EscapingHook(RenderHook):
    def process_renderables(self, renderables: list[Any]) -> list[Any]:
        return [_Escaped(r) for r in renderables]


def console(*, stderr: bool = False, width: int | None = None) -> Console:
    """A rich Console for output meant for a person, that escapes the control characters in whatever
    it prints (see the module docstring)."""
    made = Console(stderr=stderr, width=width)
    made.push_render_hook(_EscapingHook())
    return made


class TerminalFormatter(logging.Formatter):
    """Log records (worksurface's notices) with their message on one line, escaped as `shown`: a
    notice names files and quotes transcripts."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = shown(record.message)
        return super().formatMessage(record)

