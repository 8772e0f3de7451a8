"""When the gateway's process collects reference cycles: never in a request's path if it can help it.

CPython's full collection walks every tracked object; a gateway holding fifty conversations' histories
has millions, so one collection stops every request for tens of milliseconds, at whatever moment the
heap happened to grow by a quarter. Here the objects alive once the gateway has started (imports, the
tokenizer, the compiled graph) are frozen out of every collection, the automatic full collection is
off, and `Collector` runs it on the event loop at a quiet moment instead: every `interval` seconds,
as soon as no request is being prepared or forwarded (and after another interval even if none comes).
Young collections stay automatic: they are short, and most of what a request makes dies young.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

from .logs import event

# The automatic full collection's trigger, high enough never to fire (set_threshold's third value).
NEVER = 2**31 - 1
QUIET_POLL_SECONDS = 0.05


class Collector:
    """Full collections at quiet moments (module doc). `busy()` marks a request under way."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.in_flight = 0
        self.collections = 0
        self._task: asyncio.Task[None] | None = None
        self._thresholds = gc.get_threshold()

    def start(self) -> None:
        """Freeze what is alive now and take the full collection over (event loop only)."""
        gc.collect()
        gc.freeze()
        young, middle, _ = self._thresholds
        gc.set_threshold(young, middle, NEVER)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        gc.set_threshold(*self._thresholds)
        gc.unfreeze()

    def enter(self) -> None:
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            waited_until = time.monotonic() + self.interval
            while self.in_flight and time.monotonic() < waited_until:
                await asyncio.sleep(QUIET_POLL_SECONDS)
            started = time.perf_counter()
            found = gc.collect()
            self.collections += 1
            event(logging.DEBUG, "collected", unreachable=found, in_flight=self.in_flight,
                  ms=round((time.perf_counter() - started) * 1000, 1))
