"""session.writebehind: a hot session in front of its durable store stores, once flushed, exactly
what the durable store would hold had it been written directly; batches are applied in commit order
(several queued ones as one transaction); a batch the store refuses fails the hot copy and leaves
the store at its last stored commit. And the gateway forwards the same bytes with hot sessions as
without, its store then reopening to the same view."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from pathlib import Path
from typing import Any, Iterator

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worksurface.core.errors import SessionError
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.session.diskstore import DiskStore
from worksurface.formats import ownmark
from worksurface.session import session as session_module
from worksurface.session.session import Session
from worksurface.session.writebehind import Flusher, StoreWriteError, WriteBehindStore

from fake_anthropic import FakeAnthropic
from gateway_helpers import running_gateway
from test_gateway_api import WINDOW, reader, run_anthropic_session


@pytest.fixture
def flusher() -> Iterator[Flusher]:
    f = Flusher()
    yield f
    f.close()


def _records(store: Any) -> list[tuple[str, Any]]:
    """A store's records, its own directory named alike (an artifact's record holds its file's path)."""
    own = str(getattr(store, "durable", store).path)
    return [(k, json.loads(v.replace(own, "<dir>"))) for k, v in store.records()]


_KEYS = st.sampled_from(["a", "b", "c", "epoch", "status"])
_OPS = st.lists(st.one_of(
    st.tuples(st.just("meta"), _KEYS, st.integers(-3, 3) | st.text(max_size=8)),
    st.tuples(st.just("append"), st.integers(1, 3), st.just(None)),
    st.tuples(st.just("truncate"), st.integers(0, 6), st.just(None)),
    st.tuples(st.just("artifact"), st.text(min_size=1, max_size=20), st.just(None)),
    st.tuples(st.just("failed-transaction"), _KEYS, st.integers())), max_size=14)


def _apply(store: Any, ops: list[tuple[str, Any, Any]]) -> None:
    appended = 0
    for kind, a, b in ops:
        if kind == "meta":
            store.set_meta(a, b)
        elif kind == "append":
            store.append_messages([Message(f"m{appended + i}", "user", (Text(f"text {appended + i}"),))
                                   for i in range(a)])
            appended += a
        elif kind == "truncate":
            store.truncate_log(min(a, store.log_length()))
        elif kind == "artifact":
            store.put_artifact(a, kind="budget")
        else:
            with pytest.raises(RuntimeError), store.transaction():
                store.set_meta(a, b)
                raise RuntimeError("rolled back")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_a_flushed_hot_store_holds_what_a_direct_write_holds(tmp_path_factory: Any, flusher: Flusher,
                                                             ops: list[tuple[str, Any, Any]]) -> None:
    root = tmp_path_factory.mktemp("wb")
    direct = DiskStore(root / "direct")
    hot = WriteBehindStore(DiskStore(root / "hot"), flusher)
    _apply(direct, ops)
    _apply(hot, ops)
    assert _records(hot) == _records(direct)           # what the hot copy reads
    hot.flush()
    assert _records(hot.durable) == _records(direct)   # what it stored
    hot.close()
    direct.close()
    reopened, again = DiskStore(root / "hot"), DiskStore(root / "direct")
    try:
        assert _records(reopened) == _records(again)
    finally:
        reopened.close()
        again.close()


def _conversation(n: int) -> list[Message]:
    out = [Message("u0", "user", (Text("Fix the parser and run the tests."),))]
    for i in range(n):
        out.append(Message(f"a{i}", "assistant", (ToolCall(f"c{i}", "Read", {"file_path": f"src/m{i}.py"}),)))
        out.append(Message(f"r{i}", "user", (ToolResult(f"c{i}", f"contents of m{i}\n" * 200),)))
    return out


def test_a_session_kept_hot_reopens_from_its_directory_to_the_same_views(tmp_path: Path, flusher: Flusher) -> None:
    transcript = _conversation(30)
    hot = Session.open(WriteBehindStore(DiskStore(tmp_path / "hot"), flusher), window=9000)
    direct = Session.open(tmp_path / "direct", window=9000)
    views = []
    for end in range(3, len(transcript) + 1, 4):
        a, b = hot.prepare(transcript[:end], now=1000.0 + end), direct.prepare(transcript[:end], now=1000.0 + end)
        # Alike but for the artifact paths a marker names (each store's own directory).
        assert _texts(a.messages, tmp_path / "hot") == _texts(b.messages, tmp_path / "direct")
        views.append([m.digest for m in a.messages])
    assert any(len(v) < end for v in views), "a stage fired along the way"
    hot.close()
    direct.close()
    with Session.open(tmp_path / "hot", window=9000) as reopened:    # checks the stored view rebuilds
        assert [m.digest for m in reopened.view()] == views[-1]


def _texts(messages: list[Message], own: Path) -> list[tuple[str, str]]:
    return [(m.role, m.text.replace(str(own), "<dir>")) for m in messages]


class _Refusing(DiskStore):
    """A directory store whose writes fail once `refuse` is set (a full disk, say)."""

    refuse = False

    def _put(self, key: str, text: str) -> None:
        if self.refuse:
            raise SessionError(f"{self.path}: cannot write the session (disk full)")
        super()._put(key, text)


def test_a_refused_batch_fails_the_hot_copy_and_the_store_keeps_its_last_stored_commit(tmp_path: Path,
                                                                                      flusher: Flusher) -> None:
    durable = _Refusing(tmp_path / "s")
    hot = WriteBehindStore(durable, flusher)
    hot.set_meta("epoch", 1)
    hot.flush()
    durable.refuse = True
    with hot.transaction():
        hot.set_meta("epoch", 2)
        hot.set_meta("status", "after")
    with pytest.raises(StoreWriteError, match="disk full"):
        hot.flush()
    assert isinstance(hot.failed, SessionError)
    with pytest.raises(StoreWriteError, match="reopen the session"):
        hot.lock()
    with pytest.raises(StoreWriteError):
        hot.set_meta("epoch", 3)
    hot.close()     # does not try to store what failed; releases the durable store
    kept = DiskStore(tmp_path / "s")
    assert kept.get_meta("epoch") == 1 and kept.get_meta("status") is None
    kept.close()


class _Counting(DiskStore):
    transactions = 0

    def _atomic(self) -> Any:
        type(self).transactions += 1
        return super()._atomic()


def test_batches_queued_behind_a_busy_store_are_applied_in_order_as_one(tmp_path: Path, flusher: Flusher) -> None:
    durable = _Counting(tmp_path / "s")
    hot = WriteBehindStore(durable, flusher)
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:     # another process's reader holding the session's lock: the flusher waits
        with DiskStore(tmp_path / "s").lock():
            holding.set()
            release.wait(10)
    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    _Counting.transactions = 0
    for epoch in range(1, 6):
        hot.set_meta("epoch", epoch)
        hot.set_meta(f"seen{epoch}", True)
    assert hot.get_meta("epoch") == 5      # the hot copy answers at once
    release.set()
    holder.join()
    hot.flush()
    assert durable.get_meta("epoch") == 5 and all(durable.get_meta(f"seen{e}") for e in range(1, 6))
    assert _Counting.transactions <= 2     # the first batch (maybe already waiting), then the rest as one
    hot.close()


def test_the_gateway_forwards_the_same_bytes_with_hot_sessions_as_without(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Everything a view's size depends on alike in both runs: the store's path (an artifact's path is in
    # the view), the marks' key and the status bar's clock (both are text the view's size counts).
    store = tmp_path / "store"
    monkeypatch.setattr(ownmark, "new_key", lambda: b"k" * 16)
    monkeypatch.setattr(session_module, "time", SimpleNamespace(time=lambda: 1_800_000_000.0,
                                                                perf_counter=time.perf_counter))
    sent: dict[bool, list[Any]] = {}
    for hot in (True, False):
        with FakeAnthropic(cache=True, script=reader()) as fake, \
                running_gateway(store, fake.url, session=WINDOW, hot_sessions=hot) as gw:
            assert gw.gateway is not None and (gw.gateway.flusher is not None) is hot
            client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
            run_anthropic_session(client, 24, stream=True)
            (session_id,) = [s["id"] for s in gw.sessions()]
        sent[hot] = [_masked(r.body) for r in fake.messages()]
        # What the gateway stored reopens (the stored log and edits rebuild the last view).
        with Session.open(store, session_id=session_id, window=WINDOW["window"]) as reopened:
            assert reopened.view()
        store.rename(tmp_path / f"done-{hot}")
    for k, (x, y) in enumerate(zip(sent[True], sent[False])):
        assert x == y, f"request {k}: " + _first_difference(x, y)
    assert len(sent[True]) == len(sent[False]) == 24
    assert any(len(b) < len(a) for a, b in zip(sent[True], sent[True][1:])), "it compacted"


def _masked(body: dict[str, Any]) -> str:
    """A forwarded body with the parts that differ by design between two gateways masked (the marks'
    per-session tag and the status bar's clock)."""
    import re
    text = json.dumps(body, sort_keys=True)
    text = re.sub(r"tag=[0-9a-f]{8,}", "tag=*", text)
    text = re.sub(r'generated-at=\\"[^"\\]*\\"', "generated-at=*", text)
    return text


def _first_difference(a: str, b: str) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"{a[max(0, i - 300):i + 200]!r}\n---\n{b[max(0, i - 300):i + 200]!r}"
