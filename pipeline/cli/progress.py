"""What a command is doing, on stderr, while it takes long: a rich progress line when stderr is a
terminal, nothing at all when it is not (a pipe, a file, CI), so output stays byte-for-byte the same.

It shows only after `DELAY_SECONDS`, so commands that finish sooner draw nothing, and it is cleared
when the command ends.
"""

from __future__ import annotations

import sys
import time
import unicodedata
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from ..core import progress

# Commands quicker than this show nothing (the "more than about two seconds").
DELAY_SECONDS = 2.0


class TerminalProgress:
    """A `core.progress` listener drawing one transient progress line on a terminal's stderr."""

    def __init__(self, console: Console, delay: float = DELAY_SECONDS) -> None:
        self._console = console
        self._delay = delay
        self._started = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._pending: tuple[str, int | None] | None = None

    def phase(self, description: str, total: int | None = None) -> None:
        self._pending = (_visible(description), total)
        self._show()

    def advance(self, done: int) -> None:
        self._show()
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _show(self) -> None:
        if self._bar is None:
            if time.monotonic() - self._started < self._delay:
                return
            self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=self._console, transient=True)
            self._bar.start()
        if self._pending is not None:
            description, total = self._pending
            self._pending = None
            if self._task is not None:
                self._bar.remove_task(self._task)
            self._task = self._bar.add_task(description, total=total)


def _visible(text: str) -> str:
    """Control and format characters (a file name's ESC, CR, bidi overrides) as visible escapes."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)


@contextmanager
def on_terminal() -> Iterator[None]:
    """Progress of the command's work on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield
        return
    with progress.listening(TerminalProgress(Console(stderr=True))):
        yield
