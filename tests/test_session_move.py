"""Moving sessions between a directory and a PostgreSQL database (`worksurface session export` /
`import`) with their views byte for byte, listing and deleting the sessions of a store, and
`--session postgresql://...` on the commands that keep a session."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
from typer.testing import CliRunner

from builders import Convo, words
from replaying import replay_all
from worksurface import Session
from worksurface.cli.app import app
from worksurface.core.errors import InvalidSessionIdError, MissingExtraError, SessionNotFoundError
from worksurface.core.serial import message_to_json
from worksurface.session.locations import delete_session, list_sessions, open_store

SMALL = dict(window=30_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=9_000)
runner = CliRunner()


def _transcript(prefix: str = "m", n: int = 6) -> list:
    c = Convo(prefix).user("Refactor the scheduler. Never change the queue's public API.")
    for i in range(n):
        c.tool("Bash" if i % 2 else "Read", {"command": f"make t{i}"} if i % 2 else {"file_path": f"/r/s{i}.py"},
               words(1_500 if i != 2 else 9_000, seed=i))
        c.say(f"step {i}")
    return c.messages


def _replay(session: Session, messages: list, start: int = 0) -> list:
    prepared = replay_all(session, messages, start=start)
    return prepared.messages if prepared is not None else []


def _bytes(view: list) -> str:
    return json.dumps([message_to_json(m) for m in view])


def _invoke(*args: str):
    result = runner.invoke(app, list(args))
    return result


def test_a_session_moves_to_postgres_and_back_with_its_views_byte_for_byte(tmp_path, postgres_url):
    messages = _transcript()
    more = messages + _transcript("z", 3)[1:]
    origin = tmp_path / "local"
    with Session.open(origin, **SMALL) as session:
        _replay(session, messages)
        session.compact(messages, now=1e5)
        before = session.view()
    sid = f"moved-{uuid.uuid4().hex[:8]}"

    out = _invoke("session", "export", str(origin), "-o", str(tmp_path / "a.jsonl"))
    assert out.exit_code == 0, out.output
    assert (tmp_path / "a.jsonl").stat().st_mode & 0o777 == 0o600  # it holds everything the session saw
    out = _invoke("session", "import", str(tmp_path / "a.jsonl"), postgres_url, "--session-id", sid)
    assert out.exit_code == 0, out.output
    with Session.open(postgres_url, session_id=sid, **SMALL) as shared:
        assert _bytes(shared.view()) == _bytes(before)

    out = _invoke("session", "export", postgres_url, "--session-id", sid, "-o", str(tmp_path / "b.jsonl"))
    assert out.exit_code == 0, out.output
    out = _invoke("session", "import", str(tmp_path / "b.jsonl"), str(tmp_path / "back"))
    assert out.exit_code == 0, out.output
    with Session.open(tmp_path / "back", **SMALL) as back:
        assert _bytes(back.view()) == _bytes(before)
        continued = _replay(back, more, start=len(messages))
    with Session.open(origin, **SMALL) as session:
        expected = _replay(session, more, start=len(messages))
    # Artifacts made after the move name their new directory; everything else is the same bytes.
    assert _bytes(continued).replace(str(tmp_path / "back"), "<dir>") == \
        _bytes(expected).replace(str(origin), "<dir>")

    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()[1:-1]]
    again = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()[1:-1]]
    assert [r["key"] for r in records] == [r["key"] for r in again]
    differ = [r["key"] for r, s in zip(records, again) if r["value"] != s["value"]]
    assert differ and all(k.endswith(":info") for k in differ)  # only the artifact records' path


def test_a_damaged_export_is_refused_by_line_and_leaves_no_session(tmp_path, backend):
    with Session.open(tmp_path / "s", **SMALL) as session:
        _replay(session, _transcript(n=3))
    _invoke("session", "export", str(tmp_path / "s"), "-o", str(tmp_path / "x.jsonl"))
    lines = (tmp_path / "x.jsonl").read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:-3]) + "\n")
    edited = lines[:]
    edited[2] = edited[2].replace('"value":"', '"value":" ', 1)
    (tmp_path / "edited.jsonl").write_text("\n".join(edited) + "\n")
    where = backend.where("imported")
    target = [where["location"], "--session-id", where["session_id"]]
    out = _invoke("session", "import", str(tmp_path / "cut.jsonl"), *target)
    assert out.exit_code == 2 and f"cut.jsonl:{len(lines) - 3}" in out.output and "truncated" in out.output
    out = _invoke("session", "import", str(tmp_path / "edited.jsonl"), *target)
    assert out.exit_code == 2 and "trailer does not match" in out.output
    assert where["session_id"] not in list_sessions(where["location"])
    out = _invoke("session", "import", str(tmp_path / "x.jsonl"), *target)
    assert out.exit_code == 0, out.output
    out = _invoke("session", "import", str(tmp_path / "x.jsonl"), *target)
    assert out.exit_code == 2 and "exists there already" in out.output


def test_sessions_are_listed_and_deleted_by_id(backend):
    names = [backend.session_id(n) for n in ("a", "b")]
    for name in ("a", "b"):
        with backend.open(name, **SMALL) as session:
            _replay(session, _transcript(n=2))
    listed = list_sessions(backend.base)
    assert set(names) <= set(listed)
    out = _invoke("session", "list", backend.base)
    assert out.exit_code == 0 and set(names) <= set(out.stdout.split())
    delete_session(backend.base, names[0])
    assert names[0] not in list_sessions(backend.base) and names[1] in list_sessions(backend.base)
    with pytest.raises(SessionNotFoundError):
        delete_session(backend.base, names[0])
    out = _invoke("session", "delete", backend.base, names[1])
    assert out.exit_code == 0, out.output
    assert names[1] not in list_sessions(backend.base)


def test_a_session_in_use_is_not_deleted_under_its_writer(backend):
    from worksurface.core.errors import SessionLockedError
    with backend.open("busy", **SMALL) as session:
        _replay(session, _transcript(n=2))
        with session.store.lock():
            with pytest.raises(SessionLockedError):
                delete_session(backend.base, backend.session_id("busy"), timeout=0.2)
    assert backend.session_id("busy") in list_sessions(backend.base)


def test_a_database_session_needs_an_id_and_a_directory_id_must_be_a_name(postgres_url, tmp_path):
    with pytest.raises(InvalidSessionIdError, match="needs a session id"):
        Session.open(postgres_url)
    for bad in ("../up", "a/b", ".hidden", ""):
        with pytest.raises(InvalidSessionIdError):
            Session.open(tmp_path, session_id=bad)
    assert not (tmp_path.parent / "up").exists()


def test_the_commands_that_keep_a_session_take_a_database(tmp_path, postgres_url):
    c = Convo().user("look")
    c.tool("Bash", {"command": "cat huge.log"}, words(30_000, seed=4))
    c.say("done")
    from worksurface.formats import dumps
    from worksurface.formats.base import Transcript
    path = tmp_path / "t.json"
    path.write_text(dumps(Transcript(c.messages, "openai")))
    sid = f"cli-{uuid.uuid4().hex[:8]}"
    out = _invoke("compact", str(path), "-o", str(tmp_path / "out.json"), "--session", postgres_url)
    assert out.exit_code == 2 and "session id" in out.output
    out = _invoke("compact", str(path), "-o", str(tmp_path / "out.json"), "--session", postgres_url,
                  "--session-id", sid)
    assert out.exit_code == 0, out.output
    written = (tmp_path / "out.json").read_text()
    artifact_id = written.split("stored as artifact ", 1)[1].split(" ", 1)[0]
    assert "fetch_artifact" in written  # no file in a database: the marker names the tool
    out = _invoke("artifact", postgres_url, artifact_id, "--session-id", sid)
    assert out.exit_code == 0 and out.stdout.startswith(words(30_000, seed=4)[:100])
    out = _invoke("artifact", postgres_url, artifact_id, "--session-id", "no-such-session")
    assert out.exit_code == 2 and "no session" in out.output
    assert "no-such-session" not in list_sessions(postgres_url)  # looking never creates one


def test_a_database_url_without_the_postgres_extra_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'worksurface\[postgres\]'"):
        Session.open("postgresql://localhost/db", session_id="s")


def test_a_directory_session_forks_into_a_database_and_both_go_on_alone(tmp_path, postgres_url):
    messages = _transcript()
    with Session.open(tmp_path / "parent", **SMALL) as parent:
        _replay(parent, messages)
        sid = f"child-{uuid.uuid4().hex[:8]}"
        before = _bytes(parent.view())
        with parent.fork(postgres_url, session_id=sid) as child:
            assert _bytes(child.view()) == before  # the provider's prompt cache is shared
            child.prepare(messages + _transcript("k", 2)[1:], now=1e6)
            grown = _bytes(child.view())
        assert grown != before and _bytes(parent.view()) == before
        with Session.open(postgres_url, session_id=sid, **SMALL) as again:
            assert _bytes(again.view()) == grown


def test_the_package_imports_where_fcntl_does_not_exist(tmp_path):
    """Windows has no fcntl: the store's lock comes from filelock and the in-place writer's flock is
    optional, so nothing imports it unguarded; the store still locks and an in-place replace still
    checks what it replaces."""
    import subprocess
    target = tmp_path / "t.jsonl"
    target.write_text("old\n")
    code = ("import sys; sys.modules['fcntl'] = None\n"
            "import hashlib, worksurface, worksurface.cli, worksurface.session.diskstore\n"
            "from worksurface.core.fileio import replace_unchanged\n"
            "from worksurface.session.locations import open_store\n"
            f"store = open_store({str(tmp_path / 's')!r})\n"
            "with store.lock(timeout=5):\n"
            "    store.set_meta('k', 1)\n"
            "store.close()\n"
            f"replace_unchanged({str(target)!r}, 'new\\n', hashlib.sha256(b'old\\n').hexdigest())\n"
            "print('ok')")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert target.read_text() == "new\n"
    with open_store(str(tmp_path / "s")) as store:
        assert store.get_meta("k") == 1
