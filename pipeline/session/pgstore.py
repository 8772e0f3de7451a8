"""The PostgreSQL backend: one session in a PostgreSQL database (psycopg 3 and its connection pool),
so workers on several hosts share their sessions and nothing depends on a shared filesystem.

One writer per session at a time: `lock()` takes a session-level advisory lock on a pooled connection
and keeps that connection until it is released (the server releases the lock if the holder dies).
Every committed write bumps the session row's `revision`; a store that takes the lock and finds the
revision it last saw reads from its cache of the session's values, otherwise it drops the cache, so
a `prepare` on another host sees what the previous holder committed, exactly as two local processes
do. Writes inside a transaction are buffered and sent in one database transaction, so a killed
worker leaves the last committed state. Artifacts live in the database, in chunks; they have no file,
so markers name the fetch tool.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..core.errors import (InvalidSessionIdError, MissingExtraError, SessionError, SessionLockedError,
                           SessionNotFoundError, StoreDamagedError)
from ..core.tokens import TokenCounter
from . import pgschema
from .pgschema import CHUNKS, SESSIONS, VALUES
from .store import ARTIFACT_PREFIX, ReentrantLock, Store, is_artifact_content

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

URL_SCHEMES = ("postgresql://", "postgres://")
# A large artifact's JSON text is stored in chunks of this many characters (ASCII: as many bytes).
CHUNK_CHARS = 1 << 20
# A pool this process creates for a URL: enough for a gateway's concurrent prepares (each holds one
# connection while it holds its session's lock); more wait for a free one up to their lock timeout.
POOL_MIN_SIZE, POOL_MAX_SIZE = 1, 10
CONNECT_TIMEOUT_SECONDS = 10
MAX_SESSION_ID_CHARS = 256
# Session-level advisory locks share one 64-bit key space with the rest of the database; ours are
# the hash of this prefix and the session id.
LOCK_NAMESPACE = b"worksurface-session\0"

_pools: dict[tuple[int, str], "ConnectionPool[Any]"] = {}
_migrated: set[tuple[int, int]] = set()  # (pid, id(pool)) whose database schema was checked
_registry_lock = threading.Lock()


def is_postgres_url(location: object) -> bool:
    """A `postgresql://` (or `postgres://`) URL, as opposed to a directory."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (the pool comes with the same extra)
    except ImportError as exc:
        raise MissingExtraError("PostgreSQL sessions (a postgresql:// location)", "postgres",
                                f"psycopg 3 and psycopg_pool ({exc.name or exc})") from None
    return psycopg


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:  # an unparsable URL is reported by the connection attempt itself
        return url.split("@")[-1] if "@" in url else url
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


def check_session_id(session_id: object) -> str:
    """A session id a database can hold: non-empty text, at most 256 characters, no control characters."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError("a PostgreSQL session needs a session id (Session.open(url, session_id=...), "
                                    "--session-id on the command line)")
    if len(session_id) > MAX_SESSION_ID_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in session_id):
        raise InvalidSessionIdError(f"session id {session_id[:80]!r}: at most {MAX_SESSION_ID_CHARS} characters, "
                                    "no control characters")
    return session_id


def connection_pool(url: str, *, max_size: int = POOL_MAX_SIZE) -> "ConnectionPool[Any]":
    """This process's pool for `url` (created on first use: the server is reached and the schema
    checked or migrated first, so an unreachable server or a newer schema is reported at once).
    `max_size` applies when the pool is created."""
    psycopg = _psycopg()
    from psycopg_pool import ConnectionPool

    key = (os.getpid(), url)
    with _registry_lock:
        pool = _pools.get(key)
        if pool is not None:
            return pool
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as probe:
                pgschema.ensure_schema(probe, redacted(url))
        except psycopg.Error as exc:
            raise SessionError(f"{redacted(url)}: cannot use the database ({_first_line(exc)})") from None
        pool = ConnectionPool(url, min_size=POOL_MIN_SIZE, max_size=max_size, open=True,
                              kwargs={"autocommit": True}, name=f"worksurface {redacted(url)}")
        _pools[key] = pool
        _migrated.add((os.getpid(), id(pool)))
        return pool


@atexit.register
def _close_pools() -> None:
    """Close the pools this process opened (a forked child's inherited ones belong to its parent)."""
    for (pid, _), pool in list(_pools.items()):
        if pid == os.getpid():
            pool.close(timeout=1.0)


def _pool_conninfo(pool: "ConnectionPool[Any] | None") -> str:
    """What a shared pool connects to, for messages (a pool built on a callable names only itself)."""
    assert pool is not None
    return pool.conninfo if isinstance(pool.conninfo, str) else f"<pool {pool.name}>"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _cursor(conn: "psycopg.Connection[Any]") -> "psycopg.Cursor[tuple[Any, ...]]":
    """A cursor giving rows as tuples, whatever row factory a shared pool's connections use
    (LangGraph's: dicts)."""
    from psycopg.rows import tuple_row

    return conn.cursor(row_factory=tuple_row)


def _rows(conn: "psycopg.Connection[Any]", query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows a statement returns (none for one that returns nothing)."""
    cur = _cursor(conn)
    cur.execute(query, params)
    return cur.fetchall() if cur.description is not None else []


class PostgresStore(Store):
    """One session (`session_id`) in the PostgreSQL database at `url`, or in `pool` (a
    `psycopg_pool.ConnectionPool` shared with other users of the database, such as LangGraph's
    `PostgresSaver`). `create=False` refuses a session that does not exist yet."""

    def __init__(self, url: str | None, session_id: str, counter: TokenCounter | None = None, *,
                 pool: "ConnectionPool[Any] | None" = None, create: bool = True) -> None:
        super().__init__(counter)
        _psycopg()
        if (url is None) == (pool is None):
            raise SessionError("PostgresStore needs a URL or a connection pool, not both")
        self.session_id = check_session_id(session_id)
        self.url: str = url if url is not None else _pool_conninfo(pool)
        self._own_pool = pool
        self._location = f"{redacted(self.url)} session {session_id!r}"
        digest = hashlib.blake2b(LOCK_NAMESPACE + session_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        self._lock_key = int.from_bytes(digest, "big", signed=True)
        self._locking = ReentrantLock(self._location, self._acquire, self._release)
        self._conn: "psycopg.Connection[Any] | None" = None  # held while locked
        self._restore_autocommit = False
        # What this store read or wrote of the session while it held the lock, valid while the
        # session's revision is `_revision` (None: cached nothing). Artifact contents are not cached.
        self._cache: dict[str, str | None] = {}
        self._revision: int | None = None
        self._pending: dict[str, str | None] | None = None  # writes of the open transaction
        self._atomic_depth = 0
        with self._errors(), self._connection() as conn:
            if create:
                _rows(conn, f"INSERT INTO {SESSIONS} (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", (session_id,))
            elif not _rows(conn, f"SELECT 1 FROM {SESSIONS} WHERE id = %s", (session_id,)):
                raise SessionNotFoundError(f"{redacted(self.url)}: no session {session_id!r}")
        self._open_checked()

    @property
    def location(self) -> str:
        return self._location

    # --- connections --------------------------------------------------------------------------------

    def _pool(self) -> "ConnectionPool[Any]":
        if self._own_pool is not None:
            return prepared_pool(self._own_pool, redacted(self.url))
        return connection_pool(self.url)

    def _mine(self) -> bool:
        return self._locking.held_here()

    @contextmanager
    def _connection(self) -> Iterator["psycopg.Connection[Any]"]:
        """The locked connection for the lock holder; a pooled one, briefly, for anyone else."""
        if self._mine() and self._conn is not None:
            yield self._conn
            return
        with self._pool().connection(timeout=CONNECT_TIMEOUT_SECONDS) as conn, _autocommit(conn):
            yield conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Database failures as `SessionError`s naming the session."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            yield
        except psycopg.errors.ForeignKeyViolation:
            raise SessionNotFoundError(f"{self.location}: the session was deleted") from None
        except (psycopg.Error, PoolTimeout) as exc:
            raise SessionError(f"{self.location}: database error ({_first_line(exc)})") from None

    def close(self) -> None:
        """Drop the cached values (the pool stays: other sessions of this process share it)."""
        self._cache, self._revision = {}, None

    def _committed_before(self) -> bool:
        return bool(self._revision)  # read when the lock was taken; every commit bumps it

    # --- the lock -----------------------------------------------------------------------------------

    def lock(self, timeout: float = 30.0) -> Any:
        """Hold the session's advisory lock (released by the server if this process dies). Re-entrant
        within this object. Raises `SessionLockedError` after `timeout`."""
        return self._locking.hold(timeout)

    def _acquire(self, deadline: float, timeout: float) -> None:
        import psycopg
        from psycopg_pool import PoolTimeout

        pool = self._pool()
        try:
            conn = pool.getconn(timeout=max(0.001, deadline - time.monotonic()))
        except PoolTimeout:
            raise SessionLockedError(f"{self.location}: no free database connection (waited {timeout:g} s)") from None
        try:
            self._restore_autocommit = not conn.autocommit
            conn.autocommit = True
            if not _rows(conn, "SELECT pg_try_advisory_lock(%s)", (self._lock_key,))[0][0]:
                wait_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
                if wait_ms < 1:
                    raise SessionLockedError(f"{self.location}: session is locked by another process "
                                             f"(waited {timeout:g} s)")
                try:
                    with conn.transaction():
                        _rows(conn, "SELECT set_config('lock_timeout', %s, true)", (f"{wait_ms}ms",))
                        _rows(conn, "SELECT pg_advisory_lock(%s)", (self._lock_key,))
                except psycopg.errors.LockNotAvailable:
                    raise SessionLockedError(f"{self.location}: session is locked by another process "
                                             f"(waited {timeout:g} s)") from None
            row = _rows(conn, f"SELECT revision FROM {SESSIONS} WHERE id = %s", (self.session_id,))
            if not row:
                _rows(conn, "SELECT pg_advisory_unlock(%s)", (self._lock_key,))
                raise SessionNotFoundError(f"{self.location}: the session was deleted")
            if row[0][0] != self._revision:  # someone committed since: what this store cached is stale
                self._cache = {}
                self._revision = int(row[0][0])
        except BaseException as exc:
            self._give_back(conn)
            if isinstance(exc, psycopg.Error):
                raise SessionError(f"{self.location}: database error ({_first_line(exc)})") from None
            raise
        self._conn = conn

    def _release(self) -> None:
        import psycopg

        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            _rows(conn, "SELECT pg_advisory_unlock(%s)", (self._lock_key,))
        except psycopg.Error:
            conn.close()  # the server drops a closed session's locks; the pool discards the connection
        finally:
            self._give_back(conn)

    def _give_back(self, conn: "psycopg.Connection[Any]") -> None:
        if self._restore_autocommit and not conn.closed:
            conn.autocommit = False
        self._pool().putconn(conn)

    # --- key-value layer ----------------------------------------------------------------------------

    def _get(self, key: str) -> str | None:
        mine = self._mine()
        if mine:
            if self._pending is not None and key in self._pending:
                return self._pending[key]
            if key in self._cache:
                return self._cache[key]
        with self._errors(), self._connection() as conn:
            text = self._read_artifact(conn, key) if is_artifact_content(key) else self._read_value(conn, key)
        if mine and not is_artifact_content(key):
            self._cache[key] = text
        return text

    def _get_many(self, keys: Sequence[str]) -> list[str | None]:
        known: dict[str, str | None] = {}
        if self._mine():
            for source in (self._cache, self._pending or {}):
                known.update((k, source[k]) for k in keys if k in source)
        wanted = [k for k in keys if k not in known and not is_artifact_content(k)]
        if wanted:
            with self._errors(), self._connection() as conn:
                found = dict(_rows(conn, f"SELECT key, value FROM {VALUES} WHERE session_id = %s AND key = ANY(%s)",
                                   (self.session_id, wanted)))
            known.update((k, found.get(k)) for k in wanted)
        return [known[k] if k in known else self._get(k) for k in keys]

    def _read_value(self, conn: "psycopg.Connection[Any]", key: str) -> str | None:
        rows = _rows(conn, f"SELECT value FROM {VALUES} WHERE session_id = %s AND key = %s", (self.session_id, key))
        return str(rows[0][0]) if rows else None

    def _read_artifact(self, conn: "psycopg.Connection[Any]", key: str) -> str | None:
        rows = _rows(conn, f"SELECT seq, chunk FROM {CHUNKS} WHERE session_id = %s AND artifact_id = %s ORDER BY seq",
                     (self.session_id, key[len(ARTIFACT_PREFIX):]))
        if not rows:
            return None
        if [seq for seq, _ in rows] != list(range(len(rows))):
            raise StoreDamagedError(f"its chunks are not 0..{len(rows) - 1} (some are missing)",
                                    store=self.location, key=key)
        return "".join(chunk for _, chunk in rows)

    def _put(self, key: str, text: str) -> None:
        with self._atomic():
            assert self._pending is not None
            self._pending[key] = text

    def _delete(self, key: str) -> None:
        with self._atomic():
            assert self._pending is not None
            self._pending[key] = None

    def _keys(self) -> list[str]:
        with self._errors(), self._connection() as conn:
            keys = {k for (k,) in _rows(conn, f"SELECT key FROM {VALUES} WHERE session_id = %s", (self.session_id,))}
            keys |= {ARTIFACT_PREFIX + a for (a,) in _rows(
                conn, f"SELECT DISTINCT artifact_id FROM {CHUNKS} WHERE session_id = %s", (self.session_id,))}
        if self._mine() and self._pending:
            keys |= {k for k, v in self._pending.items() if v is not None}
            keys -= {k for k, v in self._pending.items() if v is None}
        return sorted(keys)

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Buffer the writes inside; the outermost one sends them in one database transaction, under
        the session lock (taken here if the caller does not hold it)."""
        with self.lock():
            outermost = self._atomic_depth == 0
            if outermost:
                self._pending = {}
            self._atomic_depth += 1
            try:
                yield
            except BaseException:
                if outermost:
                    self._pending = None
                raise
            finally:
                self._atomic_depth -= 1
            if outermost:
                pending, self._pending = self._pending, None
                if pending:
                    self._flush(pending)

    def _flush(self, pending: dict[str, str | None]) -> None:
        """Commit the buffered writes: the values' deletes and upserts and the revision bump in one
        statement (atomic on its own, one round trip: a commit costs one wait for the server, however
        busy the machine); with artifact chunks, those first, in the same transaction."""
        sid = self.session_id
        values = {k: v for k, v in pending.items() if not is_artifact_content(k)}
        artifacts = {k[len(ARTIFACT_PREFIX):]: v for k, v in pending.items() if is_artifact_content(k)}
        # The rows travel as one JSON parameter (encoded in C, parsed by the server), not as array
        # parameters (escaped element by element, in Python) or one statement per row.
        put = json.dumps([[k, v] for k, v in values.items() if v is not None])
        gone = json.dumps([k for k, v in values.items() if v is None])
        chunks = [(sid, a, i // CHUNK_CHARS, text[i:i + CHUNK_CHARS]) for a, text in artifacts.items()
                  if text is not None for i in range(0, max(len(text), 1), CHUNK_CHARS)]
        assert self._conn is not None
        conn = self._conn
        try:
            with self._errors(), conn.transaction() if artifacts else _no_transaction():
                cur = _cursor(conn)
                if artifacts:
                    cur.execute(f"DELETE FROM {CHUNKS} WHERE session_id = %s AND artifact_id = ANY(%s)",
                                (sid, list(artifacts)))
                    cur.executemany(f"INSERT INTO {CHUNKS} (session_id, artifact_id, seq, chunk) "
                                    "VALUES (%s, %s, %s, %s)", chunks)
                row = cur.execute(_COMMIT_VALUES, {"sid": sid, "put": put, "gone": gone}).fetchone()
            if row is None:
                raise SessionNotFoundError(f"{self.location}: the session was deleted")
        except BaseException:
            self._cache, self._revision = {}, None  # the commit may or may not have landed: read again
            raise
        self._revision = int(row[0])
        self._cache.update(values)

    def _materialize(self, artifact_id: str, content: str) -> None:
        return None  # kept in the database only: nothing depends on a shared filesystem

    # --- sessions in a database ---------------------------------------------------------------------

    def delete(self, timeout: float = 30.0) -> None:
        """Remove this session (all its values and artifacts) once no one holds its lock; the store
        must not be used afterwards."""
        with self.lock(timeout), self._errors():
            assert self._conn is not None
            _rows(self._conn, f"DELETE FROM {SESSIONS} WHERE id = %s", (self.session_id,))
        self.close()

    @staticmethod
    def list_sessions(url: str) -> list[str]:
        """The ids of the sessions in the database at `url`."""
        return session_ids(connection_pool(url))

    @classmethod
    def delete_session(cls, url: str, session_id: str, timeout: float = 30.0) -> None:
        """Remove the session `session_id` at `url`, once no one holds its lock."""
        cls(url, session_id, create=False).delete(timeout)


def session_ids(pool: "ConnectionPool[Any]", prefix: str | None = None) -> list[str]:
    """The ids of the sessions in the database of `pool` (those starting with `prefix`), in order."""
    with pool.connection() as conn:
        if prefix is None:
            rows = _rows(conn, f"SELECT id FROM {SESSIONS} ORDER BY id")
        else:
            rows = _rows(conn, f"SELECT id FROM {SESSIONS} WHERE starts_with(id, %s) ORDER BY id", (prefix,))
    return [str(i) for (i,) in rows]


def prepared_pool(pool: "ConnectionPool[Any]", where: str) -> "ConnectionPool[Any]":
    """A pool someone else made (a LangGraph checkpointer's), once its database's worksurface schema
    is checked or migrated (once per pool and process)."""
    key = (os.getpid(), id(pool))
    if key not in _migrated:
        with pool.connection() as conn, _autocommit(conn):
            pgschema.ensure_schema(conn, where)
        _migrated.add(key)
    return pool


# The values part of a commit, one statement: data-modifying CTEs all run, or none does.
_COMMIT_VALUES = f"""
WITH removed AS (
    DELETE FROM {VALUES} WHERE session_id = %(sid)s AND key IN (SELECT json_array_elements_text(%(gone)s::json))
), written AS (
    INSERT INTO {VALUES} (session_id, key, value)
    SELECT %(sid)s, e ->> 0, e ->> 1 FROM json_array_elements(%(put)s::json) AS e
    ON CONFLICT (session_id, key) DO UPDATE SET value = EXCLUDED.value
)
UPDATE {SESSIONS} SET revision = revision + 1, updated_at = now() WHERE id = %(sid)s RETURNING revision"""


@contextmanager
def _no_transaction() -> Iterator[None]:
    yield


@contextmanager
def _autocommit(conn: "psycopg.Connection[Any]") -> Iterator[None]:
    """Autocommit for the duration (a shared pool's connections may not be): each statement stands
    alone, and `conn.transaction()` opens a real transaction, not a savepoint."""
    if conn.autocommit:
        yield
        return
    conn.autocommit = True
    try:
        yield
    finally:
        if not conn.closed:
            conn.autocommit = False


__all__ = ["PostgresStore", "check_session_id", "connection_pool", "is_postgres_url", "prepared_pool", "redacted",
           "session_ids"]
