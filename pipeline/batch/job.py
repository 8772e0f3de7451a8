"""One batch from start to finish: discover, skip what --resume already has, run, write, combine.

The CLI and tests call `run_batch`; progress reaches the caller through `on_rows`, and the results
folder holds every row delivered even when the run is interrupted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.fileio import output_folder
from ..core.config import Config
from ..core.errors import WorksurfaceError
from .discover import Discovery, discover, write_manifest
from .results import MANIFEST_FILE, ResultStore, ResultsError
from .run import RunStats, TaskFn, run_dask, run_local, sigint_ignored
from .tasks import DEFAULT_MAX_BYTES, DERIVE, TASKS, Row, TaskSpec, content_hash, run_task

DEFAULT_TARGETS: tuple[int, ...] = (4_000, 10_000, 20_000, 40_000)
# Rows are flushed to a part file after this many transcripts or seconds, whichever comes first:
# an interrupted or killed run loses at most this much work, and a 100k-transcript batch makes a few
# hundred part files, not 100k.
FLUSH_TRANSCRIPTS = 200
FLUSH_SECONDS = 10.0
PROBE_SUFFIXES = (".probes.json", ".json")


class BatchError(WorksurfaceError):
    """A batch that cannot start as asked (no transcripts, results in the way, bad options)."""


@dataclass
class BatchOptions:
    inputs: Sequence[str]
    task: str
    out: Path
    targets: tuple[int, ...] = DEFAULT_TARGETS
    probes_from: str = DERIVE
    window: int | None = None
    fmt: str = "parquet"
    scheduler: str | None = None
    workers: int = 2
    resume: bool = False
    force: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    strict: bool = False

    def record(self) -> dict[str, Any]:
        """The options that decide what a row means (checked on --resume)."""
        return {"task": self.task, "targets": list(self.targets) if self.task != "inspect" else [],
                "probes_from": self.probes_from if self.task == "probe" else None,
                "window": self.window, "format": self.fmt}


@dataclass
class BatchOutcome:
    discovery: Discovery
    specs: list[TaskSpec]
    skipped_done: int
    stats: RunStats
    rows: list[Row] = field(default_factory=list)
    store: ResultStore | None = None


@dataclass
class Plan:
    """What a run will do, before it starts: the caller shows it, then calls `execute`."""

    options: BatchOptions
    store: ResultStore
    discovery: Discovery
    specs: list[TaskSpec]
    skipped_done: int


def plan(options: BatchOptions, config: Config | None = None) -> Plan:
    """Validate the options, find the transcripts and build the task list (minus what --resume has)."""
    if options.task not in TASKS:
        raise BatchError(f"unknown task {options.task!r} (known: {', '.join(TASKS)})")
    if options.workers < 0:
        raise BatchError("--workers must be 0 (serial, in this process) or more")
    if any(t <= 0 for t in options.targets):
        raise BatchError("every target must be a positive number of tokens")
    output_folder(options.out)
    store = ResultStore(options.out, options.fmt)
    if store.has_results() and not (options.resume or options.force):
        raise BatchError(f"{options.out} already holds results: pass --resume to continue them or "
                         "--force to replace them")
    if options.resume:
        store.check_options(options.record())
    discovery = discover(options.inputs, options.max_bytes)
    if not discovery.transcripts:
        raise BatchError("no transcripts found in " + ", ".join(options.inputs)
                         + (f" ({len(discovery.skipped)} files skipped as not transcripts)"
                            if discovery.skipped else ""))
    probes = _probe_index(options.probes_from) if options.task == "probe" and options.probes_from != DERIVE else None
    cfg = config or Config.load()
    targets = () if options.task == "inspect" else options.targets
    done = store.done_keys() if options.resume else set()
    specs: list[TaskSpec] = []
    skipped = 0
    for path in discovery.transcripts:
        if done and (path, _hash_or_none(path)) in done:
            skipped += 1
            continue
        probe_file = DERIVE if probes is None else probes.find(path)
        specs.append(TaskSpec(path, options.task, targets, probe_file, options.window, options.max_bytes, cfg,
                              options.strict))
    return Plan(options, store, discovery, specs, skipped)


def execute(p: Plan, on_rows: Callable[[TaskSpec, list[Row]], None] | None = None,
            fn: TaskFn = run_task, on_start: Callable[[Any], None] | None = None) -> BatchOutcome:
    """Run the plan; rows are flushed to part files as they come and combined into the table at the
    end, also after Ctrl-C (the stats then say `interrupted`)."""
    options, store = p.options, p.store
    if options.force and not options.resume:
        store.clear()
    store.directory.mkdir(parents=True, exist_ok=True)
    write_manifest(store.directory / MANIFEST_FILE, p.discovery.transcripts)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    pending: list[Row] = []
    last_flush = time.monotonic()
    flushed_transcripts = 0

    def deliver(spec: TaskSpec, rows: list[Row]) -> None:
        nonlocal last_flush, flushed_transcripts
        pending.extend(rows)
        flushed_transcripts += 1
        if flushed_transcripts >= FLUSH_TRANSCRIPTS or time.monotonic() - last_flush >= FLUSH_SECONDS:
            store.write_part(pending)
            pending.clear()
            flushed_transcripts, last_flush = 0, time.monotonic()
        if on_rows is not None:
            on_rows(spec, rows)

    if options.workers == 0 and not options.scheduler:
        stats = run_local(p.specs, deliver, fn)
    else:
        stats = run_dask(p.specs, deliver, scheduler=options.scheduler, workers=options.workers, fn=fn,
                         on_start=on_start)
    with sigint_ignored():  # saving is short and must not be cut by a second Ctrl-C
        store.write_part(pending)
        rows = store.combine()
        store.record_run(options.record(), {
            "started": started_at, "seconds": round(stats.seconds, 2), "inputs": list(options.inputs),
            "transcripts": len(p.discovery.transcripts), "skipped_files": len(p.discovery.skipped),
            "skipped_done": p.skipped_done, "submitted": len(p.specs), "done": stats.done,
            "failed": stats.failed, "interrupted": stats.interrupted, "scheduler": stats.scheduler,
            "workers": stats.workers})
    return BatchOutcome(p.discovery, p.specs, p.skipped_done, stats, rows, store)


def run_batch(options: BatchOptions, config: Config | None = None, **kwargs: Any) -> BatchOutcome:
    """`plan` then `execute`."""
    return execute(plan(options, config), **kwargs)


def _hash_or_none(path: str) -> str | None:
    try:
        return content_hash(path)
    except OSError:
        return None


@dataclass
class ProbeIndex:
    """Probe files in a folder, found for a transcript by the path their `transcript` key names (a
    suffix of the transcript's path), else by name: `<stem>.probes.json` or `<stem>.json`."""

    by_transcript: list[tuple[tuple[str, ...], str]]
    by_name: dict[str, str]

    def find(self, transcript: str) -> str | None:
        parts = Path(transcript).parts
        for suffix, probe_file in self.by_transcript:
            if suffix and parts[-len(suffix):] == suffix:
                return probe_file
        name = Path(transcript).name
        stem = name.split(".")[0]
        for candidate in (name, stem):
            for ext in PROBE_SUFFIXES:
                if candidate + ext in self.by_name:
                    return self.by_name[candidate + ext]
        return None


def _probe_index(directory: str) -> ProbeIndex:
    from ..probes.model import ProbeSet

    base = Path(directory)
    if not base.is_dir():
        raise BatchError(f"--probes-from {directory}: not a folder of probe files (or 'derive')")
    by_transcript: list[tuple[tuple[str, ...], str]] = []
    by_name: dict[str, str] = {}
    for path in sorted(base.rglob("*.json")):
        try:
            probes = ProbeSet.load(path)
        except WorksurfaceError:
            continue  # not a probe file (a README's data, another tool's JSON): ignored
        by_name[path.name] = str(path.resolve())
        if probes.transcript:
            by_transcript.append((Path(probes.transcript).parts, str(path.resolve())))
    if not by_name:
        raise BatchError(f"--probes-from {directory}: no probe files (JSON with a 'probes' list) in it")
    # Longest suffix first, so "a/b/x.jsonl" wins over "x.jsonl".
    by_transcript.sort(key=lambda kv: -len(kv[0]))
    return ProbeIndex(by_transcript, by_name)


__all__ = ["BatchError", "BatchOptions", "BatchOutcome", "DEFAULT_TARGETS", "Plan", "ResultsError", "execute",
           "plan", "run_batch"]
