"""A batch's results folder: part files, the combined table, the run record and resume keys.

Layout of the folder:

- `results.parquet` (or `results.jsonl`): the combined table, one row per transcript and target;
- `parts/`: rows written while the batch runs, one atomically written file per flush, folded into the
  table when the run ends (or by the next run, if this one was killed);
- `manifest.txt`: the transcripts the last run was asked to process, one path per line;
- `run.json`: the options results were made with, and a record of every run.

Every file is written through a temp file and a rename, so the table is either the old one or the
new one, never half of either.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any, Iterable, Sequence

from ..core.errors import WorksurfaceError
from ..core.fileio import atomic_write, read_text
from .tasks import VOLATILE_COLUMNS, WORKER_LOST, Row

FORMATS: tuple[str, ...] = ("parquet", "jsonl")
TABLE_STEM = "results"
PARTS_DIR = "parts"
RUN_FILE = "run.json"
MANIFEST_FILE = "manifest.txt"
# Options that must match for --resume to add rows to an existing table.
RUN_OPTIONS: tuple[str, ...] = ("task", "targets", "probes_from", "window", "format", "use_usage")
# The leading columns of the table, in this order; the task-specific ones follow as first seen.
LEAD_COLUMNS: tuple[str, ...] = ("path", "content_hash", "size_bytes", "format", "task", "target", "window",
                                 "messages", "tokens", "error", "error_kind")
# A row is identified by these; a later row with the same key replaces an earlier one.
ROW_KEY: tuple[str, ...] = ("path", "content_hash", "task", "target")
RETENTION_PREFIX = "retention_"


class ResultsError(WorksurfaceError):
    """A results folder that cannot be used as asked (other options, unreadable table)."""


@dataclass
class ResultStore:
    """The results folder of one batch. `fmt` is "parquet" or "jsonl"."""

    directory: Path
    fmt: str = "parquet"

    def __post_init__(self) -> None:
        if self.fmt not in FORMATS:
            raise ResultsError(f"unknown results format {self.fmt!r} (known: {', '.join(FORMATS)})")
        self.directory = Path(self.directory)
        self._run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self._seq = 0

    @property
    def table_path(self) -> Path:
        return self.directory / f"{TABLE_STEM}.{self.fmt}"

    @property
    def parts_dir(self) -> Path:
        return self.directory / PARTS_DIR

    def part_paths(self) -> list[Path]:
        return sorted(self.parts_dir.glob(f"part-*.{self.fmt}")) if self.parts_dir.is_dir() else []

    def has_results(self) -> bool:
        return self.table_path.exists() or bool(self.part_paths())

    # --- writing ------------------------------------------------------------------------------------

    def write_part(self, rows: Sequence[Row]) -> Path | None:
        """Write `rows` as a new part file (atomically); None when there is nothing to write."""
        if not rows:
            return None
        self._seq += 1
        path = self.parts_dir / f"part-{self._run_id}-{self._seq:05d}.{self.fmt}"
        atomic_write(path, encode(rows, self.fmt))
        return path

    def combine(self) -> list[Row]:
        """Fold the table and every part into a new table (later rows replace earlier ones with the
        same key), write it atomically, then remove the parts it now holds. Returns the rows."""
        parts = self.part_paths()
        rows = self.rows()
        if parts or not self.table_path.exists():
            atomic_write(self.table_path, encode(rows, self.fmt))
        for part in parts:
            part.unlink(missing_ok=True)
        if self.parts_dir.is_dir() and not any(self.parts_dir.iterdir()):
            self.parts_dir.rmdir()
        return rows

    def clear(self) -> None:
        """Remove the table and parts (a fresh run asked to replace old results)."""
        self.table_path.unlink(missing_ok=True)
        for part in self.part_paths():
            part.unlink()

    # --- reading ------------------------------------------------------------------------------------

    def rows(self) -> list[Row]:
        """Every row of the table and of pending parts, deduplicated by `ROW_KEY` (last one wins)."""
        # A transcript's rows are always written together, so a later file's rows for a transcript
        # replace all its earlier ones (a retried transcript leaves no stale error row behind).
        merged: dict[tuple[Any, ...], dict[tuple[Any, ...], Row]] = {}
        sources = ([self.table_path] if self.table_path.exists() else []) + self.part_paths()
        for source in sources:
            fresh: dict[tuple[Any, ...], dict[tuple[Any, ...], Row]] = {}
            for row in decode(source, self.fmt):
                fresh.setdefault(_transcript_key(row), {})[tuple(row.get(k) for k in ROW_KEY)] = row
            merged.update(fresh)
        return [row for group in merged.values() for row in group.values()]

    def done_keys(self) -> set[tuple[str, str]]:
        """(path, content hash) of every transcript with results, except those whose worker died:
        what --resume skips."""
        return {(r["path"], r["content_hash"]) for r in self.rows()
                if r.get("content_hash") and r.get("error_kind") != WORKER_LOST}

    # --- the run record ----------------------------------------------------------------------------

    def read_run(self) -> dict[str, Any] | None:
        path = self.directory / RUN_FILE
        if not path.exists():
            return None
        try:
            data = json.loads(read_text(path, "run record"))
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
        return data if isinstance(data, dict) else None

    def check_options(self, options: dict[str, Any]) -> None:
        """Refuse to resume into results made with other options (their rows would not compare)."""
        previous = self.read_run()
        if previous is None:
            return
        old = previous.get("options", {})
        diff = [k for k in RUN_OPTIONS if k in old and old[k] != options.get(k)]
        if diff:
            shown = ", ".join(f"{k} {old[k]!r} (now {options.get(k)!r})" for k in diff)
            raise ResultsError(f"{self.directory} holds results made with {shown}: resume with the same "
                               "options, or write to another folder with -o")

    def record_run(self, options: dict[str, Any], run: dict[str, Any]) -> None:
        """Save the options and append this run's record to `run.json`."""
        previous = self.read_run() or {}
        runs = list(previous.get("runs", [])) + [run]
        atomic_write(self.directory / RUN_FILE,
                     json.dumps({"options": options, "runs": runs}, indent=2, default=str) + "\n")


# --- encoding -----------------------------------------------------------------------------------------

def _transcript_key(row: Row) -> tuple[Any, ...]:
    return (row.get("path"), row.get("content_hash"), row.get("task"))


def columns(rows: Iterable[Row]) -> list[str]:
    """The table's columns: the lead columns, then every other column in first-seen order."""
    seen: dict[str, None] = {c: None for c in LEAD_COLUMNS}
    for row in rows:
        for k in row:
            seen.setdefault(k, None)
    return list(seen)


def normalize(rows: Sequence[Row]) -> list[Row]:
    """Rows with the same columns in the same order (missing values None), as a table needs them."""
    cols = columns(rows)
    return [{c: row.get(c) for c in cols} for row in rows]


def encode(rows: Sequence[Row], fmt: str) -> bytes:
    table = normalize(rows)
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table).encode("utf-8")
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    arrow = pa.Table.from_pylist(table) if table else pa.table({c: pa.array([], pa.null())
                                                                 for c in LEAD_COLUMNS})
    pq.write_table(arrow, buffer)
    return buffer.getvalue()


def decode(path: Path, fmt: str) -> list[Row]:
    """The rows of a table or part file (None for missing values), or a ResultsError naming it."""
    if fmt == "jsonl":
        rows = []
        for n, line in enumerate(read_text(path, "results file").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ResultsError(f"{path}:{n}: not JSON ({exc.msg})") from None
        return rows
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return list(pq.read_table(path).to_pylist())
    except (OSError, pa.ArrowException) as exc:
        raise ResultsError(f"{path}: not a readable Parquet table ({exc})") from None


def comparable(rows: Iterable[Row]) -> list[Row]:
    """Rows without the columns that vary between runs (timing, placement), sorted by key and with
    None values dropped: two runs of the same batch give equal lists."""
    out = [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS and v is not None} for r in rows]
    return sorted(out, key=lambda r: tuple(str(r.get(k)) for k in ROW_KEY))


# --- the summary --------------------------------------------------------------------------------------

def methods(rows: Iterable[Row]) -> list[str]:
    """Probe methods present in the rows (worksurface first), from their `retention_<m>` columns."""
    found: dict[str, None] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith(RETENTION_PREFIX) and "__" not in k and v is not None:
                found.setdefault(k[len(RETENTION_PREFIX):], None)
    return sorted(found, key=lambda m: (m != "worksurface", list(found).index(m)))


def summarize(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One line per format and target: transcripts, failed transcripts, mean tokens, mean view tokens
    (compact), mean retention per method (probe), and input tokens and cost (replay)."""
    names = methods(rows)
    groups: dict[tuple[str, Any], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.get("format") or "(unrecognised)", r.get("target")), []).append(r)
    failed_by_format: dict[str, set[str]] = {}
    for (fmt, _), group in groups.items():
        failed_by_format.setdefault(fmt, set()).update(r["path"] for r in group if r.get("error"))
    out = []
    for (fmt, target), group in sorted(groups.items(), key=lambda kv: (kv[0][0], _sort_target(kv[0][1]))):
        ok = [r for r in group if not r.get("error")]
        line: dict[str, Any] = {
            "format": fmt, "target": target, "transcripts": len({r["path"] for r in group}),
            "failed": len({r["path"] for r in group if r.get("error")}),
            "tokens": _mean(r.get("tokens") for r in ok),
            "view_tokens": _mean(r.get("view_tokens") for r in ok),
            "retention": {m: _mean(r.get(f"{RETENTION_PREFIX}{m}") for r in ok) for m in names},
            "input_tokens": _mean(r.get("input_tokens") for r in ok),
            "billed_cost_usd": _sum(r.get("billed_cost_usd") for r in ok),
        }
        out.append(line)
    return out


def _sort_target(t: Any) -> tuple[int, int]:
    return (0, int(t)) if isinstance(t, int) else (1, 0)


def _mean(values: Iterable[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return mean(nums) if nums else None


def _sum(values: Iterable[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(nums) if nums else None


def load(directory: str | os.PathLike[str]) -> tuple[ResultStore, list[Row]]:
    """Open the results folder `directory` (whichever table format it holds) and read its rows."""
    base = Path(directory)
    for fmt in FORMATS:
        store = ResultStore(base, fmt)
        if store.has_results():
            return store, store.rows()
    raise ResultsError(f"{base}: no batch results here (expected {TABLE_STEM}.parquet or {TABLE_STEM}.jsonl)")


def summary_layout(summary: Sequence[dict[str, Any]], task: str,
                   methods: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The summary as text cells, shared by the terminal table and the HTML page: the column names
    (the first is the format) and one row per line of `summarize`. Counts are whole numbers with
    thousands separators, retention a percentage, cost in USD; '-' where a figure is missing."""
    head = ["format", "target", "transcripts", "failed", "mean tokens"]
    if task == "compact":
        head.append("mean view tokens")
    elif task == "replay":
        head += ["mean input tokens", "billed USD"]
    head += [f"retention: {m}" for m in methods]
    body = []
    for line in summary:
        cells = [str(line["format"]), _count(line["target"]), str(line["transcripts"]), str(line["failed"]),
                 _count(line["tokens"])]
        if task == "compact":
            cells.append(_count(line["view_tokens"]))
        elif task == "replay":
            cost = line["billed_cost_usd"]
            cells += [_count(line["input_tokens"]), "-" if cost is None else f"{cost:,.4f}"]
        cells += ["-" if line["retention"].get(m) is None else f"{line['retention'][m]:.0%}" for m in methods]
        body.append(cells)
    return head, body


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"
