"""The store contract on every backend (directory, PostgreSQL, memory): persistence, truncation,
transactions, artifacts and the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from worksurface.core.edits import Compact, Insert, ReplaceMessages, ReplaceResult
from worksurface.core.errors import ArtifactNotFoundError, SessionError, SessionLockedError
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.session.diskstore import DiskStore
from worksurface.session.memstore import MemoryStore
from worksurface.session.store import content_digest
from worksurface.session.writebehind import Flusher, WriteBehindStore


@pytest.fixture
def flusher():
    f = Flusher()
    yield f
    f.close()


def _messages(n: int, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + n):
        if i % 3 == 1:
            out.append(Message(f"m{i}", "assistant", (ToolCall(f"c{i}", "Read", {"file_path": f"/r/f{i}.py"}),)))
        elif i % 3 == 2:
            out.append(Message(f"m{i}", "user", (ToolResult(f"c{i - 1}", f"content of f{i - 1} \ud83d"),),
                               meta={"record": {"z": 1, "a": [1, 2]}}))
        else:
            out.append(Message(f"m{i}", "user", (Text(f"request {i}: é ✓"),)))
    return out


@pytest.fixture(params=["disk", "postgres", "memory", "write-behind"])
def store(request, tmp_path):
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "write-behind":     # a hot copy in front of a directory store (session.writebehind)
        s = WriteBehindStore(DiskStore(tmp_path / "sess"), request.getfixturevalue("flusher"))
    else:
        from backends import Backend
        backend = (Backend.disk(tmp_path) if request.param == "disk"
                   else Backend.postgres(request.getfixturevalue("postgres_url")))
        s = backend.store("sess")
    yield s
    s.close()


@pytest.fixture
def persistent(backend):
    """Open (and reopen) one named session of the backend under test."""
    return lambda: backend.store("sess")


def test_log_append_and_read(store):
    msgs = _messages(7)
    store.append_messages(msgs[:4])
    store.append_messages(msgs[4:])
    assert store.log_length() == 7
    back = store.log_messages()
    assert [m.id for m in back] == [m.id for m in msgs]
    assert [m.digest for m in back] == [m.digest for m in msgs]  # what sync compares against a transcript
    assert back == msgs
    assert [dict(m.meta) for m in back] == [dict(m.meta) for m in msgs]
    assert list(back[2].meta["record"]) == ["z", "a"]  # key order kept for lossless round trips


def test_the_memory_store_holds_the_texts_a_disk_store_writes(tmp_path):
    """Its log, artifacts, edits and frozen meta records are encoded only when read back: what it then
    gives is byte for byte what a persistent backend stored (records move between backends unchanged)."""
    disk, memory = DiskStore(tmp_path / "s"), MemoryStore()
    edits = [ReplaceResult("budget", "c1", "[stored é]", artifact="abc"),
             Insert("status", "m4", (Message("st", "user", (Text("<status> ✓ \ud83d"),), Origin.STATUS),), "m4")]
    for s in (disk, memory):
        s.append_messages(_messages(5))
        s.put_artifact("output \ud83d é\n" * 50, kind="budget")
        s.add_edits(edits)
        s.set_meta_record("publisher", ("delta", 3), lambda r: {"strategy": r[0], "seq": r[1], "note": "é"})
        with pytest.raises(RuntimeError):
            with s.transaction():
                s.append_messages(_messages(2, start=5))
                s.add_edits(edits)
                s.set_meta_record("publisher", ("replace", 4), lambda r: {"strategy": r[0]})
                raise RuntimeError("crash")
    # An artifact's record names its file, which only the disk store has.
    texts = [{k: v for k, v in s.records() if not k.endswith(":info")} for s in (disk, memory)]
    assert texts[0] == texts[1] and any(k.startswith("logmsg:") for k in texts[0])
    assert memory.log_messages() == disk.log_messages() == _messages(5)
    assert memory.edits() == disk.edits() == edits
    assert memory.get_meta("publisher") == disk.get_meta("publisher") == {"strategy": "delta", "seq": 3, "note": "é"}
    disk.close()


def test_a_frozen_record_is_encoded_by_a_memory_store_only_when_read():
    """A memory-only session commits its status publisher state on most calls and reads back the
    object it committed: the store makes the record's JSON only if something reads the key."""
    made: list[int] = []

    def to_json(record: tuple[int, ...]) -> list[int]:
        made.append(1)
        return list(record)

    memory = MemoryStore()
    memory.set_meta_record("state", (1, 2), to_json)
    memory.set_meta_record("state", (1, 2, 3), to_json)
    assert made == []
    assert memory.get_meta("state") == [1, 2, 3] and made == [1]
    assert memory.get_meta("state") == [1, 2, 3] and made == [1]  # made once


def test_truncate_drops_edits_referring_to_removed_ids(store):
    store.append_messages(_messages(9))
    marker = Message("snip-1", "user", (Text("[snipped]"),), Origin.SNIP_MARKER)
    early = ReplaceResult("budget", "c1", "[stored]", artifact="abc")
    late = ReplaceResult("microcompact", "c7", "[cleared]")
    span = ReplaceMessages("snip", ("m3", "m4"), (marker,), tokens_freed=10)
    crossing = ReplaceMessages("collapse", ("m5", "m6"), ())
    status = Insert("status", None, (Message("st", "user", (Text("<status/>"),), Origin.STATUS),))
    store.add_edits([early, span, late, crossing, status])

    dropped = store.truncate_log(6)  # removes m6, m7 (calls c7), m8 (answers c7)
    assert dropped == 2
    assert [m.id for m in store.log_messages()] == [f"m{i}" for i in range(6)]
    assert store.edits() == [early, span, status]
    assert store.truncate_log(10) == 0
    with pytest.raises(ValueError):
        store.truncate_log(-1)


def test_truncate_dropping_only_a_result_drops_its_edit(store):
    store.append_messages(_messages(9))
    store.add_edits([ReplaceResult("budget", "c7", "[stored]"), ReplaceResult("budget", "c4", "[stored]")])
    assert store.truncate_log(8) == 1  # m8 answers c7; its content may differ after a rewind
    assert [e.call_id for e in store.edits()] == ["c4"]


def test_edits_keep_their_order_across_appends_and_drops(store):
    store.add_edits([ReplaceResult("snip", "c1", "first"), ReplaceResult("status", "c2", "x")])
    store.add_edits([ReplaceResult("snip", "c1", "second")])
    assert [e.content for e in store.edits()] == ["first", "x", "second"]  # a later edit wins when applied
    assert store.drop_edits("status") == 1
    assert [e.content for e in store.edits()] == ["first", "second"]
    assert store.drop_edits("status") == 0


def test_transaction_rolls_back_everything(store):
    store.append_messages(_messages(3))
    store.set_meta("epoch", 1)
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.append_messages(_messages(2, start=3))
            store.add_edits([ReplaceResult("budget", "c1", "x")])
            store.set_meta("epoch", 2)
            store.update_token_cache({"d1": 5})
            store.truncate_log(1)
            raise RuntimeError("crash")
    assert [m.id for m in store.log_messages()] == ["m0", "m1", "m2"]
    assert store.edits() == []
    assert store.get_meta("epoch") == 1
    assert store.token_cache() == {}


def test_only_the_failed_outer_transaction_rolls_back_with_its_nested_ones(store):
    with store.transaction():
        store.set_meta("kept", 1)
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.set_meta("kept", 2)
            with store.transaction():
                store.set_meta("inner", "x")
                store.set_meta("kept", 3)
            raise RuntimeError("crash")
    assert store.get_meta("kept") == 1
    assert store.get_meta("inner") is None
    with store.transaction():  # a later transaction starts from a clean slate
        store.set_meta("inner", "y")
    assert store.get_meta("inner") == "y"


def test_artifacts_are_content_addressed(store):
    a = store.put_artifact("big output\n" * 100, kind="budget", meta={"call_id": "c1"})
    b = store.put_artifact("big output\n" * 100, kind="snip")
    c = store.put_artifact("other", kind="budget")
    assert a == b and a.id != c.id
    assert a.id == content_digest("big output\n" * 100)[:16]
    assert a.tokens > 0
    assert store.get_artifact(a.id) == "big output\n" * 100
    assert store.artifact_info(a.id)["kind"] == "budget"
    with pytest.raises(ArtifactNotFoundError):
        store.get_artifact("0" * 16)
    directory = store.durable if isinstance(store, WriteBehindStore) else store
    if directory is not store:
        store.flush()       # a write-behind store's files are there once what it holds is stored
    if isinstance(directory, DiskStore):
        path = Path(a.path)
        assert path == directory.path / "artifacts" / f"{a.id}.txt"
        assert path.read_text() == "big output\n" * 100
    else:
        assert a.path is None


def test_meta_and_token_cache(store):
    assert store.get_meta("missing", 7) == 7
    store.set_meta("boundaries", [{"epoch": 1, "pre": 167000}])
    assert store.get_meta("boundaries") == [{"epoch": 1, "pre": 167000}]
    for i in range(40):  # more than the chunk limit: exercises the merge
        store.update_token_cache({f"d{i}": i, "d0": 0})
    assert store.token_cache() == {f"d{i}": i for i in range(40)}
    with pytest.raises(SessionError):
        store.set_meta("bad", object())


def test_reopen_reproduces_everything(persistent):
    view = _messages(4) + [Message("sum", "user", (Text("summary"),), Origin.SUMMARY, {"epoch": 1})]
    with persistent() as s:
        s.append_messages(_messages(6))
        s.add_edits([Compact(stage="autocompact", tail_start="m4", head=(view[-1],),
                             covered=("m0", "m1"), info={"trigger": "auto"})])
        art = s.put_artifact("stored", kind="budget")
        s.set_meta("epoch", 3)
        s.update_token_cache({"abc": 12})
    with persistent() as s:
        assert [m.id for m in s.log_messages()] == [f"m{i}" for i in range(6)]
        assert s.edits()[0].head == (view[-1],)
        assert s.edits()[0].covered == ("m0", "m1") and s.edits()[0].tail_start == "m4"
        assert s.get_artifact(art.id) == "stored"
        assert s.get_meta("epoch") == 3
        assert s.token_cache() == {"abc": 12}
        head = s.edits()[0].head[0]
        assert head.meta == {"epoch": 1} and head.origin is Origin.SUMMARY


def test_a_large_artifact_round_trips_across_reopen(persistent):
    content = "".join(f"line {i} \u00e9 \ud83d\n" for i in range(60_000))  # two PostgreSQL chunks
    with persistent() as s:
        art = s.put_artifact(content, kind="budget")
    with persistent() as s:
        assert s.get_artifact(art.id) == content
        assert s.artifact_info(art.id)["tokens"] == art.tokens


def test_a_writer_sees_what_another_store_object_committed(persistent):
    with persistent() as a, persistent() as b:
        with a.lock():
            a.set_meta("epoch", 1)
            assert a.get_meta("epoch") == 1
        with b.lock():
            assert b.get_meta("epoch") == 1
            b.set_meta("epoch", 2)
            b.append_messages(_messages(2))
        with a.lock():  # what `a` read under its last lock is stale now
            assert a.get_meta("epoch") == 2
            assert a.log_length() == 2


def test_open_rejects_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SessionError, match="not a directory"):
        DiskStore.open(tmp_path / "f")


_HOLDER = """
import sys, time
from worksurface.session.locations import open_store
store = open_store(sys.argv[1], sys.argv[2])
with store.lock():
    print("locked", flush=True)
    time.sleep(120)
"""


def test_lock_is_interprocess_and_released_when_holder_dies(backend):
    backend.store("sess").close()
    where = backend.where("sess")
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, where["location"], where["session_id"]],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with backend.store("sess") as s:
            with pytest.raises(SessionLockedError, match="locked by another process"):
                with s.lock(timeout=0.2):
                    pass
            with pytest.raises(SessionLockedError):
                with s.lock(timeout=0):
                    pass
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
            with s.lock(timeout=10):
                with s.lock(timeout=0):  # re-entrant within one store object
                    pass
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()


def test_two_stores_in_one_process_exclude_each_other(persistent):
    with persistent() as a, persistent() as b:
        with a.lock():
            with pytest.raises(SessionLockedError):
                with b.lock(timeout=0.1):
                    pass
        with b.lock(timeout=1):
            pass
