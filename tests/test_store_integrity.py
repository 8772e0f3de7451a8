"""Damaged session stores, on both backends: a garbage version record, a bad log entry, a length past
the end, an emptied database. Opening (or the read that meets the damage) names the store, the value
and the problem (`StoreDamagedError`), never a traceback, and never starts over on top of the damage:
a failed open leaves every stored value as it was. Property tests draw the damage (hypothesis); the
cases of issue 26 are pinned as examples."""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import Convo, words
from replaying import replay_all
from worksurface import Session
from worksurface.core.errors import ArtifactNotFoundError, SessionError, StoreDamagedError
from worksurface.core.model import Origin
from worksurface.session.diskstore import DiskStore
from worksurface.session.store import Store, is_artifact_content

SMALL = dict(window=30_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=9_000)
SEQUENCE_KEYS = {"log:len": ("log", "logmsg"), "edits:len": ("edit",), "tokens:len": ("tokens",)}
PROPERTY = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _transcript() -> list:
    c = Convo().user("Port the parser. Keep the public API.")
    for i in range(5):
        c.tool("Bash", {"command": f"cat part{i}.log"}, words(1_200, seed=i))
        c.say(f"read part {i}")
    c.tool("Bash", {"command": "cat build.log"}, words(9_000, seed=7))  # over the result budget: an artifact
    c.say("read the build log")
    return c.messages


@pytest.fixture(scope="module", params=["disk", "postgres"])
def template(request, tmp_path_factory):
    """A session with a log, edits (a compaction), artifacts, a ledger and a token cache, made once
    per backend; each example damages a fresh copy of it."""
    from backends import Backend
    backend = (Backend.postgres(request.getfixturevalue("postgres_url")) if request.param == "postgres"
               else Backend.disk(tmp_path_factory.mktemp("integrity")))
    messages = _transcript()
    with backend.open("template", **SMALL) as session:
        replay_all(session, messages)
        session.compact(messages, now=1e5)
        assert any(m.origin is Origin.SUMMARY for m in session.view())
        assert any(is_artifact_content(k) for k in session.store._keys())
    return backend


class Copies:
    """Fresh copies of the template session, one per drawn example."""

    def __init__(self, backend) -> None:
        self.backend = backend

    def make(self) -> tuple[str, Store]:
        name = f"copy-{uuid.uuid4().hex[:12]}"
        source, copy = self.backend.store("template"), self.backend.store(name)
        try:
            source.copy_to(copy)
        finally:
            source.close()
        return name, copy


def _snapshot(store: Store) -> dict[str, str]:
    return dict(store.records())


def _open_fails_naming(backend, name: str, key: str | None) -> StoreDamagedError:
    """Opening the damaged copy raises StoreDamagedError naming `key`, and changes nothing."""
    with backend.store(name) as raw:
        before = _snapshot(raw)
    with pytest.raises(StoreDamagedError) as caught:
        backend.open(name, **SMALL).close()
    if key is not None:
        assert caught.value.key == key or repr(key) in str(caught.value), str(caught.value)
    assert backend.where(name)["session_id"] in str(caught.value)
    with backend.store(name) as raw:
        assert _snapshot(raw) == before, "a failed open changed the damaged store"
    return caught.value


def _keys(store: Store, prefix: str) -> list[str]:
    return [k for k in store._keys() if k.startswith(prefix)]


NOT_JSON = st.sampled_from(["", "{", "nul", "[1,", "\"unterminated", "{'a': 1}", "NaN?", "\x07garbage"])
WRONG_SHAPE = st.sampled_from(["null", "1", "-3", "1.5", "\"text\"", "[]", "{}", "[1, 2]", "{\"id\": 1}", "true"])


@PROPERTY
@given(data=st.data())
def test_garbage_in_any_structural_value_is_named_at_open(template, data):
    """A log message, edit, token chunk or length that is not JSON, or JSON of the wrong shape."""
    copies = Copies(template)
    name, store = copies.make()
    with store:
        candidates = sorted(_keys(store, "logmsg:") + _keys(store, "edit:") + _keys(store, "tokens:")
                            + list(SEQUENCE_KEYS))
        key = data.draw(st.sampled_from(candidates), label="key")
        text = data.draw(NOT_JSON | WRONG_SHAPE, label="text")
        if _harmless(key, text, store._load("tokens:len", 0)):
            return
        store._put(key, text)
    _open_fails_naming(template, name, None)


def _harmless(key: str, text: str, token_chunks: int) -> bool:
    """Token counts are a cache: an empty chunk, or fewer chunks, only means recounting (the view is
    unchanged). Anything else drawn here changes what the session reads."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if key.startswith("tokens:") and key != "tokens:len":
        return isinstance(value, dict) and all(type(v) is int for v in value.values())
    return key == "tokens:len" and type(value) is int and 0 <= value <= token_chunks


@PROPERTY
@given(data=st.data())
def test_a_missing_entry_or_a_length_past_the_end_is_named_at_open(template, data):
    copies = Copies(template)
    name, store = copies.make()
    with store:
        length_key = data.draw(st.sampled_from(sorted(SEQUENCE_KEYS)), label="sequence")
        n = store._load(length_key, 0)
        if data.draw(st.booleans(), label="grow the length") or n == 0:
            extra = data.draw(st.integers(1, 1_000_000), label="past the end by")
            store._put(length_key, json.dumps(n + extra))
            damaged = f"{SEQUENCE_KEYS[length_key][0]}:{n + extra - 1}"
        else:
            i = data.draw(st.integers(0, n - 1), label="entry")
            # What a session reads at open (the log's index entries `log:i` are read by a rewind: below).
            kind = {"log:len": "logmsg", "edits:len": "edit", "tokens:len": "tokens"}[length_key]
            damaged = f"{kind}:{i}"
            store._delete(damaged)
    _open_fails_naming(template, name, damaged)


@PROPERTY
@given(text=NOT_JSON | st.sampled_from(["null", "\"1\"", "1.0", "true", "[1]", "{}"]))
def test_a_garbage_version_record_is_named_at_open(template, text):
    copies = Copies(template)
    name, store = copies.make()
    with store:
        store._put("store:version", text)
    with pytest.raises(StoreDamagedError, match="store:version"):
        template.store(name).close()
    with _raw(template, name) as get:
        assert get("store:version") == text  # left as it was


@PROPERTY
@given(data=st.data())
def test_garbage_anywhere_is_named_when_read_and_never_a_traceback(template, data):
    """Any value at all, garbage or gone: opening, continuing the session, a rewind and fetching every
    artifact either work (the value was overwritten before it was read, or a missing one reads as its
    default) or raise StoreDamagedError naming it (ArtifactNotFoundError for a removed artifact)."""
    copies = Copies(template)
    name, store = copies.make()
    with store:
        artifacts = [k.split(":", 1)[1] for k in store._keys() if is_artifact_content(k)]
        key = data.draw(st.sampled_from(sorted(k for k in store._keys() if k != "store:version")), label="key")
        text = data.draw(NOT_JSON | st.none(), label="text (None: removed)")
        if text is None:
            store._delete(key)
        else:
            store._put(key, text)
    messages = _transcript()
    more = Convo("z").user("Also keep the CLI flags.")
    more.tool("Bash", {"command": "make test"}, words(300, seed=99))
    more.say("tests pass")
    try:
        with template.open(name, **SMALL) as session:
            session.prepare(messages + more.messages, now=1e6)
            for artifact_id in artifacts:
                session.artifact(artifact_id)
            session.prepare(messages[:5], now=2e6)  # a rewind reads the log index entries it drops
    except StoreDamagedError as exc:
        assert exc.key == key or repr(key) in str(exc) or "does not read back" in str(exc) \
            or "rebuild the last view" in str(exc) or (text is None and "missing" in str(exc)), str(exc)
    except ArtifactNotFoundError:
        assert text is None and key.startswith("artifact:")


@contextmanager
def _raw(backend, name: str):
    """A reader of the damaged store's raw values (key -> text), past every check an open makes."""
    where = backend.where(name)
    if backend.name == "disk":
        import diskcache
        cache = diskcache.Cache(str(Path(where["location"]) / where["session_id"] / "db"))
        try:
            yield cache.get
        finally:
            cache.close()
        return
    import psycopg
    with psycopg.connect(where["location"], autocommit=True) as conn:
        def get(key: str):
            row = conn.execute("SELECT value FROM worksurface_values WHERE session_id = %s AND key = %s",
                               (where["session_id"], key)).fetchone()
            return None if row is None else row[0]
        yield get


# --- the cases of issue 26, pinned ------------------------------------------------------------------

def test_a_bad_log_entry_is_named(template):
    name, store = Copies(template).make()
    with store:
        store._put("logmsg:3", "{\"id\": \"m3\", \"role\": \"user\"")
    err = _open_fails_naming(template, name, "logmsg:3")
    assert "not valid JSON" in str(err)


def test_a_log_length_past_the_end_is_named(template):
    name, store = Copies(template).make()
    with store:
        n = store.log_length()
        store._put("log:len", str(n + 5))
    err = _open_fails_naming(template, name, f"log:{n + 4}")
    assert "past the end" in str(err)


def test_a_garbage_version_record_is_named(template):
    name, store = Copies(template).make()
    with store:
        store._put("store:version", "\"\\u0000banana\"")
    with pytest.raises(StoreDamagedError, match="version record is not a version number"):
        template.store(name)


def test_a_missing_version_record_beside_values_is_damage_not_a_new_session(template):
    name, store = Copies(template).make()
    with store:
        store._delete("store:version")
    with pytest.raises(StoreDamagedError, match="version record is missing"):
        template.store(name)


def test_a_newer_store_version_is_refused(template):
    name, store = Copies(template).make()
    with store:
        store._put("store:version", "99")
    with pytest.raises(SessionError, match="version 99"):
        template.store(name)


def test_an_artifact_whose_content_does_not_match_its_digest_is_named(template):
    name, store = Copies(template).make()
    with store:
        artifact_id = next(k.split(":", 1)[1] for k in store._keys() if is_artifact_content(k))
        store._put(f"artifact:{artifact_id}", json.dumps("something else"))
    with template.open(name, **SMALL) as session:
        with pytest.raises(StoreDamagedError, match="does not match its recorded digest"):
            session.artifact(artifact_id)


def _directory_session(tmp_path) -> tuple[Path, Path]:
    """A directory session with artifacts; (its directory, its database file, WAL files removed so
    the file is the whole database)."""
    with Session.open(tmp_path / "s", **SMALL) as session:
        session.prepare(_transcript(), now=1.0)
    db = tmp_path / "s" / "db" / "cache.db"
    for extra in db.parent.glob("cache.db-*"):
        extra.unlink()
    assert any((tmp_path / "s" / "artifacts").iterdir())
    return tmp_path / "s", db


def test_a_zero_length_database_file_is_damage_not_a_new_session(tmp_path):
    directory, db = _directory_session(tmp_path)
    db.write_bytes(b"")
    artifacts = sorted((directory / "artifacts").iterdir())
    with pytest.raises(StoreDamagedError, match="cache.db is empty"):
        Session.open(directory, **SMALL)
    assert db.stat().st_size == 0 and sorted((directory / "artifacts").iterdir()) == artifacts


def test_a_lost_database_beside_artifact_files_is_damage(tmp_path):
    directory, db = _directory_session(tmp_path)
    shutil.rmtree(db.parent)
    with pytest.raises(StoreDamagedError, match="cache.db is missing"):
        Session.open(directory, **SMALL)
    assert not db.parent.exists()


def test_a_database_file_that_is_not_sqlite_is_named(tmp_path):
    directory, db = _directory_session(tmp_path)
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreDamagedError, match="cannot be opened"):
        DiskStore.open(directory)


def test_a_database_session_whose_values_were_deleted_is_damage_not_a_new_session(postgres_url):
    """The database's zero-length cache.db: the session's row is there (its revision counts commits)
    but every value is gone. Opening names it and stamps nothing over it."""
    import psycopg

    from backends import Backend
    backend = Backend.postgres(postgres_url)
    with backend.open("emptied", **SMALL) as session:
        session.prepare(_transcript(), now=1.0)
    sid = backend.session_id("emptied")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DELETE FROM worksurface_values WHERE session_id = %s", (sid,))
        conn.execute("DELETE FROM worksurface_artifact_chunks WHERE session_id = %s", (sid,))
    with pytest.raises(StoreDamagedError, match="were deleted") as caught:
        backend.open("emptied", **SMALL)
    assert sid in str(caught.value)
    with _raw(backend, "emptied") as get:
        assert get("store:version") is None


def test_processes_opening_one_new_session_at_once_all_see_it_new_and_sound(backend):
    """Opening stamps a new store with its version; a process that reads between another's stamp and
    its own reads must take the store neither for damaged nor for another new one."""
    import os
    import signal

    for round_ in range(3):
        name = f"race-{round_}"
        go_read, go_write = os.pipe()
        children = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(go_write)
                    os.read(go_read, 1)
                    backend.store(name).close()
                    code = 0
                except BaseException as exc:
                    os.write(2, f"child {os.getpid()}: {type(exc).__name__}: {exc}\n".encode())
                finally:
                    os._exit(code)
            children.append(pid)
        os.close(go_read)
        os.write(go_write, b"xxxx")
        os.close(go_write)
        codes = []
        for pid in children:
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # pragma: no cover
                os.kill(pid, signal.SIGKILL)
                raise
            codes.append(os.waitstatus_to_exitcode(status))
        assert codes == [0, 0, 0, 0], f"round {round_}: a concurrent open failed"
        with backend.store(name) as store:
            assert store._load("store:version") is not None
            assert store._keys() == ["store:version"]
