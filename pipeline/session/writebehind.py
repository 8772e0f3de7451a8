"""A session kept hot in memory in front of its durable store, its writes applied behind the caller.

A long-lived process that owns its sessions (the gateway: one process per conversation) reads a
session's state once and then only writes it. `WriteBehindStore` answers every read from memory (a
key it has not seen is read through from the durable store once), and turns each committed
transaction into one batch that a `Flusher` thread applies to the durable store in one transaction of
its own, in commit order, while the caller goes on. `durable()` is a future that completes once
everything committed so far is stored: the gateway holds the end of an answer until then, so what a
client saw answered is durable and a replica taking the next call reads it.

The durable store is only ever behind, never different: batches are applied in order, each all or
nothing, so after a crash it holds the state of some earlier commit. A failed batch fails the store
(`StoreWriteError` on its next use); the owner then drops the hot copy and reopens the session from
what is stored. The process must own the session: another writer's commits are not seen here.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from ..core.errors import SessionError
from .memstore import MemoryStore
from .store import Store

log = logging.getLogger(__name__)

def DELETED() -> str:
    """The value of a key deleted in memory (a sentinel in the memory store's place of an encoder: never called)."""
    raise AssertionError("a deleted key has no text")


class StoreWriteError(SessionError):
    """The durable store refused a batch of a write-behind session: the hot copy is ahead of what is
    stored, so it is no longer used (reopen the session from the store)."""


class WriteBehindStore(MemoryStore):
    """`durable`'s contract, read from memory and written behind (module doc). `flusher` applies the
    batches (a process shares one). The memory store's texts and undo journal hold the hot copy: a key
    it has not seen is read through from `durable`, a deleted one is DELETED (never read through again),
    and each outermost transaction's touched keys (the journal's) become one batch."""

    persistent = True

    def __init__(self, durable: Store, flusher: "Flusher") -> None:
        self.durable = durable      # first: the memory store's lock names this store's location
        super().__init__(durable.counter)
        self._flusher = flusher
        self._failure: BaseException | None = None
        self._last: Future[None] = _done()
        self._guard = threading.Lock()              # `_last` and `_failure`, set by the flusher's thread

    @property
    def location(self) -> str:
        return self.durable.location

    @property
    def failed(self) -> BaseException | None:
        """Why a batch could not be stored (None: every batch so far was, or is on its way)."""
        return self._failure

    # --- key-value layer ---------------------------------------------------------------------------

    def _get(self, key: str) -> str | None:
        if key not in self._data:
            text = self.durable._get(key)
            self._data[key] = DELETED if text is None else text
            return text
        if self._data[key] is DELETED:
            return None
        return super()._get(key)

    def _get_many(self, keys: Sequence[str]) -> list[str | None]:
        missing = [k for k in keys if k not in self._data]
        if missing:
            for key, text in zip(missing, self.durable._get_many(missing)):
                self._data[key] = DELETED if text is None else text
        return [self._get(k) for k in keys]

    def _delete(self, key: str) -> None:
        self._set(key, DELETED)

    def _set(self, key: str, value: Any) -> None:
        if not self._depth:     # a write outside a transaction is a transaction of its own
            with self._atomic():
                super()._set(key, value)
            return
        super()._set(key, value)

    def _keys(self) -> list[str]:
        keys = dict.fromkeys(self.durable._keys())
        keys.update(dict.fromkeys(self._data))
        return [k for k in keys if self._data.get(k) is not DELETED]

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        self._check_usable()
        outermost = self._depth == 0
        with super()._atomic():     # rolled back from the journal if the block raises
            yield
            if outermost and self._undo:
                batch = {key: self._data[key] for key in self._undo}
                with self._guard:
                    self._last = self._flusher.submit(self, batch)

    def _materialize(self, artifact_id: str, content: str) -> str | None:
        # The file is written behind too, ahead of the batches committed after it: it is there before the
        # answer that names it ends (a model opens it only in a later call); the content is in the store.
        self._check_usable()
        path, write = self.durable._materialize_later(artifact_id, content)
        future = self._flusher.submit_write(self, write)
        with self._guard:
            self._last = future
        return path

    def lock(self, timeout: float = 30.0) -> Any:
        """This object's lock (the process owns the session: the durable store's lock is taken per batch)."""
        self._check_usable()
        return super().lock(timeout)

    def check(self) -> None:
        self.durable.check()

    def _committed_before(self) -> bool:
        return self.durable._committed_before()

    # --- durability --------------------------------------------------------------------------------

    def durable_future(self) -> "Future[None]":
        """Completes once every transaction committed so far is in the durable store (with the
        `StoreWriteError` of a batch that could not be stored)."""
        with self._guard:
            return self._last

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything committed is stored; `StoreWriteError` if a batch was not."""
        self.durable_future().result(timeout)

    def close(self) -> None:
        """Store what is still on its way, then release the durable store."""
        try:
            if self._failure is None:
                self.flush()
        finally:
            self.durable.close()

    def _check_usable(self) -> None:
        failure = self._failure
        if failure is not None:
            raise StoreWriteError(f"{self.location}: a write behind the session failed ({failure}); the hot copy "
                                  "is no longer used: reopen the session from the store") from failure

    def _fail(self, exc: BaseException) -> None:
        with self._guard:
            if self._failure is None:
                self._failure = exc



def _done() -> "Future[None]":
    future: Future[None] = Future()
    future.set_result(None)
    return future


# A queued piece of work: a batch (key -> text, encoder or DELETED) or a file write, and its future.
_Work = tuple[WriteBehindStore, "dict[str, Any] | Callable[[], object]", "Future[None]"]


class Flusher:
    """One thread applying write-behind batches to their durable stores, in the order they were
    committed. Batches of one store that queue up while the thread is busy are applied as one
    transaction (the later value of a key wins): the durable store then skips the states between."""

    def __init__(self, name: str = "worksurface-write-behind") -> None:
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    def submit(self, store: WriteBehindStore, batch: dict[str, Any]) -> "Future[None]":
        """Apply `batch` (key -> text, encoder or DELETED) to `store`'s durable store in one transaction."""
        return self._put(store, batch)

    def submit_write(self, store: WriteBehindStore, write: Callable[[], object]) -> "Future[None]":
        """Run `write` (an artifact's file) before the batches submitted after it."""
        return self._put(store, write)

    def _put(self, store: WriteBehindStore, work: "dict[str, Any] | Callable[[], object]") -> "Future[None]":
        if self._closed:
            raise StoreWriteError(f"{store.location}: the write-behind thread is stopped")
        future: Future[None] = Future()
        self._queue.put((store, work, future))
        return future

    def close(self) -> None:
        """Apply what is queued, then stop the thread."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            pending = [item]
            while True:         # what queued meanwhile goes in the same round
                try:
                    pending.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(p is None for p in pending)
            # In submission order; the batches between two files are merged per store (their futures
            # complete together, after the batches before them).
            rounds: dict[int, tuple[WriteBehindStore, dict[str, Any], list[Future[None]]]] = {}
            for p in pending:
                if p is None:
                    continue
                store, work, future = p
                if callable(work):
                    self._apply_all(rounds)
                    self._write(store, work, future)
                    continue
                merged = rounds.setdefault(id(store), (store, {}, []))
                merged[1].update(work)
                merged[2].append(future)
            self._apply_all(rounds)

    def _apply_all(self, rounds: dict[int, tuple[WriteBehindStore, dict[str, Any], list["Future[None]"]]]) -> None:
        for store, batch, futures in rounds.values():
            self._apply(store, batch, futures)
        rounds.clear()

    @staticmethod
    def _write(store: WriteBehindStore, write: Callable[[], object], future: "Future[None]") -> None:
        error: BaseException | None = store.failed
        if error is None:
            try:
                write()
            except BaseException as exc:
                log.warning("write-behind file not written at %s: %s", store.location, exc)
                store._fail(exc)
                error = exc
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(StoreWriteError(f"{store.location}: not stored ({error})"))

    @staticmethod
    def _apply(store: WriteBehindStore, batch: dict[str, Any], futures: list["Future[None]"]) -> None:
        error: BaseException | None = store.failed
        if error is None:
            try:
                durable = store.durable
                with durable.lock(), durable.transaction():
                    for key, value in batch.items():
                        if value is DELETED:
                            durable._delete(key)
                        else:
                            durable._put(key, value() if callable(value) else value)
            except BaseException as exc:   # the store is failed; its owner reopens it from what is stored
                log.warning("write-behind batch not stored at %s: %s", store.location, exc)
                store._fail(exc)
                error = exc
        for future in futures:
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(StoreWriteError(f"{store.location}: not stored ({error})"))
