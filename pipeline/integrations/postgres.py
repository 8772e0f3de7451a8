"""worksurface sessions in the PostgreSQL database of a LangGraph checkpointer.

`PostgresSessions` is a session source for `make_pre_model_hook`, `make_compaction_subgraph` and
`WorksurfaceMiddleware`: one session per thread id (and named agent), kept in the same database as
the checkpointer's (worksurface's own `worksurface_*` tables beside LangGraph's `checkpoint*` ones),
through the same connection pool when the checkpointer has one. Every worker behind a load balancer
then shares both: the graph state and the compacted view a thread's next call builds on.

    pool = ConnectionPool(DB_URI, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
    checkpointer = PostgresSaver(pool)
    checkpointer.setup()
    sessions = PostgresSessions.beside(checkpointer)
    agent = create_agent(model, tools, checkpointer=checkpointer, middleware=[WorksurfaceMiddleware(sessions)])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .sessions import AGENT_SEPARATOR, session_id_for, session_key, thread_dirname

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from ..session.session import Session


class PostgresSessions:
    """Sessions by key (a thread id, or `session_key(thread, agent)`) in one PostgreSQL database:
    `conn` is its URL or a `psycopg_pool.ConnectionPool` (shared: worksurface takes a connection
    only while it prepares, and leaves each connection as it found it). `config` goes to each
    session (`Session.open` overrides, `summarizer=`...)."""

    def __init__(self, conn: "str | ConnectionPool[Any]", **config: Any) -> None:
        from ..session.pgstore import connection_pool

        self.pool = connection_pool(conn) if isinstance(conn, str) else conn
        self.config = config

    @classmethod
    def beside(cls, checkpointer: Any, **config: Any) -> "PostgresSessions":
        """Sessions in the database of a LangGraph `PostgresSaver`: through its pool when it has one;
        a saver on a single connection (`PostgresSaver.from_conn_string`) gets a pool of worksurface's
        own to the same database, since a connection a prepare holds cannot serve the saver meanwhile."""
        from psycopg import Connection
        from psycopg.conninfo import make_conninfo
        from psycopg_pool import ConnectionPool

        conn = getattr(checkpointer, "conn", None)
        if isinstance(conn, ConnectionPool):
            return cls(conn, **config)
        if isinstance(conn, Connection):
            options = {o.keyword.decode(): o.val.decode() for o in conn.pgconn.info if o.val is not None}
            return cls(make_conninfo(**options), **config)
        raise TypeError(f"PostgresSessions.beside needs a LangGraph PostgresSaver (a psycopg connection or "
                        f"pool in .conn), not {type(checkpointer).__name__}")

    def setup(self) -> None:
        """Create or migrate worksurface's tables now (they are also made on first use), as
        `PostgresSaver.setup()` does for the checkpointer's."""
        from ..session.pgstore import prepared_pool

        prepared_pool(self.pool, "the checkpointer's database")

    def __call__(self, key: str) -> "Session":
        """The session named `key` (created on first use): a `SessionPool` source."""
        from ..session.pgstore import PostgresStore
        from ..session.session import Session

        return Session.open(PostgresStore(None, session_id_for(key), pool=self.pool), **self.config)

    def session(self, thread_id: str, agent_id: str | None = None) -> "Session":
        """The session of a thread (and agent), as the hook and the middleware name it."""
        return self(session_key(thread_id, agent_id))

    def delete_thread(self, thread_id: str) -> int:
        """Remove a thread's sessions (its own and its named agents'), as `checkpointer.delete_thread`
        removes its checkpoints; returns how many were removed."""
        from ..session.pgstore import PostgresStore, session_ids

        own = session_id_for(thread_id)
        ids = [i for i in session_ids(self.pool, own) if i == own]
        ids += session_ids(self.pool, thread_dirname(thread_id) + AGENT_SEPARATOR)
        for session_id in ids:
            PostgresStore(None, session_id, pool=self.pool, create=False).delete()
        return len(ids)


__all__ = ["PostgresSessions"]
