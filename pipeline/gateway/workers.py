"""The threads the gateway's per-request work runs on (reading a request, `Session.prepare`, writing
the forwarded body, opening and closing sessions), so the event loop only moves bytes: a stream
relays while another conversation is prepared, and a slow conversation (a compaction) holds one
thread, never the loop or the other conversations."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class Workers:
    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="worksurface-gateway")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
