"""The Dask driver of `worksurface batch`: one task per transcript on dask.distributed workers.

By default a `LocalCluster` of N single-threaded worker processes (the tasks are CPU-bound Python, so
threads would share one GIL); with a scheduler address, an existing cluster. Each finished transcript's
rows go to `on_rows` as they arrive, so the caller can write them out and count progress. A task that
raises is retried once (`retries=1`); a worker that dies mid-task has its task rescheduled once on the
local cluster (`allowed-failures` 1), and a task that kills its worker twice becomes an error row.
Ctrl-C cancels what is left and stops the local cluster; rows already delivered stay delivered.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from distributed import WorkerPlugin

from ..core.errors import WorksurfaceError
from .tasks import WORKER_LOST, Row, TaskSpec, error_row, run_task

# Dask retries a task whose function raised this many times (our tasks turn input errors into rows,
# so this covers failures around them: deserialising the spec, a worker's memory guard).
TASK_RETRIES = 1
# How many times a task may be running on a worker that dies before dask gives up on it: one retry,
# so a file that crashes its worker every time costs two workers, not the whole cluster.
ALLOWED_FAILURES = 1
# Seconds to wait for a scheduler at --scheduler before saying it is unreachable.
CONNECT_TIMEOUT = 10
# A worker process must never restart or hang the driver's exit for long when the batch stops.
CLOSE_TIMEOUT = 10

TaskFn = Callable[[TaskSpec], list[Row]]
RowsCallback = Callable[[TaskSpec, list[Row]], None]


class ClusterError(WorksurfaceError):
    """The scheduler cannot be reached or the local cluster cannot start."""


@dataclass
class RunStats:
    """What a run did: transcripts finished, those with an error row, wall time, and where it ran."""

    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    scheduler: str = ""
    workers: int = 0


def failed(rows: Sequence[Row]) -> bool:
    return any(r.get("error") for r in rows)


def run_local(specs: Sequence[TaskSpec], on_rows: RowsCallback, fn: TaskFn = run_task) -> RunStats:
    """Run every spec in this process, one after the other (`--workers 0`, and the serial baseline)."""
    stats = RunStats(scheduler="serial", workers=0)
    started = time.perf_counter()
    try:
        for spec in specs:
            rows = fn(spec)
            stats.done += 1
            stats.failed += failed(rows)
            on_rows(spec, rows)
    except KeyboardInterrupt:
        stats.interrupted = True
    stats.seconds = time.perf_counter() - started
    return stats


def local_cluster(workers: int) -> Any:
    """A LocalCluster of `workers` single-threaded processes that reschedules a task whose worker
    died once (`ALLOWED_FAILURES`), without a dashboard, quiet."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}), sigint_ignored():
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                            silence_logs=logging.CRITICAL)


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while the cluster starts. A terminal's Ctrl-C goes to the whole process group,
    and the worker processes spawned now inherit the ignored disposition (it survives exec, whichever
    thread spawns them), so a Ctrl-C never kills a worker mid-import or mid-task: the driver catches
    it and stops the workers itself. A Ctrl-C during these seconds of start-up is dropped (press it
    again once the progress bar moves); one while the workers stop is dropped too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def prepare_local(client: Any) -> None:
    """Ctrl-C reaches every process of the terminal's group: the local workers ignore it and are
    stopped by the driver, so they neither die mid-task nor print tracebacks."""
    client.register_plugin(IgnoreInterrupt(), name="worksurface-ignore-interrupt")


def run_dask(specs: Sequence[TaskSpec], on_rows: RowsCallback, *, scheduler: str | None = None,
             workers: int = 2, fn: TaskFn = run_task, on_start: Callable[[Any], None] | None = None) -> RunStats:
    """Run every spec as one task on a Dask cluster: the one at `scheduler`, else a new local cluster
    of `workers` processes. `on_start` gets the connected Client (for callers that watch the cluster).
    Ctrl-C (KeyboardInterrupt) is caught: remaining tasks are cancelled, the local cluster is stopped,
    and the stats say `interrupted`."""
    from distributed import Client, as_completed

    stats = RunStats()
    cluster = None
    client = None
    started = time.perf_counter()
    futures: list[Any] = []
    try:
        try:
            if scheduler:
                client = Client(scheduler, timeout=CONNECT_TIMEOUT)
            else:
                cluster = local_cluster(workers)
                client = Client(cluster)
                prepare_local(client)
        except (OSError, TimeoutError) as exc:
            where = f"the scheduler at {scheduler}" if scheduler else "a local cluster"
            raise ClusterError(f"cannot connect to {where}: {exc}") from None
        stats.scheduler = str(client.scheduler.address) if client.scheduler is not None else str(scheduler or "")
        stats.workers = len(client.scheduler_info().get("workers", {}))
        if on_start is not None:
            on_start(client)
        by_key: dict[str, TaskSpec] = {}
        for i, spec in enumerate(specs):
            key = f"worksurface-{spec.task}-{i}"
            by_key[key] = spec
            futures.append(client.submit(fn, spec, key=key, retries=TASK_RETRIES, pure=False))
        for future in as_completed(futures):
            spec = by_key[future.key]
            rows = _rows_of(future, spec)
            future.release()
            stats.done += 1
            stats.failed += failed(rows)
            on_rows(spec, rows)
    except KeyboardInterrupt:
        stats.interrupted = True
    finally:
        stats.seconds = time.perf_counter() - started
        # A second Ctrl-C while the workers stop would leave them running and the rows unsaved.
        with sigint_ignored():
            if stats.interrupted and client is not None and futures:
                try:
                    client.cancel(futures)
                except Exception:  # the cluster may already be going down with the interrupt
                    pass
            if client is not None:
                client.close(timeout=CLOSE_TIMEOUT)
            if cluster is not None:
                cluster.close(timeout=CLOSE_TIMEOUT)
    return stats


class IgnoreInterrupt(WorkerPlugin):
    """A worker plugin: the worker process ignores SIGINT (the driver handles Ctrl-C and stops it)."""

    def setup(self, worker: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _rows_of(future: Any, spec: TaskSpec) -> list[Row]:
    """A finished future's rows, or an error row when the task failed on every attempt."""
    from distributed import KilledWorker

    if future.status == "finished":
        rows: list[Row] = future.result()
        return rows
    exc = future.exception()
    base: Row = {"path": spec.path, "content_hash": None, "size_bytes": None, "format": None,
                 "task": spec.task, "target": None}
    if isinstance(exc, KilledWorker):
        row = error_row(base, exc)
        row["error"] = (f"the worker running this transcript died {ALLOWED_FAILURES + 1} times "
                        "(out of memory or a crash); retried on --resume")
        row["error_kind"] = WORKER_LOST
    else:
        row = error_row(base, exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))
    row["worker"] = row["pid"] = None  # it ran nowhere to completion
    return [row]
