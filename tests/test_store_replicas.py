"""Two Session objects on one stored session taking alternate calls of one conversation (gateway
replicas behind a load balancer) decide exactly as one object would: the usage the provider reported
for the last view is kept in the store (`Session.record_usage`), not in one object's memory. And a
commit whose outcome is unknown on the directory store: the object reads the stored session again."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from builders import Convo, words
from worksurface import Session
from worksurface.core.errors import InvalidSessionIdError, SessionError
from worksurface.core.serial import message_to_json
from worksurface.core.tokens import TokenCounter
from worksurface.offline.replay import call_points

SMALL: dict[str, Any] = dict(window=12_000, max_output=1_000, autocompact_buffer=1_000,
                             post_compact_target_tokens=3_000, budget={"max_result_tokens": 900})
# What a provider adds to worksurface's count of the view: a system prompt and tool schemas it never sees.
FIXED_PART = 1_800


def _messages() -> list:
    c = Convo().system("You are a coding agent.").user("Ship the feature. Never push to main.")
    for i in range(16):
        c.tool("Read" if i % 2 else "Bash", {"file_path": f"/r/{i % 3}.py"} if i % 2 else {"command": f"make t{i}"},
               words(1200 if i % 5 == 2 else 350, seed=i))
        c.say(f"step {i}")
    return c.messages


MESSAGES = _messages()
POINTS = list(call_points(MESSAGES))
COUNTER = TokenCounter()


def _reported(view: list) -> int:
    """The input tokens a provider would report for `view`: its text and the fixed part, a little more
    than worksurface counts (another tokenizer)."""
    return int(COUNTER.messages(view) * 1.07) + FIXED_PART


def _decisions(session: Session, prepared) -> tuple:
    """What a call decided, with the session's own location (an artifact file's path) left out."""
    r = prepared.report
    here = session.store.location
    view = [json.loads(json.dumps(message_to_json(m)).replace(here, "<session>")) for m in prepared.messages]
    return (view, r.tokens_before, r.tokens_after,
            [s.name for s in r.stages if not s.skipped and s.items], r.sizes)


def test_two_objects_on_one_store_decide_as_one(backend):
    one = backend.open("single", **SMALL)
    single, usage = [], None
    for end in POINTS:
        prepared = one.prepare(MESSAGES[:end], usage=usage, now=float(end))
        single.append(_decisions(one, prepared))
        usage = _reported(prepared.messages)
    # Names of one length: a directory session's artifact markers name its path, counted in its size.
    replicas = [backend.open("shared", **SMALL), backend.open("shared", **SMALL)]
    alternate = []
    for turn, end in enumerate(POINTS):
        replica = replicas[turn % 2]
        prepared = replica.prepare(MESSAGES[:end], now=float(end))   # no usage of its own: the store's
        alternate.append(_decisions(replica, prepared))
        replica.record_usage(_reported(prepared.messages))           # as the replica that forwarded it hears it
    assert any(d[4]["unit"] == "measured" for d in single[1:])      # the usage was used, not refused
    assert sum(1 for d in single if d[3]) >= 2                       # stages fired: sizing mattered
    assert alternate == single


def test_a_recorded_usage_goes_stale_with_the_next_view(backend):
    session = backend.open("stale", **SMALL)
    first = session.prepare(MESSAGES[:POINTS[0]], now=1.0)
    session.record_usage(_reported(first.messages))
    assert session._reported_usage() == _reported(first.messages)
    session.prepare(MESSAGES[:POINTS[1]], now=2.0)
    assert session._reported_usage() is None  # reported for the previous view, not this one
    with pytest.raises(ValueError, match="non-negative int"):
        session.record_usage(-5)


@pytest.mark.parametrize("session_id", ["a\udc80b", "\ud800"])
def test_a_lone_surrogate_session_id_is_an_invalid_id(backend, session_id):
    with pytest.raises(InvalidSessionIdError):
        Session.open(backend.base, session_id=session_id)


@contextmanager
def _commit_then_fail(store, at: int) -> Iterator[list[int]]:
    """The `at`-th outermost transaction of `store` commits, then raises as a write whose outcome the
    caller cannot know (an I/O error reported after the data reached the disk)."""
    seen = [0]
    original = store._atomic
    depth = [0]

    @contextmanager
    def atomic():
        depth[0] += 1
        try:
            with original():
                yield
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            seen[0] += 1
            if seen[0] == at:
                raise SessionError(f"{store.location}: disk I/O error after the commit (simulated)")

    store._atomic = atomic
    try:
        yield seen
    finally:
        store._atomic = original


def test_a_directory_commit_whose_outcome_is_unknown_is_not_written_twice(tmp_path):
    from backends import Backend
    backend = Backend.disk(tmp_path / "sessions")
    reference = backend.open("fault0", **SMALL)  # names of one length: markers name the session's path
    for end in POINTS:
        reference.prepare(MESSAGES[:end], now=float(end))
    expected = _state(reference)
    commits = 0
    for at in (1, 3, 6):
        session = backend.open(f"fault{at}", **SMALL)
        failed = 0
        with _commit_then_fail(session.store, at) as seen:
            for end in POINTS:
                try:
                    session.prepare(MESSAGES[:end], now=float(end))
                except SessionError:
                    failed += 1
                    session.prepare(MESSAGES[:end], now=float(end))  # same object: re-reads first
        commits = max(commits, seen[0])
        assert failed == 1
        with backend.open(f"fault{at}", **SMALL) as stored:
            assert _state(stored) == expected
    assert commits > 6


def _state(session: Session) -> str:
    """The stored session's view and every record, with its own location left out, except two that
    cover the artifact paths: the token cache (a pure cache of counts, keyed by block digests) and the
    view's digest (the view itself is compared)."""
    here = session.store.location
    records = {k: v for k, v in session.store.records()  # the view's digest covers its path: the view is compared
               if not k.startswith("tokens:") and k != "meta:view_digest"}
    return json.dumps([[message_to_json(m) for m in session.view()], records]).replace(here, "")
