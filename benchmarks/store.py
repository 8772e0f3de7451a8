"""Section: the session store, PostgreSQL against diskcache.

1. The same replays (the plan's transcripts, call by call) into a directory session and into a
   PostgreSQL session: `prepare` per call and the commit inside it (median, p95), and the bytes the
   session holds at the end (on disk; in the database, the values as stored, after TOAST).
2. 20 sessions on 4 worker processes sharing one server, each session replaying a real transcript
   from the shared folder: every call of a session goes to whichever worker is free, so a session
   hops between processes and each prepare reloads what another worker committed. Then every
   session's log must hold its transcript's messages exactly once, in order (nothing lost or
   duplicated), and its final view must equal a serial run's, byte for byte.

The server is `WORKSURFACE_BENCH_POSTGRES` (a URL where the benchmark may create a database), else a
throwaway cluster with PostgreSQL's default durability settings (`pgcluster`, fsync on).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from worksurface import Session
from worksurface.core.errors import WorksurfaceError
from worksurface.core.serial import message_to_json
from worksurface.formats import read_transcript
from worksurface.offline.replay import call_points
from worksurface.session.session import Session as SessionClass

from . import replay
from .plan import Plan
from .replay import SHARED
from .report import table
from .stats import summary

NAME = "store"
WORKERS = 4
# The transcripts the concurrent sessions replay: the shared Claude Code and field sessions.
TRANSCRIPT_GLOBS = ("claude-code/*-*-*-*-*.jsonl", "field/**/*.jsonl")
BENCH_URL_ENV = "WORKSURFACE_BENCH_POSTGRES"


def run(plan: Plan) -> dict[str, Any]:
    from pgcluster import ClusterUnavailable

    logging.getLogger("worksurface").setLevel(logging.ERROR)  # replays of real sessions notice a lot
    try:
        with _server() as (admin_url, how), _database(admin_url) as url:
            backends = _backends(plan, url)
            concurrent = _concurrent(url, plan.store_sessions, plan.store_calls)
    except ClusterUnavailable as exc:
        return {"skipped": f"no PostgreSQL server: {exc} (or set {BENCH_URL_ENV})"}
    return {"server": how, "backends": backends, "concurrent": concurrent}


# --- 1. the same replays on both backends ---------------------------------------------------------

def _backends(plan: Plan, url: str) -> dict[str, Any]:
    rows = []
    for source in plan.sources[:plan.store_sources]:
        messages = replay.load(source).messages
        calls = list(replay.calls(messages))
        row: dict[str, Any] = {"transcript": source.name, "calls": len(calls)}
        with tempfile.TemporaryDirectory(prefix="ws-store-") as tmp:
            for backend, location, session_id in (("diskcache", str(Path(tmp) / "s"), None),
                                                 ("postgres", url, f"bench-{uuid.uuid4().hex[:8]}")):
                prepare_ms: list[float] = []
                commit_ms: list[float] = []
                with _timed_commits(commit_ms), Session.open(location, session_id=session_id) as session:
                    for call in calls:
                        started = time.perf_counter()
                        session.prepare(messages[:call.size], now=call.now)
                        prepare_ms.append((time.perf_counter() - started) * 1000)
                    stored = _bytes_stored(session, location, session_id)
                row[backend] = {"prepare_ms": summary(prepare_ms), "commit_ms": summary(commit_ms), **stored}
        rows.append(row)
    return {"rows": rows, "repeats": 1}


@contextmanager
def _timed_commits(into: list[float]) -> Iterator[None]:
    """Time `Session._commit` (the one transaction a prepare ends with) for the duration."""
    original = SessionClass._commit

    def timed(self: SessionClass, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            original(self, *args, **kwargs)
        finally:
            into.append((time.perf_counter() - started) * 1000)

    SessionClass._commit = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        SessionClass._commit = original  # type: ignore[method-assign]


def _bytes_stored(session: Session, location: str, session_id: str | None) -> dict[str, Any]:
    records = dict(session.store.records())
    logical = sum(len(k) + len(v) for k, v in records.items())
    if session_id is None:
        on_disk = sum(p.stat().st_blocks * 512 for p in Path(location).rglob("*") if p.is_file())
        return {"records": len(records), "logical_bytes": logical, "stored_bytes": on_disk}
    import psycopg
    with psycopg.connect(location) as conn:
        values = conn.execute("SELECT coalesce(sum(pg_column_size(v.*)), 0) FROM worksurface_values v "
                              "WHERE session_id = %s", (session_id,)).fetchone()
        chunks = conn.execute("SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM worksurface_artifact_chunks c "
                              "WHERE session_id = %s", (session_id,)).fetchone()
    stored = int(values[0] if values else 0) + int(chunks[0] if chunks else 0)
    return {"records": len(records), "logical_bytes": logical, "stored_bytes": stored}


# --- 2. 20 sessions on 4 workers ------------------------------------------------------------------

def _transcripts(sessions: int, notes: list[str]) -> list[tuple[Path, list[Any]]]:
    """`sessions` transcripts from the shared folder, read (cycled when there are fewer), skipping
    those the readers refuse (noted)."""
    root = SHARED / "transcripts"
    found: list[tuple[Path, list[Any]]] = []
    for path in sorted({p for pattern in TRANSCRIPT_GLOBS for p in root.glob(pattern) if "subagents" not in p.parts}):
        try:
            messages = read_transcript(path).messages
        except WorksurfaceError as exc:
            notes.append(f"{path.relative_to(root)}: skipped ({exc})")
            continue
        if call_points(messages):
            found.append((path, messages))
        if len(found) == sessions:
            break
    return [found[i % len(found)] for i in range(sessions)] if found else []


def _worker(url: str, jobs: Any, done: Any, plans: dict[str, tuple[list[Any], list[replay.Call]]]) -> None:
    """Take (session, call) jobs until told to stop; each job is the session's next call. The
    transcripts come read already (a forked worker shares its parent's)."""
    logging.getLogger("worksurface").setLevel(logging.ERROR)
    sessions: dict[str, Session] = {}
    while (job := jobs.get()) is not None:
        name, k = job
        messages, calls = plans[name]
        session = sessions.get(name) or sessions.setdefault(name, Session.open(url, session_id=name))
        started = time.perf_counter()
        session.prepare(messages[:calls[k].size], now=calls[k].now)
        done.put((name, k, os.getpid(), (time.perf_counter() - started) * 1000))
    for session in sessions.values():
        session.close()


def _concurrent(url: str, sessions: int, limit: int | None) -> dict[str, Any]:
    notes: list[str] = []
    paths = _transcripts(sessions, notes)
    if not paths:
        return {"skipped": f"no transcripts under {SHARED / 'transcripts'}"}
    run_id = uuid.uuid4().hex[:6]
    work = {f"c{run_id}-{i:02d}": path for i, (path, _) in enumerate(paths)}
    plans = {name: (messages, list(replay.calls(messages))[:limit]) for name, (_, messages) in zip(work, paths)}
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    jobs, done = context.Queue(), context.Queue()
    workers = [context.Process(target=_worker, args=(url, jobs, done, plans)) for _ in range(WORKERS)]
    for w in workers:
        w.start()
    started = time.perf_counter()
    for name in work:
        jobs.put((name, 0))
    remaining, handled, per_call = sum(len(c) for _, c in plans.values()), {n: set() for n in work}, []
    while remaining:
        name, k, pid, ms = done.get(timeout=600)
        handled[name].add(pid)
        per_call.append(ms)
        remaining -= 1
        if k + 1 < len(plans[name][1]):
            jobs.put((name, k + 1))
    wall = time.perf_counter() - started
    for _ in workers:
        jobs.put(None)
    for w in workers:
        w.join(timeout=120)
    serial_started = time.perf_counter()
    problems, identical = [], 0
    for name, (messages, calls) in plans.items():
        with Session.open(url, session_id=f"s{name[1:]}") as alone:
            for call in calls:
                alone.prepare(messages[:call.size], now=call.now)
            expected = _view_bytes(alone)
        with Session.open(url, session_id=name) as shared:
            log = [m.id for m in shared._log]
            want = [m.id for m in shared._recovery(messages[:calls[-1].size]).messages]
            if log != want or len(log) != len(set(log)):
                lost = len(set(want) - set(log))
                problems.append(f"{name}: log differs ({lost} lost, {len(log) - len(set(log))} duplicated)")
            if _view_bytes(shared) == expected:
                identical += 1
            else:
                problems.append(f"{name}: final view differs from the serial run")
    return {"sessions": len(work), "workers": WORKERS, "calls": len(per_call), "calls_per_session": limit,
            "transcripts": sorted({str(p.relative_to(SHARED / "transcripts")) for p in work.values()}),
            "hopping_sessions": sum(1 for pids in handled.values() if len(pids) > 1),
            "wall_s": round(wall, 1), "serial_s": round(time.perf_counter() - serial_started, 1),
            "prepare_ms": summary(per_call), "identical_views": identical, "problems": problems,
            "records_ok": not any("log differs" in p for p in problems), "notes": notes}


def _view_bytes(session: Session) -> str:
    return json.dumps([message_to_json(m) for m in session.view()])


# --- the server -----------------------------------------------------------------------------------

@contextmanager
def _server() -> Iterator[tuple[str, str]]:
    url = os.environ.get(BENCH_URL_ENV)
    if url:
        yield url, f"{BENCH_URL_ENV}"
        return
    from pgcluster import Cluster
    cluster = Cluster.start(durable=True)
    try:
        yield cluster.url, "a throwaway local cluster (pgcluster), PostgreSQL's default fsync and commit settings"
    finally:
        cluster.stop()


@contextmanager
def _database(admin_url: str) -> Iterator[str]:
    """A new database for this run (so its sizes are its own), dropped afterwards."""
    import psycopg
    name = f"worksurface_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{admin_url.rsplit('/', 1)[0]}/{name}"
    try:
        yield url
    finally:
        from worksurface.session import pgstore
        for key in [k for k in pgstore._pools if k[1] == url]:
            pgstore._pools.pop(key).close()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


# --- rendering ------------------------------------------------------------------------------------

def render(result: dict[str, Any], caption: str) -> str:
    if "skipped" in result:
        return f"## Session store: PostgreSQL and diskcache\n\n{caption}\n\nSkipped: {result['skipped']}."
    rows = []
    for r in result["backends"]["rows"]:
        for backend in ("diskcache", "postgres"):
            b = r[backend]
            rows.append([r["transcript"], backend, r["calls"], b["prepare_ms"]["median"], b["prepare_ms"]["p95"],
                         b["commit_ms"]["median"], b["commit_ms"]["p95"], round(b["stored_bytes"] / 1e6, 2),
                         round(b["logical_bytes"] / 1e6, 2)])
    parts = ["## Session store: PostgreSQL and diskcache", caption,
             f"Server: {result['server']}. The same replay, call by call, into a directory session "
             "(diskcache) and a PostgreSQL session; commit = the one transaction that ends each prepare; "
             "stored = the session's bytes on disk / in the database (after PostgreSQL's compression), "
             "logical = its keys and JSON values.",
             table(["transcript", "store", "calls", "prepare median ms", "prepare p95 ms", "commit median ms",
                    "commit p95 ms", "stored MB", "logical MB"], rows)]
    c = result["concurrent"]
    if "skipped" in c:
        parts.append(f"Concurrent sessions: skipped ({c['skipped']}).")
    else:
        verdict = "no problems" if not c["problems"] else "; ".join(c["problems"][:5])
        calls = "every call" if c["calls_per_session"] is None else f"the first {c['calls_per_session']} calls"
        parts.append(
            f"**{c['sessions']} sessions on {c['workers']} worker processes, one server**: each replays {calls} of a "
            f"real transcript ({len(c['transcripts'])} distinct, from `../shared/transcripts`), each call taken by "
            f"whichever worker is free ({c['hopping_sessions']} of {c['sessions']} sessions moved between workers). "
            f"{c['calls']} prepares in {c['wall_s']} s (prepare median {c['prepare_ms']['median']} ms, p95 "
            f"{c['prepare_ms']['p95']} ms, under contention); the serial re-run took {c['serial_s']} s. Records: "
            f"{'none lost or duplicated' if c['records_ok'] else 'LOST OR DUPLICATED'}; final views identical to the "
            f"serial run: {c['identical_views']} of {c['sessions']} ({verdict}).")
        if c.get("notes"):
            parts.append("Transcripts not used: " + "; ".join(c["notes"]))
    return "\n\n".join(parts)
