"""Crash safety: a process killed at any point during `prepare` leaves a consistent session.

Children are forked (so they do not pay the import cost again), replay a transcript into one session
(a directory, or a PostgreSQL database: the `backend` fixture) and are SIGKILLed after a random delay.
After each kill the session must open, hold a log that is a prefix of the transcript and edits that
refer only to logged messages, reproduce its last view, and accept the next `prepare`.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time

import pytest

from builders import Convo, words
from replaying import replay_all
from worksurface.core.view import pairing_problems

KILLS = 12
SMALL = dict(window=30_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=9_000,
             microcompact={"trigger_tokens": 12_000, "clear_at_least": 2_000, "protect_tokens": 3_000})

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork")


def _transcript() -> Convo:
    c = Convo().system("You are a coding agent.").user("Ship the feature. Never push to main.")
    for i in range(45):
        c.tool("Read" if i % 2 else "Bash", {"file_path": f"/r/{i % 5}.py"} if i % 2 else {"command": f"make t{i}"},
               words(700, seed=i))
        c.say(f"step {i}")
    return c


def _replay_forever(backend, messages) -> None:
    with backend.open("session", **SMALL) as session:
        replay_all(session, messages)
    os._exit(0)


def _consistent(backend, messages) -> None:
    ids = [m.id for m in messages]
    with backend.open("session", **SMALL) as session:
        log = [m.id for m in session._log]
        assert log == ids[: len(log)], "the log is not a prefix of the transcript"
        known = set(log) | {c.id for m in session._log for c in m.tool_calls}
        made = {m.id for e in session.edits
                for m in (getattr(e, "replacement", ()) + getattr(e, "head", ()) + getattr(e, "messages", ()))}
        for edit in session.edits:
            assert set(edit.refs) <= known | made, "an edit refers to a message the log does not hold"
        view = session.view()
        assert not pairing_problems(view)
    with backend.open("session", **SMALL) as again:
        assert again.view() == view, "reopening did not reproduce the view"


def test_killed_prepares_leave_a_consistent_session(backend):
    messages = _transcript().messages
    rng = random.Random(7)
    for _ in range(KILLS):
        pid = os.fork()
        if pid == 0:  # child
            try:
                _replay_forever(backend, messages)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.05, 0.6))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        _consistent(backend, messages)
    with backend.open("session", **SMALL) as session:
        prepared = session.prepare(messages, now=1e6)
        assert not pairing_problems(prepared.messages)


def test_two_processes_are_serialized_by_the_lock(backend):
    from worksurface.core.errors import SessionLockedError

    # Opening reads the log under the lock, so open before the other process takes it.
    session = backend.open("s")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        store = backend.store("s")
        with store.lock():
            os.write(write_end, b"x")
            time.sleep(30)
        os._exit(0)
    os.read(read_end, 1)
    try:
        with pytest.raises(SessionLockedError):
            with session.store.lock(timeout=0.3):
                pass
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    with session.store.lock(timeout=5):
        pass  # the OS (or the database server) released the dead holder's lock
    session.close()
