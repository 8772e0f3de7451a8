"""Sessions that cannot be damaged, and the invariant breaks found by adversarial runs: kills at every
store-write point (rewinds with large values included), two processes on one directory, identical
repeated calls, the autocompact breaker, the newest user message, the status bar after a
compaction, small windows, and fetching artifacts from a memory-only session."""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable

import pytest
from typer.testing import CliRunner

from builders import Convo, words
from replaying import replay_all
from worksurface import Session
from worksurface.core.artifacts import FETCH_TOOL_NAME, fetch, fetch_tool
from worksurface.cli.app import app
from worksurface.core.config import Config
from worksurface.core.errors import ContextOverflowError
from worksurface.core.model import Origin
from worksurface.core.view import pairing_problems

needs_fork = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork")
SMALL = dict(window=30_000, post_compact_target_tokens=9_000)
# Values of 32 KB and more are where diskcache used to keep separate files.
BIG = 12_000  # tokens, about 40 KB of text


def _big_session() -> Convo:
    c = Convo().user("Migrate the database layer. Keep the old API working.")
    for i in range(3):
        c.tool("Bash", {"command": f"cat dump{i}.sql"}, words(BIG, seed=i))
        c.say(f"read dump {i}")
    return c


def _scenario() -> list[list]:
    """A replay with a rewind in the middle: the harness drops the last turns and goes another way."""
    c = _big_session()
    full = c.messages
    other = Convo("x")
    other.tool("Bash", {"command": "cat other.sql"}, words(BIG, seed=99))
    other.say("took the other way")
    return [full[:3], full, full[:3] + other.messages, full[:3] + other.messages]


def _run(session: Session, steps: list[list], start: int = 0, report_to: int | None = None,
         before_close: Callable[[], None] | None = None) -> list:
    view: list = []
    with session:
        for n, step in enumerate(steps[start:], start):
            try:
                view = session.prepare(step, now=float(n + 1)).messages
            except ContextOverflowError as exc:
                view = exc.prepared.messages
            if report_to is not None:
                os.write(report_to, bytes([n + 1]))
        if before_close is not None:
            before_close()
    return view


def _write_points(backend) -> list[tuple[type, str]]:
    """The calls at which a kill can land between a backend's writes: each key write of a directory
    session; each statement a PostgreSQL session sends (its commit is one pipelined transaction of
    several)."""
    if backend.name == "postgres":
        import psycopg
        return [(psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany")]
    from worksurface.session.diskstore import DiskStore
    return [(DiskStore, "_put"), (DiskStore, "_delete")]


def _kill_at_write(backend, k: int) -> None:
    """Make this process die (SIGKILL) at its k-th write point."""
    count = [0]

    def counting(original):
        def wrapped(self, *args, **kwargs):
            count[0] += 1
            if count[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, *args, **kwargs)
        return wrapped

    for owner, name in _write_points(backend):
        setattr(owner, name, counting(getattr(owner, name)))


def _writes_in_scenario(backend) -> int:
    count = [0]
    originals = [(owner, name, getattr(owner, name)) for owner, name in _write_points(backend)]

    def counting(original):
        def wrapped(self, *args, **kwargs):
            count[0] += 1
            return original(self, *args, **kwargs)
        return wrapped

    try:
        for owner, name, original in originals:
            setattr(owner, name, counting(original))
        _run(backend.open("count", **SMALL), _scenario())
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    return count[0]


@needs_fork
@pytest.mark.slow
def test_a_kill_at_any_store_write_leaves_a_session_that_reopens_and_continues_exactly(backend):
    steps = _scenario()
    expected = _run(backend.open("uninterrupted", **SMALL), steps)
    total = _writes_in_scenario(backend)
    # 40 kill points spread over the run (each a fork and a reopen); WORKSURFACE_KILL_POINTS=100 for more.
    kills = int(os.environ.get("WORKSURFACE_KILL_POINTS", "40"))
    points = sorted({max(1, round(total * i / kills)) for i in range(1, kills + 1)})
    for k in points:
        name = f"k{k}"
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_end)
                _kill_at_write(backend, k)
                _run(backend.open(name, **SMALL), steps, report_to=write_end)
            finally:
                os._exit(0)
        os.close(write_end)
        os.waitpid(pid, 0)
        done = len(os.read(read_end, 64))
        os.close(read_end)
        # Every reopen succeeds with a legal view; continuing from the last completed step gives the
        # uninterrupted run's view (checked on every fourth kill point: the replays dominate the time).
        with backend.open(name, **SMALL) as reopened:
            assert not pairing_problems(reopened.view())
        if k % 4:
            continue
        # A kill while closing (the ledger's catch-up save) leaves every step done: the last call is
        # then made again, as a harness retries a call it has no answer to.
        view = _run(backend.open(name, **SMALL), steps, start=min(done, len(steps) - 1))
        assert _texts(view, backend.label(name)) == _texts(expected, backend.label("uninterrupted")), \
            f"kill at write {k} of {total}"


def _refuse_a_write(backend, k: int | None, counted: list[int]):
    """Patch the backend's driver so its k-th write fails as a full disk does (SQLite's "database or
    disk is full", PostgreSQL's DiskFull; None: none fails, only count them in `counted`); returns
    the undo."""
    import sqlite3

    import diskcache
    if backend.name == "postgres":
        import psycopg
        points = [(psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany")]

        def full() -> Exception:
            return psycopg.errors.DiskFull("could not extend file: No space left on device")

        def writes(args) -> bool:
            return not str(args[0]).lstrip().upper().startswith("SELECT")
    else:
        points = [(diskcache.Cache, "set"), (diskcache.Cache, "delete")]

        def full() -> Exception:
            return sqlite3.OperationalError("database or disk is full")

        def writes(args) -> bool:
            return True
    originals = [(owner, name, getattr(owner, name)) for owner, name in points]

    def refusing(original):
        def wrapped(self, *args, **kwargs):
            if writes(args):
                counted[0] += 1
                if counted[0] == k:
                    raise full()
            return original(self, *args, **kwargs)
        return wrapped

    for owner, name, original in originals:
        setattr(owner, name, refusing(original))

    def undo() -> None:
        for owner, name, original in originals:
            setattr(owner, name, original)
    return undo


def _run_retrying(backend, name: str, steps: list[list]) -> tuple[list, list[str]]:
    """The scenario as a harness runs it on a failing disk: a call that fails is made again (on the
    same session object; a failed open is opened again). The last view and the failures."""
    from worksurface.core.errors import SessionError

    failures: list[str] = []
    session, n, view = None, 0, []
    while n < len(steps):
        try:
            if session is None:
                session = backend.open(name, **SMALL)
            try:
                view = session.prepare(steps[n], now=float(n + 1)).messages
            except ContextOverflowError as exc:
                view = exc.prepared.messages
            n += 1
        except SessionError as exc:
            failures.append(str(exc))
            assert len(failures) < 3, failures
    assert session is not None
    session.close()
    return view, failures


@pytest.mark.slow
def test_a_full_disk_at_any_store_write_is_named_and_the_retried_call_continues_exactly(backend):
    """Issue 26 (data safety): a write refused for lack of space is a SessionError naming the session,
    never a driver traceback; the call's transaction rolls back whole, and retrying it gives the view
    an uninterrupted run gives, in the session and after reopening it."""
    steps = _scenario()
    expected = _run(backend.open("uninterrupted", **SMALL), steps)
    total = [0]  # the calls' writes (closing saves the ledger too; a failure there is only logged)
    undo = _refuse_a_write(backend, None, total)
    try:
        _run(backend.open("count", **SMALL), steps, before_close=undo)
    finally:
        undo()
    for k in sorted({max(1, round(total[0] * i / 6)) for i in range(1, 7)}):  # spread over the run
        name = f"full{k}"
        undo = _refuse_a_write(backend, k, [0])
        try:
            view, failures = _run_retrying(backend, name, steps)
        finally:
            undo()
        assert len(failures) == 1, f"write {k} of {total[0]}: {failures}"
        assert backend.where(name)["session_id"] in failures[0], failures[0]
        assert "cannot write the session" in failures[0] or "database error (could not extend file" in failures[0]
        assert _texts(view, backend.label(name)) == _texts(expected, backend.label("uninterrupted")), \
            f"retried after a full disk at write {k} of {total[0]}"
        with backend.open(name, **SMALL) as reopened:
            assert _texts(reopened.view(), backend.label(name)) == _texts(expected, backend.label("uninterrupted"))


def _texts(view: list, location: str) -> list[str]:
    """The view's content with its session's location (a directory artifact markers name) taken out."""
    return [f"{m.id}|{m.role}|{m.origin.value}|" + m.text.replace(location, "<session>")
            + "|".join(r.content.replace(location, "<session>") for r in m.tool_results) for m in view]


def test_two_session_objects_on_one_session_take_turns_without_damage(backend):
    c = _big_session()
    a = backend.open("s", **SMALL)
    b = backend.open("s", **SMALL)
    a.prepare(c.messages[:4], now=1.0)
    b.prepare(c.messages[:6], now=2.0)  # B sees A's commit before it decides
    a.prepare(c.messages, now=3.0)
    b.prepare(c.messages, now=4.0)
    for s in (a, b):
        s.close()
    with backend.open("s", **SMALL) as again:
        view = again.view()
        assert not pairing_problems(view)
        ids = [m.id for m in view]
        assert len(ids) == len(set(ids))


@needs_fork
def test_a_reader_reopening_while_a_writer_works_never_sees_a_damaged_session(backend):
    c = _big_session()
    backend.open("s", **SMALL).close()
    pid = os.fork()
    if pid == 0:
        try:
            with backend.open("s", **SMALL) as session:
                # Where a harness calls the model: a prefix ending inside a turn has a call in flight,
                # which the view legitimately shows unanswered (a reader would see it as unpaired).
                replay_all(session, c.messages)
        finally:
            os._exit(0)
    opened = 0
    try:
        while opened < 40:
            with backend.open("s", **SMALL) as reader:
                assert not pairing_problems(reader.view())
            opened += 1
    finally:
        os.waitpid(pid, 0)
    assert opened == 40


def test_an_identical_repeated_call_changes_nothing_and_fires_nothing():
    c = _big_session()
    session = Session.open(None, **SMALL)
    first = session.prepare(c.messages, now=1.0)
    for later in (2.0, 1_000.0):  # an idle gap past the cache TTL is no reason to fire either
        again = session.prepare(c.messages, now=later)
        assert again.messages == first.messages
        assert all(s.skipped for s in again.report.stages)


def test_the_autocompact_breaker_reopens_once_the_view_has_grown():
    """A last turn too large to compact around: three failures open the breaker, with a notice; it
    retries once the view has grown by a tenth of the window."""
    c = Convo().user("go")
    for i in range(4):
        c.tool("Bash", {"command": f"make {i}"}, words(800, seed=i))
        c.say("ok")
    c.user(words(30_000, seed=5))  # the newest user message: kept verbatim, too big for the window
    session = Session.open(None, window=30_000)
    failures = 0
    notices: list[str] = []
    for n in range(5):
        try:
            prepared = session.prepare(c.messages, now=float(n), force=False)
            notices += prepared.report.notices
        except ContextOverflowError as exc:
            failures += 1
            notices += exc.prepared.report.notices
        c.say(f"turn {n}")
    assert failures == 3
    assert any("autocompact is paused" in n for n in notices)
    c.tool("Bash", {"command": "make big"}, words(4_000, seed=9))
    with pytest.raises(ContextOverflowError):  # half-open: it tries again, and fails again
        session.prepare(c.messages, now=10.0)


def test_the_newest_user_message_is_never_cut(tmp_path):
    c = Convo().user("start")
    for i in range(30):
        c.tool("Read", {"file_path": f"/r/{i}.py"}, words(900, seed=i))
        c.say(f"step {i}")
    newest = " ".join(f"requirement {i}: module {i % 13} must keep its behaviour" for i in range(250))
    c.user(newest)
    for i in range(3):
        c.tool("Bash", {"command": f"make t{i}"}, words(600, seed=50 + i))
        c.say(f"after {i}")
    for target in (4_000, 10_000, 40_000):
        session = Session.open(None, post_compact_target_tokens=target)
        view = session.compact(c.messages, now=1.0).messages
        assert any(newest in m.text for m in view), f"newest user message cut at target {target}"
        assert not any("[...]" in m.text and "requirement 1:" in m.text for m in view)


def test_the_status_baseline_after_a_compaction_reports_the_new_view_size():
    c = _big_session()
    last = c.messages[-1]
    # The transcript says the last call used 190k tokens; after the compaction the view is far smaller.
    c.messages[-1] = type(last)(last.id, last.role, last.blocks, last.origin,
                                {"usage": {"input_tokens": 190_000, "output_tokens": 100}})
    session = Session.open(None)
    prepared = session.compact(c.messages, now=1.0)
    status = [m for m in prepared.messages if m.origin is Origin.STATUS]
    assert status, "a compaction publishes a status baseline"
    text = status[-1].text
    assert 'tokens-used="190k"' not in text and "wrap up" not in text
    assert f'tokens-used="{round(prepared.report.tokens_after / 1000)}k"' in text


def test_small_windows_scale_their_triggers_and_reserves():
    for window in (8_000, 16_000, 32_000):
        config = Config(window=window)
        assert config.threshold > window // 2
        assert config.microcompact.trigger_tokens < config.threshold
    c = Convo().user("Keep the API stable.")
    for i in range(30):
        c.tool("Read", {"file_path": f"/r/{i}.py"}, words(600, seed=i))
        c.say(f"step {i}")
    session = Session.open(None, window=16_000)
    fired: set[str] = set()
    for n in range(2, len(c.messages) + 1):
        if c.messages[n - 1].role == "assistant":
            prepared = session.prepare(c.messages[:n], now=float(n))
            fired |= {s.name for s in prepared.report.stages if not s.skipped}
            assert prepared.report.tokens_after <= session.config.threshold
    assert fired & {"microcompact", "collapse", "autocompact"}, "a 16k window makes the reducing stages work"
    # An explicit value is never scaled.
    assert Config(window=16_000, max_output=3_000).max_output == 3_000


def test_artifacts_of_a_memory_only_session_are_fetched_through_the_tool():
    c = Convo().user("look")
    c.tool("Bash", {"command": "cat huge.log"}, words(30_000, seed=3))
    c.say("done")
    session = Session.open(None)
    view = session.prepare(c.messages, now=1.0).messages
    marker = next(r.content for m in view for r in m.tool_results)
    assert FETCH_TOOL_NAME in marker and "open the file" not in marker
    artifact_id = marker.split("stored as artifact ", 1)[1].split(" ", 1)[0]
    assert fetch(session, {"id": artifact_id}).startswith(words(30_000, seed=3)[:200])
    whole = fetch(session, {"id": artifact_id, "start_line": 1, "end_line": 1})
    assert whole.startswith(words(30_000, seed=3)[:100]) and "ask for a line range" in whole  # capped
    assert fetch(session, {"id": artifact_id, "start_line": 3, "end_line": 2}).startswith("error: bad line range")
    assert fetch(session, {"id": "nope"}).startswith("error: no artifact")
    assert fetch_tool("openai")["function"]["name"] == fetch_tool()["name"] == FETCH_TOOL_NAME


def test_the_artifact_command_prints_an_artifact_from_a_session_directory(tmp_path):
    c = Convo().user("look")
    c.tool("Bash", {"command": "cat huge.log"}, words(30_000, seed=4))
    c.say("done")
    with Session.open(tmp_path / "s") as session:
        view = session.prepare(c.messages, now=1.0).messages
    marker = next(r.content for m in view for r in m.tool_results)
    artifact_id = marker.split("stored as artifact ", 1)[1].split(" ", 1)[0]
    runner = CliRunner()
    out = runner.invoke(app, ["artifact", str(tmp_path / "s"), artifact_id])
    assert out.exit_code == 0 and out.stdout.startswith(words(30_000, seed=4)[:100])
    missing = runner.invoke(app, ["artifact", str(tmp_path / "s"), "0000"])
    assert missing.exit_code == 2 and "no artifact" in missing.output
    nowhere = runner.invoke(app, ["artifact", str(tmp_path / "none"), artifact_id])
    assert nowhere.exit_code == 2 and not (tmp_path / "none").exists()
