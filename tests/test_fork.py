"""Session.fork: a child session from a snapshot of the parent (log, edits, artifacts, ledger, status),
byte-identical at the fork point, and independent afterwards in both directions."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import Convo, words
from worksurface import Session
from worksurface.core.errors import SessionError
from worksurface.session.memstore import MemoryStore

SMALL = {"budget": {"max_result_tokens": 100, "preview_head_tokens": 20, "preview_tail_tokens": 20}}


def _history() -> Convo:
    c = Convo().user("Fix the flaky test in tests/test_api.py. Never touch the migrations folder.")
    c.tool("Read", {"file_path": "/repo/tests/test_api.py"}, "def test_api():\n    assert call() == 200\n")
    c.tool("Bash", {"command": "pytest tests/test_api.py"}, words(900, seed=1))  # large: budgeted to an artifact
    c.say("The test depends on ordering; I will sort the results.")
    return c


def _open(tmp_path: Path | None, name: str) -> Session:
    return Session.open(None if tmp_path is None else tmp_path / name, **SMALL)


@pytest.mark.parametrize("on_disk", [True, False], ids=["directory", "memory"])
def test_fork_starts_byte_identical_and_shares_the_prefix(tmp_path: Path, on_disk: bool) -> None:
    base = tmp_path if on_disk else None
    c = _history()
    with _open(base, "parent") as parent:
        first = parent.prepare(c.messages, now=1.0)
        assert parent.edits, "the large output should have been budgeted (an edit and an artifact)"
        child = parent.fork(None if base is None else base / "child")
        with child:
            assert child.view() == parent.view() == first.messages
            assert [m.digest for m in child.view()] == [m.digest for m in parent.view()]
            assert child.ledger.to_json() == parent.ledger.to_json()
            artifact_id = next(e.artifact for e in parent.edits if getattr(e, "artifact", None))
            assert child.artifact(artifact_id) == parent.artifact(artifact_id)
            if on_disk:
                path = child.store.artifact_info(artifact_id)["path"]
                assert path is not None and Path(path).is_file() and str(base / "child") in path
            # The same next transcript gives the same messages on both sides (the prompt cache is shared).
            c.user("Also run the whole suite.")
            assert child.prepare(c.messages, now=2.0).messages == parent.prepare(c.messages, now=2.0).messages


@pytest.mark.parametrize("on_disk", [True, False], ids=["directory", "memory"])
def test_fork_is_independent_both_ways(tmp_path: Path, on_disk: bool) -> None:
    base = tmp_path if on_disk else None
    c = _history()
    with _open(base, "parent") as parent:
        parent.prepare(c.messages, now=1.0)
        child = parent.fork(None if base is None else base / "child")
        shared = len(parent.view())
        # The child goes one way...
        child_turn = Convo("c")
        child_turn.tool("Read", {"file_path": "/repo/child_only.py"}, words(900, seed=7))
        child.prepare(c.messages + child_turn.messages, now=2.0)
        # ...the parent another.
        parent_turn = Convo("p")
        parent_turn.tool("Read", {"file_path": "/repo/parent_only.py"}, words(900, seed=8))
        parent.prepare(c.messages + parent_turn.messages, now=2.0)
        child_ids = {m.id for m in child.view()}
        parent_ids = {m.id for m in parent.view()}
        assert not child_ids & {m.id for m in parent_turn.messages}
        assert not parent_ids & {m.id for m in child_turn.messages}
        assert child.view()[:shared] == parent.view()[:shared]
        assert "/repo/child_only.py" in str(child.ledger.to_json()) and "child_only" not in str(parent.ledger.to_json())
        assert "parent_only" not in str(child.ledger.to_json())
        assert {e.refs for e in child.edits} != {e.refs for e in parent.edits}
        # Reopened from disk, each side rebuilds its own view.
        if on_disk:
            child_view = child.view()
            child.close()
            with Session.open(base / "child", **SMALL) as again:
                assert again.view() == child_view
        else:
            child.close()


def test_fork_refuses_a_destination_that_is_not_empty(tmp_path: Path) -> None:
    c = _history()
    with _open(tmp_path, "parent") as parent, _open(tmp_path, "other") as other:
        parent.prepare(c.messages, now=1.0)
        other.prepare(c.messages[:2], now=1.0)
        with pytest.raises(SessionError, match="must be a new, empty session"):
            parent.fork(tmp_path / "other")
        with pytest.raises(SessionError, match="onto itself"):
            parent.store.copy_to(parent.store)


def test_store_copy_is_a_snapshot() -> None:
    source, target = MemoryStore(), MemoryStore()
    source.set_meta("epoch", 3)
    artifact = source.put_artifact("payload", kind="tool_result")
    source.copy_to(target)
    source.set_meta("epoch", 4)
    target.set_meta("epoch", 5)
    assert (source.get_meta("epoch"), target.get_meta("epoch")) == (4, 5)
    assert target.get_artifact(artifact.id) == "payload"
