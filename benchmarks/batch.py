"""`python -m benchmarks.batch [--transcripts 1000] [--task compact] [--workers 2] [--json OUT]`:
`worksurface batch` serially against a local Dask cluster.

Generates small sessions with the fixture generator (`fixturegen`, 6,000 tokens each,
one seed per file) into a temp folder, then runs the same task on all of them:

- serially, in a fresh subprocess (the `--workers 0` path): throughput and the process's peak RSS;
- on a local cluster of `--workers` processes (the default `worksurface batch` path): throughput, each
  worker's peak RSS (`ru_maxrss` of the worker process, which starts fresh), cluster start-up time;
- a no-op task on the same cluster, once per transcript: the scheduler's round trip per task
  (submit, schedule, run nothing, return the result to the driver), i.e. its overhead per task.

Workers are warmed up (worksurface imported) before the timed runs, so the figures are steady state.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from worksurface.batch.job import BatchOptions, plan
from worksurface.batch.run import local_cluster, prepare_local, run_dask, run_local
from worksurface.batch.tasks import TaskSpec
from fixturegen import MIN_TOKENS, write_session

from .machine import describe, machine_info

DEFAULT_TRANSCRIPTS = 1_000
# The smallest session the generator makes: a corpus of many short sessions, where per-task overhead
# matters most.
SESSION_TOKENS = MIN_TOKENS
DEFAULT_TARGET = 4_000


def noop(spec: TaskSpec) -> list[dict[str, Any]]:
    """A task that does nothing: what is left of its time is the scheduler's."""
    return []


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _specs(folder: Path, task: str, target: int) -> list[TaskSpec]:
    return plan(BatchOptions([str(folder)], task, folder.parent / "unused", targets=(target,))).specs


def serial_child(folder: str, task: str, target: int) -> None:
    """Run in a fresh process: time the serial batch and print {seconds, failed, peak_rss_mb} as JSON."""
    specs = _specs(Path(folder), task, target)
    failed = 0

    def count(spec: TaskSpec, rows: list[dict[str, Any]]) -> None:
        nonlocal failed
        failed += any(r.get("error") for r in rows)

    run_local(specs[:1], lambda s, r: None)  # imports and first-call caches, as a warm worker has them
    started = time.perf_counter()
    stats = run_local(specs, count)
    print(json.dumps({"seconds": time.perf_counter() - started, "done": stats.done, "failed": failed,
                      "peak_rss_mb": round(_peak_rss_mb(), 1)}))


def run(transcripts: int = DEFAULT_TRANSCRIPTS, task: str = "compact", workers: int = 2,
        target: int = DEFAULT_TARGET) -> dict[str, Any]:
    from distributed import Client

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ws-batch-bench-") as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        started = time.perf_counter()
        for seed in range(transcripts):
            write_session(folder / f"s{seed:05d}.jsonl", SESSION_TOKENS, seed)
        generated_s = time.perf_counter() - started

        child = subprocess.run([sys.executable, "-m", "benchmarks.batch", "--serial-child", str(folder), task,
                                str(target)], capture_output=True, text=True, check=True)
        serial = json.loads(child.stdout.strip().splitlines()[-1])

        specs = _specs(folder, task, target)
        started = time.perf_counter()
        cluster = local_cluster(workers)
        client = Client(cluster)
        prepare_local(client)
        startup_s = time.perf_counter() - started
        try:
            run_dask(specs[:workers * 2], lambda s, r: None, scheduler=cluster.scheduler_address)  # warm-up
            failed = 0

            def count(spec: TaskSpec, rows: list[dict[str, Any]]) -> None:
                nonlocal failed
                failed += any(r.get("error") for r in rows)

            stats = run_dask(specs, count, scheduler=cluster.scheduler_address)
            peaks = client.run(_peak_rss_mb)
            noop_stats = run_dask(specs, lambda s, r: None, scheduler=cluster.scheduler_address, fn=noop)
        finally:
            client.close()
            cluster.close()
    return {
        "transcripts": transcripts, "session_tokens": SESSION_TOKENS, "task": task, "target": target,
        "workers": workers, "generate_seconds": round(generated_s, 1),
        "serial": {"seconds": round(serial["seconds"], 2), "per_s": round(serial["done"] / serial["seconds"], 1),
                   "failed": serial["failed"], "peak_rss_mb": serial["peak_rss_mb"]},
        "cluster": {"seconds": round(stats.seconds, 2), "per_s": round(stats.done / stats.seconds, 1),
                    "failed": failed, "startup_seconds": round(startup_s, 2),
                    "peak_rss_mb_per_worker": sorted(round(v, 1) for v in peaks.values())},
        "speedup": round(serial["seconds"] / stats.seconds, 2),
        "scheduler_overhead_ms_per_task": round(noop_stats.seconds / noop_stats.done * 1000, 2),
        "noop_per_s": round(noop_stats.done / noop_stats.seconds, 1),
        # Other processes' load skews every figure: recorded so a reader can tell.
        "load_average": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
    }


def render(result: dict[str, Any], machine: str) -> str:
    s, c = result["serial"], result["cluster"]
    lines = [
        f"worksurface batch --task {result['task']} --targets {result['target']}: {result['transcripts']:,} "
        f"generated sessions of ~{result['session_tokens']:,} tokens ({machine})",
        "",
        "| run | wall s | transcripts/s | failed | peak RSS MB |",
        "|---|---:|---:|---:|---|",
        f"| serial (1 process) | {s['seconds']} | {s['per_s']} | {s['failed']} | {s['peak_rss_mb']} |",
        f"| local cluster, {result['workers']} workers | {c['seconds']} | {c['per_s']} | {c['failed']} | "
        f"{', '.join(map(str, c['peak_rss_mb_per_worker']))} (per worker) |",
        "",
        f"Speed-up {result['speedup']}x; cluster start-up {c['startup_seconds']} s (not in the wall time); "
        f"scheduler overhead {result['scheduler_overhead_ms_per_task']} ms per task (no-op tasks: "
        f"{result['noop_per_s']}/s). 1-minute load average {result['load_average']['before']} before, "
        f"{result['load_average']['after']} after.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch", description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", type=int, default=DEFAULT_TRANSCRIPTS)
    parser.add_argument("--task", default="compact", choices=("compact", "probe", "replay", "inspect"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", type=int, default=DEFAULT_TARGET)
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    parser.add_argument("--serial-child", nargs=3, metavar=("FOLDER", "TASK", "TARGET"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serial_child:
        folder, task, target = args.serial_child
        serial_child(folder, task, int(target))
        return 0
    result = run(args.transcripts, args.task, args.workers, args.target)
    result["machine"] = machine_info()
    print(render(result, describe(result["machine"])))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
