"""The per-transcript tasks of `worksurface batch`: pure functions from a `TaskSpec` to result rows.

Each task reads one transcript and returns one flat row per target (inspect: one row), built from
the same functions the `inspect`, `compact`, `probe check` and `replay` commands use. A task never
raises for a bad input: whatever goes wrong becomes an error row naming the problem, so one file
cannot stop a batch. They run the same way serially or on a Dask worker.
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.config import Config
from ..core.errors import FormatError, WorksurfaceError
from ..core.fileio import read_text
from ..formats import Transcript, damaged_lines, loads
from ..core.tokens import TokenCounter

Row = dict[str, Any]

TASKS: tuple[str, ...] = ("compact", "probe", "replay", "inspect")
DERIVE = "derive"
# A file above this size becomes an error row instead of being parsed: a 3 MB Claude Code session is
# about 170k tokens, so 64 MiB is far beyond any transcript a model could have read, and parsing it
# could take a worker's whole memory.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# Hashing reads the file in chunks of this size, so a huge file is never held twice in memory.
HASH_CHUNK = 1 << 20
# Columns that differ between two runs of the same task on the same input (timing, placement):
# comparisons of results leave them out.
VOLATILE_COLUMNS: frozenset[str] = frozenset({"seconds", "compact_ms", "median_call_ms", "worker", "pid"})
# Error kind of a task whose worker died twice: an infrastructure failure, retried on --resume.
WORKER_LOST = "WorkerLost"


@dataclass(frozen=True)
class TaskSpec:
    """One transcript and what to do with it. `probes` is "derive", a probe file's path, or None
    (no probe file found for this transcript); `config` is the driver's loaded configuration."""

    path: str
    task: str
    targets: tuple[int, ...] = ()
    probes: str | None = DERIVE
    window: int | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    config: Config = field(default_factory=Config)
    strict: bool = False  # a damaged line in a session file makes the file's error row


def content_hash(path: str | os.PathLike[str]) -> str:
    """SHA-256 of the file's bytes: with the path, the key that --resume recognises a transcript by."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(HASH_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def run_task(spec: TaskSpec) -> list[Row]:
    """The rows for one transcript; never raises for a bad file (an error row says what went wrong)."""
    started = time.perf_counter()
    base: Row = {"path": spec.path, "content_hash": None, "size_bytes": None, "format": None,
                 "task": spec.task, "target": None}
    try:
        if spec.task not in _TASKS:
            raise ValueError(f"unknown task {spec.task!r} (known: {', '.join(TASKS)})")
        base["size_bytes"] = size = os.stat(spec.path).st_size
        base["content_hash"] = content_hash(spec.path)  # first, so --resume knows a too-large file too
        if size > spec.max_bytes:
            raise FormatError(f"file is {size:,} bytes, over the {spec.max_bytes:,}-byte limit (--max-bytes)",
                              path=spec.path)
        transcript = loads(read_text(spec.path, "transcript"), "auto", spec.path, strict=spec.strict)
        base["format"] = transcript.format
        base["damaged_lines"] = len(damaged_lines(transcript.extras))  # read around, kept in the file
        base["messages"] = len(transcript.messages)
        base["tokens"] = TokenCounter().messages(transcript.messages)
        rows = _TASKS[spec.task](transcript, spec, base)
    except Exception as exc:  # any failure on one transcript becomes its error row, never a crash
        return [error_row(base, exc, time.perf_counter() - started)]
    placement = _placement()
    for row in rows:
        row.setdefault("error", None)
        row.setdefault("error_kind", None)
        row.update(placement)
    if len(rows) == 1 and "seconds" not in rows[0]:
        rows[0]["seconds"] = round(time.perf_counter() - started, 4)
    return rows


def error_row(base: Row, exc: BaseException, seconds: float | None = None) -> Row:
    """A row that records a failure: the base fields known so far, the message and the error's kind."""
    message = str(exc) or type(exc).__name__
    if not isinstance(exc, (WorksurfaceError, OSError)) and exc.__traceback__ is not None:
        # Not a named input error but a bug or a resource limit: say where, so it can be found.
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        message += f" (at {Path(frame.filename).name}:{frame.lineno} in {frame.name})"
    return {**base, "error": message, "error_kind": type(exc).__name__,
            "seconds": None if seconds is None else round(seconds, 4), **_placement()}


def _placement() -> Row:
    """Where the task ran: the Dask worker's address (or "serial") and the process id."""
    try:
        from distributed import get_worker
        worker = get_worker().address
    except (ImportError, ValueError):
        worker = "serial"
    return {"worker": worker, "pid": os.getpid()}


def _per_target(spec: TaskSpec, base: Row, one: Callable[[int | None], Row]) -> list[Row]:
    """One row per target (one row with target None when there are none); a failure at one target
    is that target's error row, the others still count."""
    rows: list[Row] = []
    for target in spec.targets or (None,):
        started = time.perf_counter()
        row = {**base, "target": target, "window": spec.window}
        try:
            row.update(one(target))
        except Exception as exc:  # e.g. a ContextOverflowError at a target too small for the prefix
            row = error_row(row, exc)
        row["seconds"] = round(time.perf_counter() - started, 4)
        rows.append(row)
    return rows


def _inspect(transcript: Transcript, spec: TaskSpec, base: Row) -> list[Row]:
    from ..offline.inspect import inspect_transcript

    report = inspect_transcript(transcript, TokenCounter())
    row: Row = {**base}
    row.update({f"tokens_{k}": v for k, v in report["by_category"].items()})
    row["tool_calls"] = sum(t["calls"] for t in report["by_tool"].values())
    row["tools"] = len(report["by_tool"])
    row["largest_result_tokens"] = max((r["tokens"] for r in report["largest_results"]), default=0)
    row["live_messages"] = report["live"]["messages"]
    row["live_tokens"] = report["live"]["tokens"]
    row["boundaries"] = len(report["compaction"]["boundaries"])
    for k in ("unanswered_calls", "orphan_results", "queued_inputs"):
        row[k] = report[k]
    return [row]


def _compact(transcript: Transcript, spec: TaskSpec, base: Row) -> list[Row]:
    from ..session.session import Session

    def one(target: int | None) -> Row:
        config = spec.config.with_overrides(window=spec.window, post_compact_target_tokens=target)
        with Session.open(None, config=config) as session:
            report = session.prepare(transcript, force=True).report
        row: Row = {"tokens_before": report.tokens_before, "view_tokens_before": report.view_tokens_before,
                    "view_tokens": report.tokens_after, "compact_ms": round(report.ms, 3),
                    "boundary": report.boundary is not None}
        for s in report.stages:
            row[f"stage_{s.name}_before"] = s.tokens_before
            row[f"stage_{s.name}_after"] = s.tokens_after
        row["reinjected_tokens"] = sum(r.tokens_after - r.tokens_before for r in report.reinjected)
        return row

    return _per_target(spec, base, one)


def _probe(transcript: Transcript, spec: TaskSpec, base: Row) -> list[Row]:
    from ..probes.check import check
    from ..probes.cut import cut
    from ..probes.derivation import derive
    from ..probes.model import ProbeSet

    if spec.probes is None:
        return [{**base, "probe_source": None, "note": "no probe file for this transcript"}]
    if spec.probes == DERIVE:
        probes = derive(cut(transcript.messages, None).before, spec.path, transcript.queued_inputs)
        source = DERIVE
    else:
        probes = ProbeSet.load(spec.probes)
        source = spec.probes

    def one(target: int | None) -> Row:
        result = check(transcript, probes, window=spec.window, target=target)
        row: Row = {"probe_source": source, "probes": len(probes), "tokens_at_cut": result.tokens_before}
        for name, m in result.methods.items():
            col = method_column(name)
            row[f"tokens_{col}"] = m.tokens
            row[f"retained_{col}"] = len(m.score.retained)
            row[f"retention_{col}"] = round(m.score.fraction, 6)
            for category, (kept, total) in m.score.by_category.items():
                row[f"retention_{col}__{category}"] = round(kept / total, 6) if total else None
        if result.notes:
            row["note"] = "; ".join(result.notes)
        return row

    return _per_target(spec, base, one)


def _replay(transcript: Transcript, spec: TaskSpec, base: Row) -> list[Row]:
    from ..offline.replay import replay
    from ..session.session import Session

    def one(target: int | None) -> Row:
        config = spec.config.with_overrides(window=spec.window, post_compact_target_tokens=target)
        with Session.open(None, config=config) as session:
            result = replay(transcript.messages, session)
        summary = result.to_json()["summary"]
        row: Row = {"calls": summary["calls"], "compactions": summary["compactions"],
                    "input_tokens": sum(c.view_tokens for c in result.calls),
                    "cached_tokens": sum(c.cached_tokens for c in result.calls),
                    "cache_share": float(summary["cache_share"]), "median_call_ms": summary["median_ms"],
                    "status_bytes": summary["status_bytes"]}
        row.update(billed(summary))
        return row

    return _per_target(spec, base, one)


def billed(summary: dict[str, Any]) -> Row:
    """The replay's bill under the configured price model (`worksurface.engine.pricing`, applied by the
    replay itself): USD and the price model's name; empty when the replay was not priced."""
    cost = summary.get("cost")
    usd = cost.get("worksurface") if isinstance(cost, dict) else None
    prices = cost.get("prices") if isinstance(cost, dict) else None
    return {"billed_cost_usd": float(usd) if isinstance(usd, (int, float)) else None,
            "price_model": prices.get("name") if isinstance(prices, dict) else None}


def method_column(name: str) -> str:
    """A probe method's name as a column-name part ("claude-code" -> "claude_code")."""
    return name.replace("-", "_")


_TASKS: dict[str, Callable[[Transcript, TaskSpec, Row], list[Row]]] = {
    "compact": _compact, "probe": _probe, "replay": _replay, "inspect": _inspect}


def run_serial(specs: Sequence[TaskSpec], fn: Callable[[TaskSpec], list[Row]] = run_task) -> list[Row]:
    """Every spec in this process, in order: the reference a distributed run must reproduce."""
    return [row for spec in specs for row in fn(spec)]


def transcript_path(path: str | os.PathLike[str]) -> str:
    """The path a batch records (absolute, so results stay keyed the same from any directory)."""
    return str(Path(path).resolve())
