"""gateway.collector: the full collection runs at a quiet moment, never while a request is under way
(unless none comes for another interval), and the process's own collector settings come back at stop."""

from __future__ import annotations

import asyncio
import gc

from worksurface.gateway.collector import NEVER, Collector


def test_full_collections_wait_for_a_quiet_moment_and_settings_come_back() -> None:
    before = gc.get_threshold()

    async def scenario() -> tuple[int, int, int, bool]:
        collector = Collector(interval=0.05)
        collector.start()
        frozen, taken_over = gc.get_freeze_count(), gc.get_threshold()[2] == NEVER
        collector.enter()                       # a request under way
        await asyncio.sleep(0.08)
        while_busy = collector.collections      # the first interval passed; the request still holds it
        collector.leave()
        await asyncio.sleep(0.12)
        after_quiet = collector.collections
        await collector.stop()
        return frozen, while_busy, after_quiet, taken_over

    frozen, while_busy, after_quiet, taken_over = asyncio.run(scenario())
    assert frozen > 0 and taken_over
    assert while_busy == 0 and after_quiet >= 1
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_request_that_never_ends_delays_a_collection_by_one_interval_only() -> None:
    async def scenario() -> int:
        collector = Collector(interval=0.03)
        collector.start()
        collector.enter()                       # never left (a stream the client dropped unread)
        await asyncio.sleep(0.2)
        count = collector.collections
        await collector.stop()
        return count

    assert asyncio.run(scenario()) >= 1
