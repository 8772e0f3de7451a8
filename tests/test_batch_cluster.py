"""`worksurface batch` on a real local Dask cluster of 2 worker processes: the rows equal a serial run,
a malformed file is an error row, an interrupted run resumed gives the same results, a worker killed
mid-task has its task retried, and Ctrl-C on the command stops its workers and keeps the rows."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import cloudpickle
import pytest

from shared import TRANSCRIPTS, needs_shared
from worksurface.batch.discover import discover
from worksurface.batch.job import BatchOptions, plan, run_batch
from worksurface.batch.results import comparable, load
from worksurface.batch.run import local_cluster, prepare_local
from worksurface.batch.tasks import WORKER_LOST, TaskSpec, run_serial, run_task

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
FIXTURES = sorted((REPO / "fixtures").glob("*.jsonl"))
# Functions defined here run on the workers, which cannot import this test module: ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
KILL_WAIT = 60.0
# Sessions for the Ctrl-C test: enough that the run is still going when the interrupt comes.
GENERATED = 60
# The command imports worksurface and starts 2 worker processes: seconds on an idle machine, far more
# on a loaded one.
STARTUP_WAIT = 180.0
INTERRUPT_EVERY = 5.0


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """One local cluster of 2 worker processes for the module (configured as `worksurface batch` makes
    its own), its scheduler address given to each batch as --scheduler would be."""
    from distributed import Client

    cluster = local_cluster(2)
    client = Client(cluster)
    prepare_local(client)
    try:
        yield cluster.scheduler_address
    finally:
        client.close()
        cluster.close()


def _wait_for_workers(address: str, n: int = 2) -> None:
    from distributed import Client

    with Client(address) as client:
        client.wait_for_workers(n, timeout=30)


def _specs(options: BatchOptions) -> list[TaskSpec]:
    return plan(options).specs


def test_cluster_rows_equal_serial_rows(scheduler: str, tmp_path: Path) -> None:
    inputs = [str(TRANSCRIPTS), *map(str, FIXTURES)] if TRANSCRIPTS.exists() else list(map(str, FIXTURES))
    small = [str(p) for p in FIXTURES if p.name == "small.jsonl"]
    if TRANSCRIPTS.exists():
        small += [str(TRANSCRIPTS / "claude-code" / "short.jsonl"), str(TRANSCRIPTS / "openhands" / "basic.json"),
                  str(TRANSCRIPTS / "mini-swe-agent" / "github_issue.traj.json")]
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = (REPO / "fixtures" / "small.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (bad / "broken.jsonl").write_text("".join(lines[:2]) + '{"type": "user", "uuid": "u-bad", "message": 7}\n'
                                      + "".join(lines[2:]), encoding="utf-8")
    runs = [("inspect", inputs + [str(bad)], ()), ("compact", inputs + [str(bad)], (4_000,)),
            ("probe", small, (4_000, 20_000)), ("replay", small[:2], (20_000,))]
    for task, paths, targets in runs:
        options = BatchOptions(paths, task, tmp_path / task, targets=targets, scheduler=scheduler)
        outcome = run_batch(options)
        assert not outcome.stats.interrupted and outcome.stats.workers == 2
        _, on_disk = load(tmp_path / task)
        serial = run_serial(_specs(BatchOptions(paths, task, tmp_path / f"{task}-serial", targets=targets)))
        assert comparable(on_disk) == comparable(serial), (task, _first_difference(on_disk, serial))
        assert {r["worker"] for r in on_disk if r["worker"]} != {"serial"}
        if task in ("inspect", "compact"):
            broken = [r for r in on_disk if r["path"].endswith("broken.jsonl")]
            assert len(broken) == 1 and broken[0]["error_kind"] == "FormatError" and ":3" in broken[0]["error"]
        else:
            assert not any(r["error"] for r in on_disk), [r["error"] for r in on_disk if r["error"]]
    if TRANSCRIPTS.exists():
        formats = {r["format"] for r in load(tmp_path / "inspect")[1]}
        assert {"claude-code", "swe-agent", "openhands", "mini-swe-agent", "aider"} <= formats


def _first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> Any:
    """The first pair of rows that differ, reduced to the differing columns (for the failure message)."""
    left, right = comparable(a), comparable(b)
    if len(left) != len(right):
        return f"{len(left)} rows against {len(right)}"
    for x, y in zip(left, right):
        if x != y:
            return x.get("path"), {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)}
    return None


def _interrupt_after(n: int) -> Any:
    seen = []

    def on_rows(spec: TaskSpec, rows: list[dict[str, Any]]) -> None:
        seen.append(spec.path)
        if len(seen) == n:
            raise KeyboardInterrupt
    return on_rows


def test_interrupted_run_resumed_gives_the_same_results(scheduler: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(8):
        shutil.copy(REPO / "fixtures" / "small.jsonl", corpus / f"s{i}.jsonl")
        with (corpus / f"s{i}.jsonl").open("a") as fh:  # distinct contents, distinct hashes
            fh.write("\n" * i)
    options = BatchOptions([str(corpus)], "compact", tmp_path / "out", targets=(4_000,), scheduler=scheduler)
    first = run_batch(options, on_rows=_interrupt_after(3))
    assert first.stats.interrupted and first.stats.done == 3
    kept = load(tmp_path / "out")[1]
    assert len({r["path"] for r in kept}) == 3  # what finished before Ctrl-C is on disk
    options.resume = True
    second = run_batch(options)
    assert second.skipped_done == 3 and second.stats.done == 5 and not second.stats.interrupted
    full = run_serial(_specs(BatchOptions([str(corpus)], "compact", tmp_path / "ref", targets=(4_000,))))
    assert comparable(load(tmp_path / "out")[1]) == comparable(full)


def stall_once(marker_dir: str, victim: str, spec: TaskSpec) -> list[dict[str, Any]]:
    """The victim's first attempt records its worker's pid and waits to be killed; a retry runs it."""
    marker = Path(marker_dir) / "victim.pid"
    if spec.path == victim and not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(KILL_WAIT)
    return run_task(spec)


def die_on(victim: str, spec: TaskSpec) -> list[dict[str, Any]]:
    """Kills its worker every time it runs the victim."""
    if spec.path == victim:
        os._exit(1)
    return run_task(spec)


def test_a_worker_killed_mid_task_is_retried(scheduler: str, tmp_path: Path) -> None:
    _wait_for_workers(scheduler)
    paths = [str(REPO / "fixtures" / "small.jsonl")]
    if TRANSCRIPTS.exists():
        paths += [str(TRANSCRIPTS / "claude-code" / "short.jsonl"), str(TRANSCRIPTS / "openhands" / "basic.json")]
    victim = str(Path(paths[0]).resolve())
    options = BatchOptions(paths, "inspect", tmp_path / "out", scheduler=scheduler)
    markers = tmp_path / "markers"
    markers.mkdir()
    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(
        outcome=run_batch(options, fn=functools.partial(stall_once, str(markers), victim))))
    runner.start()
    marker = markers / "victim.pid"
    deadline = time.monotonic() + KILL_WAIT
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = int(marker.read_text())
    os.kill(killed, signal.SIGKILL)
    runner.join(KILL_WAIT)
    assert not runner.is_alive()
    rows = load(tmp_path / "out")[1]
    retried = [r for r in rows if r["path"] == victim]
    assert len(retried) == 1 and retried[0]["error"] is None and retried[0]["pid"] != killed
    assert comparable(rows) == comparable(run_serial(_specs(BatchOptions(paths, "inspect", tmp_path / "ref"))))


def test_a_task_that_kills_its_worker_twice_becomes_an_error_row(scheduler: str, tmp_path: Path) -> None:
    _wait_for_workers(scheduler)
    paths = [str(REPO / "fixtures" / "small.jsonl"), str(REPO / "fixtures" / "long.jsonl")]
    victim = str(Path(paths[0]).resolve())
    options = BatchOptions(paths, "inspect", tmp_path / "out", scheduler=scheduler)
    outcome = run_batch(options, fn=functools.partial(die_on, victim))
    rows = {r["path"]: r for r in outcome.rows}
    assert rows[victim]["error_kind"] == WORKER_LOST and "died 2 times" in rows[victim]["error"]
    assert rows[str(Path(paths[1]).resolve())]["error"] is None
    # A lost worker is an accident of the run, not of the file: --resume tries it again.
    options.resume = True
    assert [s.path for s in plan(options).specs] == [victim]


def _children(pid: int) -> list[int]:
    """The worker processes the command started (multiprocessing children running a Dask worker)."""
    out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "spawn_main" in line]


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().split()[2]
        except OSError:
            continue
        if state != "Z":
            alive.append(p)
    return alive


def test_ctrl_c_stops_the_local_workers_and_keeps_the_rows(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    from fixturegen import write_session

    for i in range(GENERATED):
        write_session(corpus / f"g{i:02d}.jsonl", 6_000, seed=i)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "worksurface.cli", "batch", str(corpus), "--task", "probe", "--targets", "4000",
               "--workers", "2", "-o", str(out)]
    # A new process group with SIGINT at its default, as a terminal's Ctrl-C reaches a foreground job.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + STARTUP_WAIT
    while len(_children(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    workers = _children(proc.pid)
    assert len(workers) >= 2, f"no local workers after {STARTUP_WAIT} s: {proc.poll()=}"
    time.sleep(2)
    # Ctrl-C, again every few seconds as a user would while the cluster is still starting (when it
    # is ignored) until the command stops.
    while proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=INTERRUPT_EVERY)
        except subprocess.TimeoutExpired:
            pass
    output = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 130, output
    assert "interrupted" in output and "--resume" in output and "Traceback" not in output
    gone_by = time.monotonic() + 10
    while _alive(workers) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert not _alive(workers)
    done = {r["path"] for r in load(out)[1]}
    assert len(done) < GENERATED
    resumed = run_batch(BatchOptions([str(corpus)], "probe", out, targets=(4_000,), workers=0, resume=True))
    assert resumed.skipped_done == len(done) and {r["path"] for r in resumed.rows} == set(discover([str(corpus)]).transcripts)
