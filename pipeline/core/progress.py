"""Progress of long work (reading a file, compacting, replaying calls), reported to whoever listens.

The library reports; it never draws. The command line listens with a progress bar on stderr when
stderr is a terminal (`cli/progress.py`), and nothing listens elsewhere, so a report costs one context
variable lookup. A listener is per context (thread, task), so a gateway's requests never share one.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Protocol


class ProgressListener(Protocol):
    """Told what is being done now, and how far it got when that is countable."""

    def phase(self, description: str, total: int | None = None) -> None: ...

    def advance(self, done: int) -> None: ...

    def finish(self) -> None: ...


_LISTENER: ContextVar[ProgressListener | None] = ContextVar("worksurface_progress", default=None)


@contextmanager
def listening(listener: ProgressListener) -> Iterator[ProgressListener]:
    """Send this context's progress to `listener` until the block ends."""
    token = _LISTENER.set(listener)
    try:
        yield listener
    finally:
        _LISTENER.reset(token)
        listener.finish()


def phase(description: str, total: int | None = None) -> None:
    """A step of the work begins (`total`: how many units it counts, for `advance`)."""
    listener = _LISTENER.get()
    if listener is not None:
        listener.phase(description, total)


def advance(done: int) -> None:
    """How many units of the current phase are done."""
    listener = _LISTENER.get()
    if listener is not None:
        listener.advance(done)
