"""The PostgreSQL store under an operator's network faults, through a TCP proxy (tests/pgproxy.py)
between the session and the throwaway server: a commit whose answer is lost (after the server
committed, or before it saw the commit) at every commit step of a replay, a stalled link, a server
gone. The stored session must open and equal an uninterrupted run's, nothing written twice; every
wait ends within its configured bound with an error naming it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from builders import Convo, words
from pgproxy import FaultProxy
from worksurface import Session
from worksurface.core.errors import DatabaseTimeoutError, DatabaseUnreachableError, SessionError, SessionLockedError
from worksurface.core.serial import message_to_json
from worksurface.offline.replay import call_points

# Small limits keep the faults fast: no answer in 1.5 s ends a call; the server cancels at 1 s.
LIMITS = {"reply_timeout_seconds": 1.5, "statement_timeout_seconds": 1.0, "lock_timeout_seconds": 1.0,
          "connect_timeout_seconds": 2, "keepalives_idle_seconds": 1, "keepalives_interval_seconds": 1,
          "keepalives_count": 2, "tcp_user_timeout_seconds": 2.0}
SMALL: dict[str, Any] = dict(window=12_000, max_output=1_000, autocompact_buffer=1_000,
                             post_compact_target_tokens=3_000, budget={"max_result_tokens": 900},
                             store=LIMITS)


def _messages() -> list:
    c = Convo().system("You are a coding agent.").user("Ship the feature. Never push to main.")
    for i in range(14):
        c.tool("Read" if i % 2 else "Bash", {"file_path": f"/r/{i % 3}.py"} if i % 2 else {"command": f"make t{i}"},
               words(1500 if i % 5 == 2 else 300, seed=i))
        c.say(f"step {i}")
    return c.messages


MESSAGES = _messages()
POINTS = list(call_points(MESSAGES))


@pytest.fixture
def proxy(fresh_database):
    from psycopg.conninfo import conninfo_to_dict
    parts = conninfo_to_dict(fresh_database)
    link = FaultProxy((str(parts["host"]), int(parts["port"])))
    link.url = f"postgresql://{parts['user']}@127.0.0.1:{link.port}/{parts['dbname']}"
    link.direct = fresh_database
    Session.open(link.url, session_id="warm", **SMALL).close()  # the pool and the schema, before counting
    yield link
    from worksurface.session import pgstore
    link.resume()
    for key in [k for k in pgstore._pools if k[1] == link.url]:
        pgstore._pools.pop(key).close(timeout=1.0)
    link.close()


def _replay(session: Session, points: list[int], errors: list[Exception]) -> None:
    """Every call of the replay; a call that fails is made again (as a harness retries it)."""
    for end in points:
        try:
            session.prepare(MESSAGES[:end], now=float(end))
        except SessionError as exc:
            errors.append(exc)
            session.prepare(MESSAGES[:end], now=float(end))


def _stored(url: str, session_id: str) -> tuple[list, dict[str, str]]:
    with Session.open(url, session_id=session_id, **SMALL) as session:
        view = [message_to_json(m) for m in session.view()]
        records = dict(session.store.records())
    return view, records


@pytest.fixture
def reference(proxy):
    """The uninterrupted run through the proxy: its stored session and how many commits it made."""
    before = proxy.commits
    session = Session.open(proxy.url, session_id="reference", **SMALL)
    _replay(session, POINTS, errors := [])
    assert not errors
    commits = proxy.commits - before
    return commits, _stored(proxy.direct, "reference")


def _same_as(reference, proxy, session_id: str) -> None:
    view, records = _stored(proxy.direct, session_id)
    ref_view, ref_records = reference[1]
    assert view == ref_view
    assert records == ref_records


FAULTS = ["landed", "not delivered", "redo lost too"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_lost_commit_answer_at_chosen_commit_steps_is_written_once(proxy, reference, fault):
    """`test_a_lost_commit_answer_at_every_commit_step_is_written_once` at the first, second, middle
    and last commit of the replay (the sweep over every step is marked slow)."""
    commits, _ = reference
    _lose_at_steps(proxy, reference, fault, sorted({1, 2, commits // 2, commits}))


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_a_lost_commit_answer_at_every_commit_step_is_written_once(proxy, reference, fault):
    """At each commit of the replay in turn the server's answer is lost: after the server committed
    (the store reads its commit back), before the server saw it (the store redoes it once), or both
    (not delivered, then the redo lands and its answer is lost too: the call fails named, and the
    next prepare on the same object re-reads the stored session first). The stored session equals
    the uninterrupted run's, record for record; a fresh object continues it the same way."""
    commits, _ = reference
    _lose_at_steps(proxy, reference, fault, list(range(1, commits + 1)))


def _lose_at_steps(proxy, reference, fault: str, steps: list[int]) -> None:
    commits, _ = reference
    assert commits >= len(POINTS)  # a replay commits at least once a call
    plans = {"landed": {1: True}, "not delivered": {1: False}, "redo lost too": {1: False, 2: True}}
    failures = 0
    for step in steps:
        sid = f"at-{step}"
        proxy.lose_answers({step + n - 1: landed for n, landed in plans[fault].items()})
        errors: list[Exception] = []
        try:
            session = Session.open(proxy.url, session_id=sid, **SMALL)
        except SessionError as exc:  # the first commit is the new store's version stamp, at open
            errors.append(exc)
            session = Session.open(proxy.url, session_id=sid, **SMALL)
        _replay(session, POINTS, errors)
        assert proxy.lost, f"commit {step} was not reached"
        proxy.lost.clear()
        failures += len(errors)
        for exc in errors:
            assert isinstance(exc, DatabaseUnreachableError), exc
        _same_as(reference, proxy, sid)
        # A fresh object on a session whose last commit's answer was lost continues it the same way.
        if step == commits:
            proxy.lose_answers({1: True})
            fresh_sid = f"fresh-{step}"
            first = Session.open(proxy.url, session_id=fresh_sid, **SMALL)
            _replay(first, POINTS[:-1], [])
            try:
                first.prepare(MESSAGES[:POINTS[-1]], now=float(POINTS[-1]))
            except SessionError:
                pass
            _replay(Session.open(proxy.url, session_id=fresh_sid, **SMALL), POINTS[-1:], [])
            _same_as(reference, proxy, fresh_sid)
    if fault == "redo lost too":
        assert failures == len(steps)  # each such fault is a named failure of its call; the retry mends it
    else:
        assert failures == 0        # the store settles a lost answer itself


def test_a_stalled_link_ends_the_call_within_its_bound_and_the_next_call_succeeds(proxy, reference):
    session = Session.open(proxy.url, session_id="stalled", **SMALL)
    half = len(POINTS) // 2
    _replay(session, POINTS[:half], [])
    proxy.stall()
    started = time.monotonic()
    with pytest.raises(DatabaseTimeoutError, match="reply_timeout_seconds = 1.5 s") as caught:
        session.prepare(MESSAGES[:POINTS[half]], now=float(POINTS[half]))
    waited = time.monotonic() - started
    assert caught.value.limit == "reply_timeout_seconds"
    assert waited < LIMITS["reply_timeout_seconds"] + 1.0
    proxy.resume()
    _replay(session, POINTS[half:], [])
    _same_as(reference, proxy, "stalled")


def test_a_stall_at_a_commit_is_bounded_and_never_writes_twice(proxy, reference):
    """The link stalls right as a commit is sent: the call ends at the reply bound; after the link
    returns the stalled commit may still arrive at the server, and the retry is not written again."""
    session = Session.open(proxy.url, session_id="stall-commit", **SMALL)
    half = len(POINTS) // 2
    _replay(session, POINTS[:half], [])
    proxy.stall_at_next_commit()
    started = time.monotonic()
    with pytest.raises(SessionError) as caught:
        session.prepare(MESSAGES[:POINTS[half]], now=float(POINTS[half]))
    assert time.monotonic() - started < 2 * LIMITS["reply_timeout_seconds"] + 1.5
    assert isinstance(caught.value, (DatabaseTimeoutError, DatabaseUnreachableError)), caught.value
    proxy.resume()
    _replay(session, POINTS[half:], [])
    _same_as(reference, proxy, "stall-commit")


def test_a_server_that_is_down_reads_as_unreachable_not_as_a_lock(proxy):
    session = Session.open(proxy.url, session_id="down", **SMALL)
    session.prepare(MESSAGES[:POINTS[0]], now=1.0)
    proxy.close()
    proxy.drop_links()
    for _ in range(2):  # the dead pooled connection, then a pool that cannot connect
        started = time.monotonic()
        with pytest.raises(SessionError) as caught:
            session.prepare(MESSAGES[:POINTS[1]], now=2.0)
        assert not isinstance(caught.value, SessionLockedError), caught.value
        assert isinstance(caught.value, DatabaseUnreachableError), caught.value
        assert caught.value.address == f"127.0.0.1:{proxy.port}"
        assert time.monotonic() - started < 2 * LIMITS["connect_timeout_seconds"] + 2.0
