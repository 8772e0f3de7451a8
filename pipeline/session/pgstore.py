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

A commit applies only on the revision it was based on and stamps the row with its own id
(compare-and-set in the same statement); when its answer is lost (the connection died, or no answer
came within the reply bound) the store reads the row back on a fresh connection and either finds
its commit there or redoes it once, so a commit is never written twice. Every wait is bounded
(`StoreConfig`: connecting, each answer, statements, locks, idle transactions, TCP keepalives) and a
bound that is hit is named (`DatabaseTimeoutError`, `DatabaseUnreachableError`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import time
import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from ..core.config_sections import StoreConfig
from ..core.errors import (CommitConflictError, DatabaseTimeoutError, DatabaseUnreachableError, InvalidSessionIdError,
                           MissingExtraError, SessionError, SessionLockedError, SessionNotFoundError, StoreDamagedError)
from ..core.tokens import TokenCounter
from . import pgschema
from .pgschema import CHUNKS, SESSIONS, VALUES
from .store import ARTIFACT_PREFIX, ReentrantLock, Store, is_artifact_content

if TYPE_CHECKING:
    import psycopg
    from psycopg.abc import PQGen
    from psycopg_pool import ConnectionPool

RV = TypeVar("RV")

URL_SCHEMES = ("postgresql://", "postgres://")
# A large artifact's JSON text is stored in chunks of this many characters (ASCII: as many bytes).
CHUNK_CHARS = 1 << 20
# A pool this process creates for a URL: enough for a gateway's concurrent prepares (each holds one
# connection while it holds its session's lock); more wait for a free one up to their lock timeout.
POOL_MIN_SIZE, POOL_MAX_SIZE = 1, 10
MAX_SESSION_ID_CHARS = 256
DEFAULT_LIMITS = StoreConfig()
# Session-level advisory locks share one 64-bit key space with the rest of the database; ours are
# the hash of this prefix and the session id.
LOCK_NAMESPACE = b"worksurface-session\0"

_pools: dict[tuple[int, str, StoreConfig], "ConnectionPool[Any]"] = {}
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
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no text column can hold it
        raise InvalidSessionIdError(f"session id {session_id[:80]!r}: not valid Unicode text (a lone surrogate "
                                    "character)") from None
    return session_id


def server_address(url: str) -> str:
    """`host:port` of the server `url` names (libpq's defaults where it names none), for messages."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 (an unparsable URL: the connection attempt reports it)
        return "<unparsable URL>"
    host = str(parts.get("host") or parts.get("hostaddr") or os.environ.get("PGHOST") or "localhost")
    return f"{host}:{parts.get('port') or os.environ.get('PGPORT') or 5432}"


def connection_settings(url: str, limits: StoreConfig) -> dict[str, Any]:
    """The connection parameters every pooled connection is made with: libpq's connect timeout and TCP
    keepalives, and the server-side bounds as startup options (after any the URL gives, so the URL's
    own options are kept)."""
    from psycopg.conninfo import conninfo_to_dict

    server = {"statement_timeout": _ms(limits.statement_timeout_seconds),
              "lock_timeout": _ms(limits.lock_timeout_seconds),
              "idle_in_transaction_session_timeout": _ms(limits.idle_in_transaction_seconds),
              "tcp_keepalives_idle": limits.keepalives_idle_seconds,
              "tcp_keepalives_interval": limits.keepalives_interval_seconds,
              "tcp_keepalives_count": limits.keepalives_count,
              "tcp_user_timeout": _ms(limits.tcp_user_timeout_seconds)}
    given = str(conninfo_to_dict(url).get("options") or "")
    options = " ".join([given, *(f"-c {name}={value}" for name, value in server.items())]).strip()
    return {"autocommit": True, "connect_timeout": limits.connect_timeout_seconds, "keepalives": 1,
            "keepalives_idle": limits.keepalives_idle_seconds,
            "keepalives_interval": limits.keepalives_interval_seconds,
            "keepalives_count": limits.keepalives_count,
            "tcp_user_timeout": _ms(limits.tcp_user_timeout_seconds), "options": options}


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def connection_pool(url: str, *, max_size: int = POOL_MAX_SIZE,
                    limits: StoreConfig = DEFAULT_LIMITS) -> "ConnectionPool[Any]":
    """This process's pool for `url` with `limits` (created on first use: the server is reached and
    the schema checked or migrated first, so an unreachable server or a newer schema is reported at
    once). `max_size` applies when the pool is created."""
    pg = _psycopg()
    from psycopg_pool import ConnectionPool

    key = (os.getpid(), url, limits)
    with _registry_lock:
        pool = _pools.get(key)
        if pool is not None:
            return pool
        settings = connection_settings(url, limits)
        bounded = bounded_connection_class()
        try:
            with bounded.connect(url, **settings) as probe:
                probe.reply_timeout = limits.reply_timeout_seconds
                pgschema.ensure_schema(probe, redacted(url))
        except pg.Error as exc:
            if _unreachable(exc):
                raise DatabaseUnreachableError(f"{redacted(url)}: cannot use the database: server "
                                               f"{server_address(url)} unreachable ({_first_line(exc)})",
                                               address=server_address(url)) from None
            raise SessionError(f"{redacted(url)}: cannot use the database ({_first_line(exc)})") from None

        def configure(conn: Any) -> None:
            conn.reply_timeout = limits.reply_timeout_seconds

        pool = ConnectionPool(url, min_size=POOL_MIN_SIZE, max_size=max_size, open=True, kwargs=settings,
                              connection_class=bounded, configure=configure, name=f"worksurface {redacted(url)}")
        _pools[key] = pool
        _migrated.add((os.getpid(), id(pool)))
        return pool


def _unreachable(exc: BaseException) -> bool:
    """A failure to reach the server at all (refused, timed out, name not found), as opposed to one the
    server answered (a password refused, no such database: those carry a SQLSTATE)."""
    import psycopg

    return isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) is None


_bounded_class: list[type[Any]] = []


def bounded_connection_class() -> type[Any]:
    """psycopg's connection with every wait for the server bounded by its `reply_timeout` (seconds;
    None: unbounded): the server cannot end a wait on a link that stops moving bytes, and libpq's
    keepalives see nothing wrong while a middlebox still acknowledges them. A wait past the bound
    closes the connection (its state is unknown) and raises `ReplyTimeout`."""
    if _bounded_class:
        return _bounded_class[0]
    import psycopg

    class ReplyTimeout(psycopg.OperationalError):
        """No answer from the server within the connection's reply bound."""

    class BoundedConnection(psycopg.Connection[Any]):
        reply_timeout: float | None = None

        def wait(self, gen: "PQGen[RV]", interval: float = 0.1, timeout: float | None = None) -> RV:
            bound = timeout if timeout is not None else self.reply_timeout
            try:
                return super().wait(gen, interval, bound)
            except psycopg.OperationalError as exc:
                if timeout is None and bound is not None and type(exc).__name__ == "_WaitTimeout":
                    self.pgconn.finish()  # mid-statement: unusable; the pool discards it
                    raise ReplyTimeout(f"no answer from the server within {bound:g} s") from None
                raise

    BoundedConnection.ReplyTimeout = ReplyTimeout  # type: ignore[attr-defined]
    _bounded_class.append(BoundedConnection)
    return BoundedConnection


def _is_reply_timeout(exc: BaseException) -> bool:
    return type(exc).__name__ == "ReplyTimeout" and bool(_bounded_class) and isinstance(
        exc, _bounded_class[0].ReplyTimeout)


@atexit.register
def _close_pools() -> None:
    """Close the pools this process opened (a forked child's inherited ones belong to its parent)."""
    for (pid, _, _), pool in list(_pools.items()):
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
    `PostgresSaver`). `create=False` refuses a session that does not exist yet. `limits` bounds every
    wait on the database (a shared pool's connections keep the settings their pool gives them)."""

    def __init__(self, url: str | None, session_id: str, counter: TokenCounter | None = None, *,
                 pool: "ConnectionPool[Any] | None" = None, create: bool = True,
                 limits: StoreConfig = DEFAULT_LIMITS) -> None:
        super().__init__(counter)
        self.limits = limits
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
        self._lock_lost = False  # the lock's connection died while held: writes go by compare-and-set alone
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
        return connection_pool(self.url, limits=self.limits)

    def _getconn(self, timeout: float) -> "psycopg.Connection[Any]":
        """A pooled connection within `timeout` seconds. A pool that has none to give after the connect
        bound is asked whether the server answers at all: a server that does not is reported
        unreachable at once; otherwise every connection is in use, and the wait goes on."""
        from psycopg_pool import PoolTimeout

        pool = self._pool()
        deadline = time.monotonic() + timeout
        first = min(timeout, self.limits.connect_timeout_seconds + 1.0)
        try:
            return pool.getconn(timeout=max(0.001, first))
        except PoolTimeout:
            self._check_reachable()
            rest = deadline - time.monotonic()
            if rest <= 0:
                raise
            return pool.getconn(timeout=rest)

    def _check_reachable(self) -> None:
        """Raise `DatabaseUnreachableError` if a new connection to the server fails without the server
        answering (the pool's own attempts fail the same way, in the background)."""
        import psycopg

        if self._own_pool is not None and not isinstance(self._own_pool.conninfo, str):
            return
        try:
            bounded_connection_class().connect(self.url, **connection_settings(self.url, self.limits)).close()
        except psycopg.Error as exc:
            if _unreachable(exc):
                raise DatabaseUnreachableError(
                    f"{self.location}: database server {server_address(self.url)} unreachable "
                    f"({_first_line(exc)})", address=server_address(self.url)) from None

    def _mine(self) -> bool:
        return self._locking.held_here()

    @contextmanager
    def _connection(self) -> Iterator["psycopg.Connection[Any]"]:
        """The locked connection for the lock holder; a pooled one, briefly, for anyone else."""
        if self._mine() and self._conn is not None:
            yield self._conn
            return
        pool = self._pool()
        conn = self._getconn(self.limits.connect_timeout_seconds + self.limits.reply_timeout_seconds)
        try:
            with _autocommit(conn):
                yield conn
        finally:
            pool.putconn(conn)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Database failures as `SessionError`s naming the session."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            yield
        except psycopg.errors.ForeignKeyViolation:
            raise SessionNotFoundError(f"{self.location}: the session was deleted") from None
        except PoolTimeout:
            raise SessionError(f"{self.location}: no free database connection (every one of the pool's is in "
                               "use)") from None
        except psycopg.Error as exc:
            raise self._named(exc) from None

    def _named(self, exc: BaseException) -> SessionError:
        """A database failure as the `SessionError` that names it: the bound that was hit, a server
        that cannot be reached, or the server's own message."""
        import psycopg

        limits = self.limits
        bounds: list[tuple[type[BaseException], str, float]] = [
            (psycopg.errors.QueryCanceled, "statement_timeout_seconds", limits.statement_timeout_seconds),
            (psycopg.errors.LockNotAvailable, "lock_timeout_seconds", limits.lock_timeout_seconds),
            (psycopg.errors.IdleInTransactionSessionTimeout, "idle_in_transaction_seconds",
             limits.idle_in_transaction_seconds)]
        if _is_reply_timeout(exc):
            bounds.insert(0, (type(exc), "reply_timeout_seconds", limits.reply_timeout_seconds))
        for kind, limit, seconds in bounds:
            if isinstance(exc, kind):
                return DatabaseTimeoutError(f"{self.location}: the database did not answer within {limit} = "
                                            f"{seconds:g} s ({_first_line(exc)})", limit=limit, seconds=seconds)
        if isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) is None:
            return DatabaseUnreachableError(f"{self.location}: connection to the database server "
                                            f"{server_address(self.url)} lost ({_first_line(exc)})",
                                            address=server_address(self.url))
        return SessionError(f"{self.location}: database error ({_first_line(exc)})")

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

        try:
            conn = self._getconn(max(0.001, deadline - time.monotonic()))
        except PoolTimeout:
            raise SessionLockedError(f"{self.location}: no free database connection: every one of the pool's is "
                                     f"in use (waited {timeout:g} s)") from None
        self._lock_lost = False
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
                raise self._named(exc) from None
            raise
        self._conn = conn

    def _release(self) -> None:
        import psycopg

        conn, self._conn = self._conn, None
        self._lock_lost = False
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

    def _drop_lock_connection(self) -> None:
        """The lock's connection died while held (the server drops its lock when it notices): give it
        back to be discarded; until the lock is released, writes rely on compare-and-set alone."""
        conn, self._conn = self._conn, None
        if conn is not None:
            if not conn.closed:
                conn.close()
            self._give_back(conn)
        self._lock_lost = True

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
        busy the machine); with artifact chunks, those first, in the same transaction. The commit
        applies only on the revision this store last saw (compare-and-set) and stamps the row with its
        id; when its answer is lost, `_settle` learns whether it landed and redoes it at most once."""
        import psycopg

        values = {k: v for k, v in pending.items() if not is_artifact_content(k)}
        expected, commit_id = self._revision, uuid.uuid4().hex
        if expected is None:
            raise CommitConflictError(f"{self.location}: the session's stored revision is unknown here (a commit "
                                      "failed earlier under this lock); nothing was written, take the lock again")
        try:
            try:
                with self._connection() as conn:
                    revision = self._send_commit(conn, pending, expected, commit_id)
            except psycopg.Error as exc:
                if not _outcome_unknown(exc, self._conn):
                    raise self._named(exc) from None
                # The answer was lost: the commit may have landed. Ask on a fresh connection.
                self._drop_lock_connection()
                revision = self._settle(pending, expected, commit_id, exc)
        except BaseException:
            self._cache, self._revision = {}, None  # read again at the next lock
            raise
        self._revision = revision
        self._cache.update(values)

    def _settle(self, pending: dict[str, str | None], expected: int, commit_id: str, lost: BaseException) -> int:
        """The revision commit `commit_id` made, whose answer was lost: found in the session row, or
        the commit redone once (it applies only on `expected`, so a late arrival of the first attempt
        cannot write it again). Raises the failure named when the server cannot be asked."""
        import psycopg

        try:
            with self._connection() as conn:
                found = _rows(conn, f"SELECT revision, last_commit FROM {SESSIONS} WHERE id = %s", (self.session_id,))
                if not found:
                    raise SessionNotFoundError(f"{self.location}: the session was deleted")
                revision, last = int(found[0][0]), found[0][1]
                if last == commit_id:
                    return revision
                if revision != expected:
                    raise CommitConflictError(f"{self.location}: the answer to a commit was lost "
                                              f"({_first_line(lost)}) and the session has moved on since (revision "
                                              f"{revision}, not {expected}); nothing more was written")
                return self._send_commit(conn, pending, expected, commit_id)
        except psycopg.Error as exc:
            raise self._named(exc) from None

    def _send_commit(self, conn: "psycopg.Connection[Any]", pending: dict[str, str | None], expected: int,
                     commit_id: str) -> int:
        """One attempt at the commit on `conn`: the new revision, or `CommitConflictError` (nothing
        written) when the session is no longer at `expected`."""
        sid = self.session_id
        values = {k: v for k, v in pending.items() if not is_artifact_content(k)}
        artifacts = {k[len(ARTIFACT_PREFIX):]: v for k, v in pending.items() if is_artifact_content(k)}
        # The rows travel as one JSON parameter (encoded in C, parsed by the server), not as array
        # parameters (escaped element by element, in Python) or one statement per row.
        put = json.dumps([[k, v] for k, v in values.items() if v is not None])
        gone = json.dumps([k for k, v in values.items() if v is None])
        chunks = [(sid, a, i // CHUNK_CHARS, text[i:i + CHUNK_CHARS]) for a, text in artifacts.items()
                  if text is not None for i in range(0, max(len(text), 1), CHUNK_CHARS)]
        with conn.transaction() if artifacts else _no_transaction():
            cur = _cursor(conn)
            if artifacts:
                cur.execute(f"DELETE FROM {CHUNKS} WHERE session_id = %s AND artifact_id = ANY(%s)",
                            (sid, list(artifacts)))
                cur.executemany(f"INSERT INTO {CHUNKS} (session_id, artifact_id, seq, chunk) "
                                "VALUES (%s, %s, %s, %s)", chunks)
            row = cur.execute(_COMMIT_VALUES, {"sid": sid, "put": put, "gone": gone, "expected": expected,
                                               "commit": commit_id}).fetchone()
            if row is None:  # inside the transaction: the chunks roll back with it
                now = _rows(conn, f"SELECT revision FROM {SESSIONS} WHERE id = %s", (sid,))
                if not now:
                    raise SessionNotFoundError(f"{self.location}: the session was deleted")
                raise CommitConflictError(f"{self.location}: another writer committed revision {now[0][0]} since "
                                          f"this one read revision {expected}; nothing of this commit was written")
        return int(row[0])

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


# The values part of a commit, one statement: data-modifying CTEs all run, or none does. The revision
# bump is the compare-and-set (only on the revision the writer read, stamped with the commit's id), and
# the deletes and upserts happen only if it did: a second attempt of a commit that landed writes nothing.
_COMMIT_VALUES = f"""
WITH bumped AS (
    UPDATE {SESSIONS} SET revision = revision + 1, last_commit = %(commit)s, updated_at = now()
    WHERE id = %(sid)s AND revision = %(expected)s RETURNING revision
), removed AS (
    DELETE FROM {VALUES} WHERE session_id = %(sid)s AND EXISTS (SELECT FROM bumped)
    AND key IN (SELECT json_array_elements_text(%(gone)s::json))
), written AS (
    INSERT INTO {VALUES} (session_id, key, value)
    SELECT %(sid)s, e ->> 0, e ->> 1 FROM json_array_elements(%(put)s::json) AS e WHERE EXISTS (SELECT FROM bumped)
    ON CONFLICT (session_id, key) DO UPDATE SET value = EXCLUDED.value
)
SELECT revision FROM bumped"""


def _outcome_unknown(exc: BaseException, conn: "psycopg.Connection[Any] | None") -> bool:
    """Whether a failed commit may have landed: the connection broke (or no answer came in time), so
    the server's answer was never read. An error the server answered rolled the commit back."""
    import psycopg

    if _is_reply_timeout(exc):
        return True
    return isinstance(exc, psycopg.OperationalError) and (getattr(exc, "sqlstate", None) is None
                                                          or conn is None or conn.broken)


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
