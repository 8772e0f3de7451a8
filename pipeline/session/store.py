"""The session store contract: the append-only message log, sticky edits, artifacts, metadata, the
token cache and transactions, implemented once (`Store`) over a tiny key-value layer of JSON texts
that each backend provides.

Backends: `DiskStore` (`diskstore.py`: a directory, diskcache over SQLite, the embedded default),
`PostgresStore` (`pgstore.py`: one session in a PostgreSQL database, for workers on several hosts)
and `MemoryStore` (`memstore.py`: the one-shot `compact()`). Every value is JSON text, so the backends behave
identically, a transaction rolls back any of them, and a session moves between them record by record
(`records` / `restore`: fork, export, import). Every read is checked (`integrity.py`). The memory
store encodes a logged message, its index entry, an artifact, an edit or a frozen meta record when it
is first read (`_put_deferred`): the text is the same, and a session that never reads them back (a
one-shot compaction, a memory-only session) does not pay for it.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping, Self, Sequence

from ..core.edits import Edit, edit_from_json, edit_to_json, refers_to
from ..core.errors import ArtifactNotFoundError, SessionError, SessionLockedError
from ..core.jsontext import EncodedJSON, encode
from ..core.lazy import lazy_getattr
from ..core.model import Message
from ..core.serial import message_from_json, message_to_json
from ..core.tokens import TokenCounter
from ..engine.state import Artifact
from . import integrity
from .integrity import VERSION_KEY

# Bumped when the key layout changes, so an old store is refused instead of misread.
STORE_VERSION = 1
# The artifact id is this many hex chars of the content's blake2b: 64 bits, collision-free in practice
# for one session, and short enough to quote in a marker the model reads.
ARTIFACT_ID_CHARS = 16
# The token cache is written as appended chunks (cheap updates); past this many it is merged into one
# so reading it stays a handful of lookups.
TOKEN_CACHE_MAX_CHUNKS = 32
ARTIFACT_PREFIX = "artifact:"
INFO_SUFFIX = ":info"


def _dumps(value: Any, what: str) -> str:
    """JSON text for storage. ASCII-escaped so lone surrogates from odd transcripts survive SQLite (and
    no NUL reaches PostgreSQL's text); key order kept (not sorted) so raw provider records round-trip."""
    try:
        return encode(value)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"cannot store {what}: not JSON-serializable ({exc})") from None


def _dumps_record(record: Any, to_json: Callable[[Any], Any], what: str) -> str:
    return _dumps(to_json(record), what)


def _dumps_edit(edit: Edit) -> str:
    return _dumps(edit_to_json(edit), f"{edit.stage} edit")


def _dumps_message(message: Message) -> str:
    return _dumps(message_to_json(message), f"message {message.id!r}")


def _dumps_log_entry(message: Message) -> str:
    """A log index entry: the message's id and digest, and the tool-call ids it makes or answers."""
    calls = [c.id for c in message.tool_calls] + [r.call_id for r in message.tool_results]
    return _dumps({"id": message.id, "digest": message.digest, "calls": calls}, f"message {message.id!r}")


def content_digest(content: str) -> str:
    """The full blake2b hex digest an artifact is addressed by."""
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass")).hexdigest()


def is_artifact_content(key: str) -> bool:
    """`artifact:<id>` holds an artifact's content (large; backends may keep it apart), `artifact:<id>:info`
    its record."""
    return key.startswith(ARTIFACT_PREFIX) and not key.endswith(INFO_SUFFIX)


def _edit_refs(data: Mapping[str, Any]) -> tuple[str, ...]:
    return edit_from_json(dict(data)).refs


class Store(ABC):
    """The session store API (type against this to accept any backend). Implemented once over a tiny
    key-value layer of JSON texts (`_get`, `_get_many`, `_put`, `_delete`, `_keys`, `_atomic`) that
    backends provide, with `lock` (one writer per session) and `_materialize` (an artifact file)."""

    # Whether what is written outlives the process (a memory store's does not: nothing to bring up to date at close).
    persistent = True

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter
        self._token_mirror: dict[str, int] | None = None

    # --- key-value layer (backends) ---------------------------------------------------------------

    @abstractmethod
    def _get(self, key: str) -> str | None: ...

    def _get_many(self, keys: Sequence[str]) -> list[str | None]:
        """The texts of several keys, in order (a backend with round trips answers in one)."""
        return [self._get(k) for k in keys]

    @abstractmethod
    def _put(self, key: str, text: str) -> None: ...

    def _put_deferred(self, key: str, encode: Callable[[], str]) -> None:
        """Store the text `encode()` returns, for a value that cannot change (a frozen message, a
        string): a backend holding texts in memory may encode it only when the key is read."""
        self._put(key, encode())

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

    def _materialize_later(self, artifact_id: str, content: str) -> tuple[str | None, Callable[[], object]]:
        """Where `_materialize` puts the artifact, and the call that writes it there, for a caller that
        writes it later (session.writebehind). A backend that cannot say where first writes it now."""
        return self._materialize(artifact_id, content), lambda: None

    @abstractmethod
    def lock(self, timeout: float = 30.0) -> Any:
        """Serialize users of this session (re-entrant within one store object); raises
        `SessionLockedError` after `timeout` seconds."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where this session is, for messages (never a password)."""

    def close(self) -> None:
        """Release resources; the store must not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self, key: str, default: Any = None) -> Any:
        text = self._get(key)
        return default if text is None else integrity.decode(self.location, key, text)

    def _save(self, key: str, value: Any, what: str) -> None:
        self._put(key, _dumps(value, what))

    def _count(self, key: str) -> int:
        return integrity.count(self.location, key, self._load(key, 0))

    def _entries(self, pattern: str, n: int, what: str, start: int = 0) -> list[Any]:
        """Entries start..n-1 of a sequence, decoded; a missing one is damage."""
        keys = [pattern.format(i) for i in range(start, n)]
        out = []
        for key, text in zip(keys, self._get_many(keys)):
            if text is None:
                raise integrity.StoreDamagedError(f"{what} entry is missing (the length says {n})",
                                                  store=self.location, key=key)
            out.append(integrity.decode(self.location, key, text))
        return out

    def _open_checked(self) -> None:
        """At open: check the version record; stamp a new store with this version. A store that looks
        new is checked again under the lock before it is stamped: another process may be stamping it
        (or writing to it) between this one's reads, which must read as neither new nor damaged."""
        if self._get(VERSION_KEY) is not None:
            integrity.check_version_record(self, STORE_VERSION)
            return
        with self.lock():
            if integrity.check_version_record(self, STORE_VERSION):
                with self._atomic():
                    self._save(VERSION_KEY, STORE_VERSION, "store version")

    def _committed_before(self) -> bool:
        """Under the lock: whether values were ever committed to this session, where the backend keeps
        count (a database's revision); such a store that holds nothing was emptied, not new."""
        return False

    def check(self) -> None:
        """The integrity check before a session is read (`integrity.check_lengths`); call it under `lock()`."""
        integrity.check_lengths(self)

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

    # --- moving a whole session (fork, export, import) --------------------------------------------

    def records(self) -> Iterator[tuple[str, str]]:
        """Every stored key with its JSON text, in key order, except the version record: the session's
        whole state as `restore` takes it. Hold `lock()` around the iteration for one snapshot."""
        for key in sorted(self._keys()):
            if key == VERSION_KEY:
                continue
            text = self._get(key)
            if text is not None:
                yield key, text

    def restore(self, records: Iterable[tuple[str, str]]) -> None:
        """Fill this new, empty store with another store's `records`, in one transaction. Artifacts are
        materialized where this store keeps them and their recorded path becomes the new one (the texts
        already in the view keep naming the old path, so the view stays byte-identical)."""
        with self.lock():
            if self.log_length() or self._edit_count() or any(k.startswith("meta:") for k in self._keys()):
                raise SessionError(f"{self.location}: the destination must be a new, empty session")
            with self.transaction():
                materialized: dict[str, str | None] = {}
                for key, text in records:
                    if key == VERSION_KEY:
                        continue
                    if key.startswith(ARTIFACT_PREFIX) and key.endswith(INFO_SUFFIX):
                        artifact_id = key[len(ARTIFACT_PREFIX):-len(INFO_SUFFIX)]
                        info = integrity.decode(self.location, key, text)
                        if isinstance(info, dict):
                            text = _dumps({**info, "path": materialized.get(artifact_id)},
                                          f"artifact {artifact_id} meta")
                    elif is_artifact_content(key):
                        artifact_id = key[len(ARTIFACT_PREFIX):]
                        content = integrity.decode(self.location, key, text)
                        materialized[artifact_id] = self._materialize(artifact_id, content)
                    self._put(key, text)
        self._token_mirror = None

    def copy_to(self, other: "Store") -> None:
        """Copy everything this store holds into the new, empty store `other` as one snapshot (under
        this store's lock, in one transaction of `other`); later writes on either side stay there."""
        if other is self:
            raise SessionError("cannot copy a session store onto itself")
        with self.lock():
            other.restore(self.records())

    # --- message log ------------------------------------------------------------------------------

    def log_length(self) -> int:
        """Number of messages in the log."""
        return self._count("log:len")

    def log_messages(self) -> list[Message]:
        """The logged messages, in order."""
        entries = self._entries("logmsg:{}", self.log_length(), "log message")
        return [integrity.parsed(self.location, f"logmsg:{i}", "a log message", message_from_json, e)
                for i, e in enumerate(entries)]

    def append_messages(self, messages: Iterable[Message]) -> None:
        """Append to the log; one key per entry, so the existing log is never rewritten."""
        with self.transaction():
            n = self.log_length()
            for m in messages:
                self._put_deferred(f"logmsg:{n}", functools.partial(_dumps_message, m))
                self._put_deferred(f"log:{n}", functools.partial(_dumps_log_entry, m))
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
            for i, entry in enumerate(self._entries("log:{}", length, "log index", start=n), n):
                key = f"log:{i}"
                removed.add(integrity.parsed(self.location, key, "a log index entry", lambda e: str(e["id"]), entry))
                removed.update(integrity.parsed(self.location, key, "a log index entry",
                                                lambda e: [str(c) for c in e["calls"]], entry))
                self._delete(key)
                self._delete(f"logmsg:{i}")
            self._save("log:len", n, "log length")
            kept = [e for e in self._edit_jsons() if not refers_to(_edit_refs(e), removed)]
            dropped = self._edit_count() - len(kept)
            if dropped:
                self._rewrite_edits(kept)
            return dropped

    # --- edits ------------------------------------------------------------------------------------

    def _edit_count(self) -> int:
        return self._count("edits:len")

    def _edit_jsons(self) -> list[dict[str, Any]]:
        entries = self._entries("edit:{}", self._edit_count(), "edit")
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("stage"), str):
                raise integrity.StoreDamagedError("an edit is not an edit record", store=self.location,
                                                  key=f"edit:{i}")
        return entries

    def edits(self) -> list[Edit]:
        """Every stored edit, in the order the core applies them."""
        return [integrity.parsed(self.location, f"edit:{i}", "an edit", edit_from_json, e)
                for i, e in enumerate(self._edit_jsons())]

    def add_edits(self, edits: Iterable[Edit]) -> None:
        """Append edits, after the stored ones (the core applies them in this order)."""
        with self.transaction():
            n = self._edit_count()
            for edit in edits:
                self._put_deferred(f"edit:{n}", functools.partial(_dumps_edit, edit))  # frozen, like a message
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
            known = self._load(f"{ARTIFACT_PREFIX}{artifact_id}{INFO_SUFFIX}")
            if isinstance(known, dict) and isinstance(known.get("tokens"), int):
                return Artifact(artifact_id, path, known["tokens"])
            tokens = self.counter.text(content)
            self._put_deferred(f"{ARTIFACT_PREFIX}{artifact_id}",
                               functools.partial(_dumps, content, f"artifact {artifact_id}"))
            self._save(f"{ARTIFACT_PREFIX}{artifact_id}{INFO_SUFFIX}",
                       {"digest": digest, "kind": kind, "meta": meta or {}, "tokens": tokens, "path": path},
                       f"artifact {artifact_id} meta")
        return Artifact(artifact_id, path, tokens)

    def get_artifact(self, id: str) -> str:
        """The stored content of artifact `id`; `ArtifactNotFoundError` if there is none,
        `ArtifactDamagedError` if it is not the content its id and its record name (checked on every read)."""
        key = f"{ARTIFACT_PREFIX}{id}"
        text = self._get(key)
        if text is None:
            raise ArtifactNotFoundError(f"no artifact {id!r} in this session")
        content = integrity.decode(self.location, key, text)
        if not isinstance(content, str):
            raise integrity.StoreDamagedError("an artifact's content is not text", store=self.location, key=key)
        info = self._load(key + INFO_SUFFIX)
        integrity.check_artifact(self.location, id, content, info.get("digest") if isinstance(info, dict) else None,
                                 content_digest)
        return content

    def artifact_ids(self) -> list[str]:
        """The ids of every artifact the session holds."""
        return sorted(k[len(ARTIFACT_PREFIX):] for k in self._keys() if is_artifact_content(k))

    def artifact_info(self, id: str) -> dict[str, Any]:
        """What was recorded with artifact `id`: digest, kind, meta, tokens, path."""
        info = self._load(f"{ARTIFACT_PREFIX}{id}{INFO_SUFFIX}")
        if info is None:
            raise ArtifactNotFoundError(f"no artifact {id!r} in this session")
        if not isinstance(info, dict):
            raise integrity.StoreDamagedError("an artifact record is not an object", store=self.location,
                                              key=f"{ARTIFACT_PREFIX}{id}{INFO_SUFFIX}")
        return info

    @property
    def counter(self) -> TokenCounter:
        """The token counter artifact sizes are counted with (shared with the session on it)."""
        if self._counter is None:
            self._counter = TokenCounter()
        return self._counter

    # --- metadata ---------------------------------------------------------------------------------

    def get_meta(self, key: str, default: Any = None) -> Any:
        """A metadata value (epoch, last_prepare_time, consecutive_failures, boundaries, ...)."""
        return self._load(f"meta:{key}", default)

    def set_meta(self, key: str, value: Any) -> None:
        """Set a JSON-able metadata value (or one given as its JSON text, `EncodedJSON`)."""
        if isinstance(value, EncodedJSON):
            self._put(f"meta:{key}", value.text)
        else:
            self._save(f"meta:{key}", value, f"meta {key!r}")

    def set_meta_record(self, key: str, record: Any, to_json: Callable[[Any], Any]) -> None:
        """`set_meta(key, to_json(record))` for a frozen record: a backend holding texts in memory makes
        its JSON only if the key is read (`_put_deferred`), and a session reads the record it committed
        itself without decoding it (`metawrite.held_value`), so a memory-only session never does."""
        self._put_deferred(f"meta:{key}", functools.partial(_dumps_record, record, to_json, f"meta {key!r}"))

    # --- token-count cache ------------------------------------------------------------------------

    def _tokens(self) -> dict[str, int]:
        if self._token_mirror is None:
            merged: dict[str, int] = {}
            for i, chunk in enumerate(self._entries("tokens:{}", self._count("tokens:len"), "token cache")):
                merged.update(integrity.parsed(self.location, f"tokens:{i}", "a token-cache chunk", _counts, chunk))
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
            chunks = self._count("tokens:len")
            if chunks >= TOKEN_CACHE_MAX_CHUNKS:
                for i in range(1, chunks):
                    self._delete(f"tokens:{i}")
                self._save("tokens:0", {**mirror, **new}, "token cache")
                self._save("tokens:len", 1, "token cache")
            else:
                self._save(f"tokens:{chunks}", new, "token cache")
                self._save("tokens:len", chunks + 1, "token cache")
            mirror.update(new)


def _counts(chunk: Any) -> dict[str, int]:
    """A token-cache chunk: digest -> count."""
    if not isinstance(chunk, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in chunk.values()):
        raise TypeError("a token-cache chunk maps block digests to integer counts")
    return chunk


class ReentrantLock:
    """One writer per session, as a store object holds it: re-entrant for the thread holding it,
    exclusive across the object's threads (an RLock) and across processes (the backend's `acquire`
    (deadline, timeout) and `release`, called for the outermost hold only)."""

    def __init__(self, where: str, acquire: Callable[[float, float], None], release: Callable[[], None]) -> None:
        self._where = where
        self._acquire, self._release = acquire, release
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None

    def held_here(self) -> bool:
        """The calling thread holds the lock."""
        return self._owner == threading.get_ident()

    @contextmanager
    def hold(self, timeout: float) -> Iterator[None]:
        """Hold it for the block; `SessionLockedError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout=max(timeout, 0.0)):
            raise SessionLockedError(f"{self._where}: session is locked by another thread (waited {timeout:g} s)")
        try:
            if self._depth == 0:
                self._acquire(deadline, timeout)
                self._owner = threading.get_ident()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._release()
        finally:
            self._thread_lock.release()


# The other backends, loaded on first use (the directory backend also under its old name, `SessionStore`).
_LAZY = {"SessionStore": "diskstore", "DiskStore": "diskstore", "MemoryStore": "memstore"}

__getattr__ = lazy_getattr(__name__.rsplit(".", 1)[0], _LAZY, globals())

__all__ = ["ReentrantLock", "STORE_VERSION", "Store", "content_digest", "is_artifact_content"]
