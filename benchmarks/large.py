"""Section: large inputs beside their parse floor (issue 28).

Generated Claude Code sessions (fixturegen.large, written to a temp dir): many small messages, a short
one with a single huge tool result (both synthetic, seeded), and real content at length: four shared
long sessions repeated as one live chain (when the shared folder is there). For each: the file's size,
the parse floor (`json.loads` of every line), the tokenizer floor (tiktoken over the text of every
message), the reader alone (`formats.stream_transcript` in a process of its own, the collector off as a
command has it), and `worksurface inspect` and offline `worksurface compact` each run in its own process
(wall time and peak RSS), with their ratio to the parse floor and to both floors together (what any
compaction that counts tokens must at least do). Issue 51's bounds, each said met or missed on its
row: the 100k-message file read within 2x its parse floor; inspect streaming (its peak memory over a
small file's at most BOUND_LINE_COPIES times the largest line, on every row); the 200 MB tool result
compacted in under 3x the time to read it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

from worksurface.core.tokens import get_encoding

from . import replay
from .plan import SCALE_SEED, Plan
from .report import table

NAME = "large"
# Issue 51's bounds: reading the 100k-message file within READ_BOUND times its parse floor; compacting the
# 200 MB tool result within COMPACT_BOUND times reading it; inspect's peak memory over a small file's
# within BOUND_LINE_COPIES copies of the largest line (the line's bytes, its text, its parsed value and
# a sample: what reading one line at a time must hold) and BOUND_SLACK_MB.
READ_BOUND = 2.0
COMPACT_BOUND = 3.0
BOUND_LINE_COPIES = 4
BOUND_SLACK_MB = 32
# The small file inspect's memory is measured beside: the session's first lines (those of a normal size).
SMALL_LINES = 50
SMALL_LINE_BYTES = 64_000
# The sessions: (label, generator, size argument): the sizes issue 28 names, in --quick and --full alike,
# and real content repeated to a length like theirs.
CASES = (("100k small messages", "many", 100_000), ("one 200 MB tool result", "huge", 200),
         ("4 real sessions x8, one chain", "repeated", 8))
# The real sessions repeated: the two long shared ones and two field ones of other users (Claude Code).
REPEATED_SOURCES = (replay.CLAUDE_CODE_DIR / "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
                    replay.CLAUDE_CODE_DIR / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
                    replay.FIELD_DIR / "M-Claude" / "de73bc86-61f0-4c55-98af-c43cf612e3f6.jsonl",
                    replay.FIELD_DIR / "FSM1-cipher-box" / "af" / "1dd25ebb3e" / "8" / "full.jsonl")


def _generate(kind: str, size: int, path: Path) -> None:
    from fixturegen.large import write_huge_result, write_many_messages, write_repeated_sessions

    if kind == "repeated":
        write_repeated_sessions(path, REPEATED_SOURCES, size)
    else:
        (write_many_messages if kind == "many" else write_huge_result)(path, size, SCALE_SEED)


def _records(path: Path) -> Iterator[Any]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _texts(value: Any) -> Iterator[str]:
    """Every string a record's message holds (text, thinking, tool input and output)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def parse_floor(path: Path) -> float:
    """Seconds to json.loads every line of the file."""
    return _timed(lambda: sum(1 for _ in _records(path)))


def parse_floor_cpu(path: Path) -> tuple[float, float]:
    """(wall, CPU seconds) to json.loads every line of the file."""
    cpu = time.process_time()
    wall = parse_floor(path)
    return wall, time.process_time() - cpu


def tokenizer_floor(path: Path) -> float:
    """Seconds to encode the text of every message record with tiktoken (parsing excluded)."""
    enc = get_encoding()
    total = 0.0
    for record in _records(path):
        body = record.get("message") if isinstance(record, dict) else None
        if isinstance(body, dict):
            texts = list(_texts(body.get("content")))
            total += _timed(lambda: [enc.encode_ordinary(t) for t in texts])
    return total


def largest_line_mb(path: Path) -> float:
    """The longest line of the file, in MB."""
    with open(path, "rb") as fh:
        return max((len(line) for line in fh), default=0) / 1e6


def _generated_with_floors(kind: str, size: int, path: Path) -> tuple[float, float, float, float]:
    _generate(kind, size, path)
    with open(path, "rb") as src, open(path.with_suffix(".small.jsonl"), "wb") as out:
        small = (line for line in src if len(line) <= SMALL_LINE_BYTES)
        for _, line in zip(range(SMALL_LINES), small):
            out.write(line)
    floor, floor_cpu = parse_floor_cpu(path)
    return floor, floor_cpu, tokenizer_floor(path), largest_line_mb(path)


def _spawned(work: Callable[..., Any], *args: Any) -> Any:
    """`work(*args)` in a process of its own: Linux starts a child's peak RSS from its parent's at the
    fork, and making and reading a huge file would raise this one's (the parent of the measured runs)
    by gigabytes."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(work, *args).result()


def _prepare(kind: str, size: int, path: Path) -> tuple[float, float, float, float]:
    """Write the session to `path` (and its first SMALL_LINES lines of a normal size beside it); its
    (parse floor, its CPU seconds, tokenizer floor, largest line MB)."""
    return _spawned(_generated_with_floors, kind, size, path)


def read_seconds(path: Path) -> tuple[float, float, int]:
    """(wall, CPU seconds, messages) of the format's reader on the file, in this process, with the cyclic
    collector off as a one-shot command has it (`cli.app.settle_input`): the reader alone, no command
    around it."""
    import gc

    from worksurface.formats import stream_transcript

    gc.collect()
    gc.disable()
    try:
        started, cpu = time.perf_counter(), time.process_time()
        transcript = stream_transcript(path)
        return time.perf_counter() - started, time.process_time() - cpu, len(transcript.messages)
    finally:
        gc.enable()


def _run_cli(args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of `python -m worksurface ARGS` in its own process
    (CPU time too: on a shared machine the wall time also counts what others ran)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "worksurface", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    err = proc.stderr.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"worksurface {' '.join(args[:1])} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(path: Path, out_dir: Path, prepared: tuple[float, float, float, float]) -> dict[str, Any]:
    floor, floor_cpu, tokens_floor, line_mb = prepared
    read_s, read_cpu, _ = _spawned(read_seconds, path)
    inspect_s, inspect_cpu, inspect_mb = _run_cli(["inspect", str(path), "--json"])
    _, _, small_mb = _run_cli(["inspect", str(path.with_suffix(".small.jsonl")), "--json"])
    compact_s, compact_cpu, compact_mb = _run_cli(["compact", str(path), "-o", str(out_dir / "compacted.jsonl"),
                                                   "--no-session"])
    return {"bytes": path.stat().st_size, "parse_floor_s": round(floor, 2), "parse_floor_cpu_s": round(floor_cpu, 2),
            "tokenizer_floor_s": round(tokens_floor, 2), "largest_line_mb": round(line_mb, 3),
            "read_s": round(read_s, 2), "read_cpu_s": round(read_cpu, 2),
            "inspect_s": round(inspect_s, 2), "inspect_cpu_s": round(inspect_cpu, 2),
            "inspect_peak_mb": round(inspect_mb), "inspect_small_peak_mb": round(small_mb),
            "compact_s": round(compact_s, 2), "compact_cpu_s": round(compact_cpu, 2),
            "compact_peak_mb": round(compact_mb),
            "read_over_floor": round(read_s / floor, 2), "read_over_floor_cpu": round(read_cpu / floor_cpu, 2),
            "inspect_over_floor": round(inspect_s / floor, 1), "compact_over_floor": round(compact_s / floor, 1),
            "compact_over_read": round(compact_s / read_s, 2), "compact_over_read_cpu": round(compact_cpu / read_cpu, 2),
            "compact_over_both_floors": round(compact_s / (floor + tokens_floor), 1)}


def bounds(kind: str, row: dict[str, Any]) -> str:
    """Issue 51's bounds that apply to a row, each with its figure and met or missed. Times compare as CPU
    seconds: on a shared machine a wall time also counts what the others ran meanwhile."""
    said = []
    if kind == "many":
        ratio = row["read_over_floor_cpu"]
        said.append(f"read {ratio:.2f}x floor, CPU (<= {READ_BOUND:g}x): {'met' if ratio <= READ_BOUND else 'missed'}")
    if kind == "huge":
        ratio = row["compact_over_read_cpu"]
        said.append(f"compact {ratio:.2f}x read, CPU (< {COMPACT_BOUND:g}x): "
                    f"{'met' if ratio < COMPACT_BOUND else 'missed'}")
    extra = row["inspect_peak_mb"] - row["inspect_small_peak_mb"]
    allowed = BOUND_LINE_COPIES * row["largest_line_mb"] + BOUND_SLACK_MB
    said.append(f"inspect +{extra:,} MB over a small file's (<= {allowed:,.0f}): {'met' if extra <= allowed else 'missed'}")
    return "; ".join(said)


def run(plan: Plan) -> dict[str, Any]:
    rows, notes = [], []
    loads = [os.getloadavg()]
    for label, kind, size in CASES:
        if kind == "repeated" and not all(p.is_file() for p in REPEATED_SOURCES):
            notes.append(f"{label}: skipped, its sessions are not all in {replay.SHARED}")
            continue
        with tempfile.TemporaryDirectory(prefix="ws-large-") as tmp:
            path = Path(tmp) / f"{kind}.jsonl"
            row = {"session": label, **measure(path, Path(tmp), _prepare(kind, size, path))}
            rows.append({**row, "bounds": bounds(kind, row)})
        loads.append(os.getloadavg())
    return {"rows": rows, "notes": notes, "load": [[round(x, 2) for x in avg] for avg in loads]}


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[r["session"], round(r["bytes"] / 1e6, 1), r.get("largest_line_mb"), r["parse_floor_s"],
             r.get("parse_floor_cpu_s"), r["tokenizer_floor_s"], r.get("read_s"), r.get("read_cpu_s"), r["inspect_s"],
             r.get("inspect_cpu_s"), r["inspect_peak_mb"], r.get("inspect_small_peak_mb"), r["compact_s"],
             r.get("compact_cpu_s"), r["compact_peak_mb"], r.get("read_over_floor"), r.get("read_over_floor_cpu"),
             r["inspect_over_floor"], r["compact_over_floor"], r.get("compact_over_read"), r.get("compact_over_read_cpu"),
             r.get("compact_over_both_floors"), r.get("bounds", "")]
            for r in result["rows"]]
    load = result.get("load")
    load_text = (f" Load average (1, 5, 15 min, `os.getloadavg`) before the first session and after each: "
                 f"{'; '.join(' / '.join(f'{x:.2f}' for x in avg) for avg in load)}." if load else "")
    return "\n\n".join([
        "## Large inputs beside their parse floor",
        caption,
        "Generated Claude Code sessions (`fixturegen.large`, in a temp dir): two synthetic (seed 7), and four shared "
        "long sessions (258c7280, 8463c716, field de73bc86 and af1dd25e:8) repeated 8 times as one live chain "
        "(`write_repeated_sessions`: boundaries, summaries and sub-agent records left out, ids renamed per copy). "
        "Parse floor: `json.loads` of every line; tokenizer floor: tiktoken over the text of every message (parsing "
        "excluded). Read: the format's reader alone (`formats.stream_transcript` into Messages) in a process of its "
        "own, the cyclic collector off as a command has it. `inspect --json` and `compact --no-session` each run in "
        "their own process: wall and CPU time, and peak RSS of that process (`inspect small`: inspect's peak on the "
        f"session's first {SMALL_LINES} lines under {SMALL_LINE_BYTES // 1000} kB, the interpreter and its imports); "
        "the ratios are wall time over the parse floor, over the read, and over both floors together (CPU: CPU "
        "seconds over CPU seconds). Bounds (issue 51), on CPU seconds (a wall time on a shared machine also counts "
        f"the others' work): the 100k-message file read within {READ_BOUND:g}x its parse floor; the 200 MB tool "
        f"result compacted in under {COMPACT_BOUND:g}x its read; inspect streaming: its peak over the small file's "
        f"within {BOUND_LINE_COPIES} copies of the largest line and {BOUND_SLACK_MB} MB." + load_text,
        table(["session", "file MB", "largest line MB", "parse floor s", "parse floor CPU s", "tokenizer floor s",
               "read s", "read CPU s", "inspect s", "inspect CPU s", "inspect peak MB", "inspect small peak MB",
               "compact s", "compact CPU s", "compact peak MB", "read / floor", "read / floor CPU", "inspect / floor",
               "compact / floor", "compact / read", "compact / read CPU", "compact / (parse + tokenizer)",
               "bounds (issue 51)"], rows),
        *result.get("notes", []),
    ])
