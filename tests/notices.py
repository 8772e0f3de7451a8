"""The worksurface logger's notices, caught on the logger itself (its propagation may be off, so
pytest's caplog would not see them)."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator


class _Notices(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


@contextmanager
def worksurface_notices() -> Iterator[list[str]]:
    """The messages of the WARNING (and higher) records the package logs inside the block."""
    logger, notices = logging.getLogger("worksurface"), _Notices()
    level = logger.level
    logger.addHandler(notices)
    logger.setLevel(logging.WARNING)
    try:
        yield notices.seen
    finally:
        logger.removeHandler(notices)
        logger.setLevel(level)
