"""Session storage: the append-only message log, sticky edits, artifacts, metadata and the last view.

`SessionStore` keeps a session in a directory (diskcache over SQLite) so a harness process can crash,
restart and reproduce the same view byte for byte. `MemoryStore` has the same API in memory, for the
one-shot `compact()`. Both keep every value as JSON text behind one small key-value layer, so they
behave identically and a transaction can roll back either one.

Directory layout: `db/` (the diskcache), `artifacts/<id>.txt` (artifact files a model can open),
`lock` (the inter-process lock file). A session holds what the transcript held, secrets included: the
directories it creates are private (0700) and its artifact and lock files 0600.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Self, Sequence

import diskcache

from ..core.edits import Edit, edit_from_json, edit_to_json, refers_to
from ..core.errors import ArtifactNotFoundError, SessionError, SessionLockedError
from ..core.fileio import PRIVATE_FILE_MODE, atomic_write
from ..core.model import Message
from ..core.serial import message_from_json, message_to_json
from ..engine.state import Artifact
from ..core.tokens import TokenCounter

# Bumped when the key layout changes, so an old directory is refused instead of misread.
STORE_VERSION = 1
# The artifact id is this many hex chars of the content's blake2b: 64 bits, collision-free in practice
# for one session, and short enough to quote in a marker the model reads.
ARTIFACT_ID_CHARS = 16
# How often a waiting `lock()` retries; short enough to feel instant, long enough not to spin.
LOCK_POLL_SECONDS = 0.05
# The token cache is written as appended chunks (cheap updates); past this many it is merged into one
# so reading it stays a handful of lookups.
TOKEN_CACHE_MAX_CHUNKS = 32
# diskcache defaults to evicting old entries past 1 GB; a session must never lose data silently.
# diskcache keeps values of `disk_min_file_size` bytes or more in separate files and deletes those
# files at once inside a transaction, before the SQL commit: a crash then leaves rows pointing at
# missing files, which no rollback brings back. Every value stays inside SQLite (its limit is 1 GB a
# value), so a transaction is all or nothing.
INLINE_VALUE_LIMIT = 2**30 - 1
DISKCACHE_SETTINGS: dict[str, Any] = {"eviction_policy": "none", "statistics": 0, "tag_index": 0,
                                      "disk_min_file_size": INLINE_VALUE_LIMIT}
# Session directories (the session, its db and artifacts) are created readable by their owner only.
PRIVATE_DIR_MODE = 0o700


def _dumps(value: Any, what: str) -> str:
    """JSON text for storage. ASCII-escaped so lone surrogates from odd transcripts survive SQLite;
    key order kept (not sorted) so raw provider records round-trip unchanged."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise SessionError(f"cannot store {what}: not JSON-serializable ({exc})") from None


def content_digest(content: str) -> str:
    """The full blake2b hex digest an artifact is addressed by."""
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass")).hexdigest()


def _edit_refs(data: Mapping[str, Any]) -> tuple[str, ...]:
    return edit_from_json(dict(data)).refs


class Store(ABC):
    """The session store API (type against this to accept either backend). Implemented once over a
    tiny key-value layer of JSON texts (`_get`, `_put`, `_delete`, `_atomic`) that backends provide."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter
        self._token_mirror: dict[str, int] | None = None

    # --- key-value layer (backends) ---------------------------------------------------------------

    @abstractmethod
    def _get(self, key: str) -> str | None: ...

    @abstractmethod
    def _put(self, key: str, text: str) -> None: ...

    @abstractmethod
    def _delete(self, key: str) -> None: ...

    @abstractmethod
    def _keys(self) -> list[str]:
        """Every key held (a snapshot: the caller may write while iterating)."""

    @abstractmethod
    def _atomic(self) -> Any:
        """A context manager making the writes inside one all-or-nothing unit (nestable)."""

    @abstractmethod
    def _materialize(self, artifact_id: str, content: str) -> str | None:
        """Write the artifact where a model can open it; return the path (None: no file)."""

    @abstractmethod
    def lock(self, timeout: float = 30.0) -> Any:
        """Serialize users of this session (re-entrant within one store object)."""

    def close(self) -> None:
        """Release resources; the store must not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self, key: str, default: Any = None) -> Any:
        text = self._get(key)
        return default if text is None else json.loads(text)

    def _save(self, key: str, value: Any, what: str) -> None:
        self._put(key, _dumps(value, what))

    # --- transactions -----------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all (an exception rolls them back).
        Artifact files are written before the commit; an orphan file after a crash is harmless."""
        try:
            with self._atomic():
                yield
        except BaseException:
            # The mirror may hold entries the rollback discarded; reload it from storage when needed.
            self._token_mirror = None
            raise

    # --- copying (fork) ---------------------------------------------------------------------------

    def copy_to(self, other: "Store") -> None:
        """Copy everything this store holds (log, edits, artifacts, metadata, ledger, token
        counts) into the empty store `other`, as one snapshot: under this store's lock, in one
        transaction of `other`. Artifact files are written where `other` keeps them; their recorded
        path becomes the new one (the texts already in the view keep naming the old path, so the
        child's view stays byte-identical to the parent's). Later writes on either side stay there."""
        if other is self:
            raise SessionError("cannot copy a session store onto itself")
        with self.lock(), other.lock():
            if other.log_length() or other._edit_count() or any(k.startswith("meta:") for k in other._keys()):
                raise SessionError(f"{getattr(other, 'path', '<memory store>')}: the destination of a fork "
                                   "must be a new, empty session")
            with other.transaction():
                for key in self._keys():
                    if key == "store:version":
                        continue
                    text = self._get(key)
                    if text is None:
                        continue
                    if key.startswith("artifact:") and key.endswith(":info"):
                        continue  # written below, with the destination's path
                    other._put(key, text)
                    if key.startswith("artifact:"):
                        artifact_id = key.split(":", 1)[1]
                        info = self._load(f"{key}:info") or {}
                        path = other._materialize(artifact_id, json.loads(text))
                        other._save(f"{key}:info", {**info, "path": path}, f"artifact {artifact_id} meta")
        other._token_mirror = None

    # --- message log ------------------------------------------------------------------------------

    def log_length(self) -> int:
        """Number of messages in the log."""
        return int(self._load("log:len", 0))

    def log_messages(self) -> list[Message]:
        """The logged messages, in order."""
        return [message_from_json(self._load(f"logmsg:{i}")) for i in range(self.log_length())]

    def append_messages(self, messages: Iterable[Message]) -> None:
        """Append to the log; one key per entry, so the existing log is never rewritten."""
        with self.transaction():
            n = self.log_length()
            for m in messages:
                self._save(f"logmsg:{n}", message_to_json(m), f"message {m.id!r}")
                calls = [c.id for c in m.tool_calls] + [r.call_id for r in m.tool_results]
                self._save(f"log:{n}", {"id": m.id, "digest": m.digest, "calls": calls},
                           f"message {m.id!r}")
                n += 1
            self._save("log:len", n, "log length")

    def truncate_log(self, n: int) -> int:
        """Keep the first `n` messages; drop the edits that refer to a removed message, by its id or by
        a tool-call id it calls or answers. Returns how many were dropped."""
        if n < 0:
            raise ValueError(f"truncate_log: n must be >= 0, not {n}")
        with self.transaction():
            length = self.log_length()
            if n >= length:
                return 0
            removed = set()
            for i in range(n, length):
                entry = self._load(f"log:{i}")
                removed.add(entry["id"])
                removed.update(entry["calls"])
                self._delete(f"log:{i}")
                self._delete(f"logmsg:{i}")
            self._save("log:len", n, "log length")
            kept = [e for e in self._edit_jsons() if not refers_to(_edit_refs(e), removed)]
            dropped = self._edit_count() - len(kept)
            if dropped:
                self._rewrite_edits(kept)
            return dropped

    # --- edits ------------------------------------------------------------------------------------

    def _edit_count(self) -> int:
        return int(self._load("edits:len", 0))

    def _edit_jsons(self) -> list[dict[str, Any]]:
        return [self._load(f"edit:{i}") for i in range(self._edit_count())]

    def edits(self) -> list[Edit]:
        """Every stored edit, in the order the core applies them."""
        return [edit_from_json(e) for e in self._edit_jsons()]

    def add_edits(self, edits: Iterable[Edit]) -> None:
        """Append edits, after the stored ones (the core applies them in this order)."""
        with self.transaction():
            n = self._edit_count()
            for edit in edits:
                self._save(f"edit:{n}", edit_to_json(edit), f"{edit.stage} edit")
                n += 1
            self._save("edits:len", n, "edit count")

    def drop_edits(self, stage: str) -> int:
        """Remove every edit a stage made (the status bar starts over after a rewind); returns how many."""
        with self.transaction():
            kept = [e for e in self._edit_jsons() if e["stage"] != stage]
            dropped = self._edit_count() - len(kept)
            if dropped:
                self._rewrite_edits(kept)
            return dropped

    def _rewrite_edits(self, kept: Sequence[dict[str, Any]]) -> None:
        for i in range(self._edit_count()):
            self._delete(f"edit:{i}")
        self._save("edits:len", 0, "edit count")
        self.add_edits(edit_from_json(e) for e in kept)

    # --- artifacts --------------------------------------------------------------------------------

    def put_artifact(self, content: str, *, kind: str, meta: dict[str, Any] | None = None) -> Artifact:
        """Store `content` under its content address (same content, same id); implements
        `state.ArtifactSink`. The first put of a content keeps its kind and meta."""
        digest = content_digest(content)
        artifact_id = digest[:ARTIFACT_ID_CHARS]
        path = self._materialize(artifact_id, content)
        with self.transaction():
            known = self._load(f"artifact:{artifact_id}:info")
            if known is not None:
                return Artifact(artifact_id, path, known["tokens"])
            tokens = self._token_counter().text(content)
            self._put(f"artifact:{artifact_id}", _dumps(content, f"artifact {artifact_id}"))
            self._save(f"artifact:{artifact_id}:info",
                       {"digest": digest, "kind": kind, "meta": meta or {}, "tokens": tokens, "path": path},
                       f"artifact {artifact_id} meta")
        return Artifact(artifact_id, path, tokens)

    def get_artifact(self, id: str) -> str:
        """The stored content of artifact `id`; `ArtifactNotFoundError` if there is none."""
        text = self._get(f"artifact:{id}")
        if text is None:
            raise ArtifactNotFoundError(f"no artifact {id!r} in this session")
        return json.loads(text)

    def artifact_ids(self) -> list[str]:
        """The ids of every artifact the session holds."""
        return sorted(k.split(":")[1] for k in self._keys() if k.startswith("artifact:") and k.endswith(":info"))

    def artifact_info(self, id: str) -> dict[str, Any]:
        """What was recorded with artifact `id`: digest, kind, meta, tokens, path."""
        info = self._load(f"artifact:{id}:info")
        if info is None:
            raise ArtifactNotFoundError(f"no artifact {id!r} in this session")
        return info

    def _token_counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter()
        return self._counter

    # --- metadata ---------------------------------------------------------------------------------

    def get_meta(self, key: str, default: Any = None) -> Any:
        """A metadata value (epoch, last_prepare_time, consecutive_failures, boundaries, ...)."""
        return self._load(f"meta:{key}", default)

    def set_meta(self, key: str, value: Any) -> None:
        """Set a JSON-able metadata value."""
        self._save(f"meta:{key}", value, f"meta {key!r}")

    # --- token-count cache ------------------------------------------------------------------------

    def _tokens(self) -> dict[str, int]:
        if self._token_mirror is None:
            merged: dict[str, int] = {}
            for i in range(int(self._load("tokens:len", 0))):
                merged.update(self._load(f"tokens:{i}"))
            self._token_mirror = merged
        return self._token_mirror

    def token_cache(self) -> dict[str, int]:
        """Persisted token counts, block digest -> count."""
        return dict(self._tokens())

    def update_token_cache(self, counts: Mapping[str, int]) -> None:
        """Persist counts not stored yet. A count is a pure function of the block, so only new keys
        are written, as an appended chunk; chunks are merged once there are many."""
        mirror = self._tokens()
        new = {k: v for k, v in counts.items() if mirror.get(k) != v}
        if not new:
            return
        with self.transaction():
            chunks = int(self._load("tokens:len", 0))
            if chunks >= TOKEN_CACHE_MAX_CHUNKS:
                for i in range(1, chunks):
                    self._delete(f"tokens:{i}")
                self._save("tokens:0", {**mirror, **new}, "token cache")
                self._save("tokens:len", 1, "token cache")
            else:
                self._save(f"tokens:{chunks}", new, "token cache")
                self._save("tokens:len", chunks + 1, "token cache")
            mirror.update(new)


class SessionStore(Store):
    """A session kept in a directory; see the module docstring for the layout."""

    def __init__(self, path: str | os.PathLike[str], counter: TokenCounter | None = None) -> None:
        super().__init__(counter)
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise SessionError(f"{self.path}: not a directory")
        try:
            for folder in (self.path, self.path / "artifacts", self.path / "db"):
                folder.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(self.path / "db"), **DISKCACHE_SETTINGS)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            raise SessionError(f"{self.path}: cannot open session directory ({exc})") from None
        self._lock_fd: int | None = None
        self._lock_depth = 0
        self._thread_lock = threading.RLock()
        version = self._load("store:version")
        if version is None:
            self._save("store:version", STORE_VERSION, "store version")
        elif version != STORE_VERSION:
            self._cache.close()
            raise SessionError(f"{self.path}: session store version {version}, this worksurface "
                               f"reads version {STORE_VERSION}")

    @classmethod
    def open(cls, path: str | os.PathLike[str], counter: TokenCounter | None = None) -> "SessionStore":
        """Open (creating if needed) the session directory at `path`."""
        return cls(path, counter)

    def close(self) -> None:
        self._cache.close()

    def _get(self, key: str) -> str | None:
        return self._cache.get(key)

    def _put(self, key: str, text: str) -> None:
        self._cache.set(key, text)

    def _delete(self, key: str) -> None:
        self._cache.delete(key)

    def _keys(self) -> list[str]:
        return [str(k) for k in self._cache.iterkeys()]

    def _atomic(self) -> Any:
        return self._cache.transact()

    def _materialize(self, artifact_id: str, content: str) -> str:
        path = self.path / "artifacts" / f"{artifact_id}.txt"
        if not path.exists():
            atomic_write(path, content, PRIVATE_FILE_MODE)
        return os.path.abspath(path)  # a marker names a path the model can open from any directory

    @contextmanager
    def lock(self, timeout: float = 30.0) -> Iterator[None]:
        """Hold the session's inter-process lock (`flock` on `<dir>/lock`; the OS releases it when
        the holder dies). Re-entrant within this object. Raises `SessionLockedError` after `timeout`."""
        deadline = time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout=max(timeout, 0.0)):
            raise SessionLockedError(f"{self.path}: session is locked by another thread "
                                     f"(waited {timeout:g} s)")
        try:
            if self._lock_depth == 0:
                self._lock_fd = self._acquire(deadline, timeout)
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0 and self._lock_fd is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                    os.close(self._lock_fd)
                    self._lock_fd = None
        finally:
            self._thread_lock.release()

    def _acquire(self, deadline: float, timeout: float) -> int:
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise SessionLockedError(
                        f"{self.path}: session is locked by another process (waited {timeout:g} s)") from None
                time.sleep(LOCK_POLL_SECONDS)


class MemoryStore(Store):
    """The same API kept in memory (the one-shot `compact()`); artifacts have no file (path None)."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        super().__init__(counter)
        self._data: dict[str, str] = {}
        self._depth = 0
        self._lock = threading.RLock()
        # Inside a transaction: each touched key's value before it (None: absent), to roll back to.
        # An undo journal rather than a copy of everything, so a call's commit costs what it writes.
        self._undo: dict[str, str | None] = {}

    def _get(self, key: str) -> str | None:
        return self._data.get(key)

    def _put(self, key: str, text: str) -> None:
        if self._depth and key not in self._undo:
            self._undo[key] = self._data.get(key)
        self._data[key] = text

    def _delete(self, key: str) -> None:
        if self._depth and key not in self._undo:
            self._undo[key] = self._data.get(key)
        self._data.pop(key, None)

    def _keys(self) -> list[str]:
        return list(self._data)

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        outermost = self._depth == 0
        self._depth += 1
        try:
            yield
        except BaseException:
            if outermost:
                for key, old in self._undo.items():
                    if old is None:
                        self._data.pop(key, None)
                    else:
                        self._data[key] = old
            raise
        finally:
            self._depth -= 1
            if outermost:
                self._undo = {}

    def _materialize(self, artifact_id: str, content: str) -> None:
        return None

    @contextmanager
    def lock(self, timeout: float = 30.0) -> Iterator[None]:
        """A thread lock with the same timeout behaviour as `SessionStore.lock`."""
        if not self._lock.acquire(timeout=timeout):
            raise SessionLockedError(f"<memory store>: locked by another thread (waited {timeout:g} s)")
        try:
            yield
        finally:
            self._lock.release()


__all__ = ["MemoryStore", "SessionStore", "Store", "content_digest"]
