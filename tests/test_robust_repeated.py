"""Repeated operations on one session (issue 26, item 3): a second and third manual compaction of the
same transcript, `prepare(force=True)` again and again, `compact --session DIR` twice, and a session
continued after a kill inside a compaction's commit. Each used to raise `InvariantError:
reinject-files-... appears twice`: a reinjection's id named only its text, so a later compaction that
restored the same file made the same id. Ids now name the compaction's epoch, and a file an earlier
compaction restored into what is still the kept tail is not restored twice."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from builders import Convo, words
from worksurface import Session
from worksurface.cli.app import app
from worksurface.core.model import Message, Origin
from worksurface.core.view import pairing_problems
from worksurface.formats import Transcript, dumps

needs_fork = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork")


def one_read_session(turns: int = 12, files: int = 1) -> list[Message]:
    """A session with `files` file reads early on and enough talk after them to compact."""
    c = Convo()
    c.system("You are a coding agent.").user("Please fix the parser in src/app.py")
    for n in range(files):
        c.tool("Read", {"file_path": f"/repo/src/mod{n}.py"}, f"     1→import os\n     2→VALUE = {n}\n")
    for i in range(turns):
        c.say(words(220, i))
        c.user(f"ok, go on ({i})")
    return c.messages


def assert_clean(view: list[Message]) -> None:
    ids = Counter(m.id for m in view)
    assert not [i for i, n in ids.items() if n > 1], "an id appears twice"
    assert not pairing_problems(view)
    restored = Counter(m.meta.get("path") for m in view if m.meta.get("reinjector") == "files")
    assert all(n == 1 for n in restored.values()), f"a file is restored twice: {restored}"


def test_session_compact_twice_and_three_times() -> None:
    messages = one_read_session()
    with Session.open(None) as session:
        views = [list(session.compact(messages).messages) for _ in range(3)]
    for view in views:
        assert_clean(view)
    boundaries = [[m.meta["epoch"] for m in v if m.origin is Origin.BOUNDARY] for v in views]
    # Asked again with nothing new since the first compaction: the view stays as it was (issue 31).
    assert boundaries == [[2], [2], [2]] and views[1] == views[0] == views[2]
    # The file the first compaction restored is still shown once, not once per compaction.
    assert sum(m.meta.get("reinjector") == "files" for m in views[-1]) == 1


def test_prepare_force_twice_in_a_directory_session(tmp_path: Path) -> None:
    messages = one_read_session()
    with Session.open(tmp_path / "s") as session:
        session.prepare(messages, force=True)
        assert_clean(list(session.prepare(messages, force=True).messages))
    with Session.open(tmp_path / "s") as reopened:  # and once more after a reopen
        assert_clean(list(reopened.prepare(messages, force=True).messages))


@settings(max_examples=12, deadline=None)
@given(rounds=st.integers(2, 4), files=st.integers(1, 3), grow=st.lists(st.integers(0, 3), min_size=4, max_size=4))
def test_any_sequence_of_forced_compactions_with_growth_keeps_ids_unique(rounds: int, files: int,
                                                                        grow: list[int]) -> None:
    """Forced compactions with the transcript growing (or not) between them: never an id twice."""
    messages = one_read_session(files=files)
    with Session.open(None) as session:
        for r in range(rounds):
            extra = Convo(f"g{r}-")
            for i in range(grow[r]):
                extra.say(words(120, 100 + i)).user(f"more {r}.{i}")
            messages = messages + extra.messages
            assert_clean(list(session.prepare(messages, force=True).messages))


def test_compact_session_dir_twice_on_the_cli(tmp_path: Path) -> None:
    messages = one_read_session()
    source = tmp_path / "in.json"
    source.write_text(dumps(Transcript(messages, "openai"), messages, "openai"))
    runner = CliRunner()
    for n in range(2):
        out = tmp_path / f"out{n}.json"
        result = runner.invoke(app, ["compact", str(source), "--force", "--session", str(tmp_path / "s"),
                                     "-o", str(out), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["output"] == str(out)


@needs_fork
def test_continuing_after_a_kill_inside_the_commit_of_a_second_compaction(tmp_path: Path) -> None:
    """The second compaction is killed (SIGKILL) at each of a few store writes of its commit; the
    session reopens to the first compaction's state and the compaction run again is clean."""
    from worksurface.session.store import SessionStore

    messages = one_read_session()
    base = tmp_path / "base"
    with Session.open(base) as session:
        session.compact(messages)
    writes = [0]
    put = SessionStore._put
    SessionStore._put = lambda self, *a: (writes.__setitem__(0, writes[0] + 1), put(self, *a))[1]  # type: ignore
    try:
        with Session.open(tmp_path / "count") as session:
            session.compact(messages)
            writes[0] = 0
            session.compact(messages)
    finally:
        SessionStore._put = put  # type: ignore[method-assign]
    total = writes[0]
    assert total > 0
    for k in sorted({1, max(1, total // 2), total}):
        directory = tmp_path / f"k{k}"
        os.system(f"cp -r {base} {directory}")
        pid = os.fork()
        if pid == 0:  # the child dies at its k-th write of the second compaction's commit
            try:
                count = [0]

                def dying(self, *args):  # type: ignore[no-untyped-def]
                    count[0] += 1
                    if count[0] == k:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return put(self, *args)
                SessionStore._put = dying  # type: ignore[method-assign]
                with Session.open(directory) as session:
                    session.compact(messages)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        with Session.open(directory) as reopened:
            assert_clean(reopened.view())
            assert_clean(list(reopened.compact(messages).messages))
            assert_clean(list(reopened.compact(messages).messages))
