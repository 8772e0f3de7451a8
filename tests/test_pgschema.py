"""worksurface's PostgreSQL schema: created on first use, migrated in order, a newer one refused with
a clear message, and nothing else in the database touched (a LangGraph checkpointer's tables beside)."""

from __future__ import annotations

import pytest

from worksurface import Session
from worksurface.core.errors import StoreSchemaError
from worksurface.session import pgschema


def _version(url: str) -> int | None:
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        return pgschema.schema_version(conn)


def test_the_schema_is_created_on_first_use_beside_other_tables(fresh_database):
    import psycopg
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE checkpoints (thread_id text PRIMARY KEY)")  # someone else's table
        conn.execute("INSERT INTO checkpoints VALUES ('t1')")
    assert _version(fresh_database) is None
    with Session.open(fresh_database, session_id="s1") as session:
        session.prepare([], now=1.0)
    assert _version(fresh_database) == pgschema.SCHEMA_VERSION
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        assert conn.execute("SELECT thread_id FROM checkpoints").fetchall() == [("t1",)]
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables == {"checkpoints", pgschema.VERSION_TABLE, pgschema.SESSIONS, pgschema.VALUES, pgschema.CHUNKS}


def test_a_newer_schema_is_refused_and_left_alone(fresh_database):
    import psycopg
    with Session.open(fresh_database, session_id="s1"):
        pass
    from worksurface.session import pgstore
    for key in [k for k in pgstore._pools if k[1] == fresh_database]:
        pgstore._pools.pop(key).close()  # a new process, as far as the schema check goes
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(f"UPDATE {pgschema.VERSION_TABLE} SET version = %s", (pgschema.SCHEMA_VERSION + 1,))
    with pytest.raises(StoreSchemaError, match=f"version {pgschema.SCHEMA_VERSION + 1}, newer than this worksurface"):
        Session.open(fresh_database, session_id="s1")
    assert _version(fresh_database) == pgschema.SCHEMA_VERSION + 1


def test_migrations_run_in_order_from_the_version_found(fresh_database, monkeypatch):
    import psycopg
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        assert pgschema.ensure_schema(conn, "test") == 0
        assert pgschema.ensure_schema(conn, "test") == pgschema.SCHEMA_VERSION  # idempotent
    step = (f"ALTER TABLE {pgschema.SESSIONS} ADD COLUMN note text NOT NULL DEFAULT 'migrated'",)
    monkeypatch.setattr(pgschema, "MIGRATIONS", pgschema.MIGRATIONS + (step,))
    monkeypatch.setattr(pgschema, "SCHEMA_VERSION", pgschema.SCHEMA_VERSION + 1)
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        assert pgschema.ensure_schema(conn, "test") == pgschema.SCHEMA_VERSION - 1
        conn.execute(f"INSERT INTO {pgschema.SESSIONS} (id) VALUES ('x')")
        assert conn.execute(f"SELECT note FROM {pgschema.SESSIONS}").fetchall() == [("migrated",)]
    assert _version(fresh_database) == pgschema.SCHEMA_VERSION


def test_a_foreign_table_of_the_same_name_is_not_taken_for_ours(fresh_database):
    import psycopg
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {pgschema.SESSIONS} (something int)")
        with pytest.raises(StoreSchemaError, match="without a worksurface schema version"):
            pgschema.ensure_schema(conn, "test")
    assert _version(fresh_database) is None  # the refused migration left nothing behind


def test_an_unreachable_server_is_one_clear_error():
    from worksurface.core.errors import SessionError
    with pytest.raises(SessionError, match=r"postgresql://nobody@127\.0\.0\.1:9/nothing: cannot use the database"):
        Session.open("postgresql://nobody:secret@127.0.0.1:9/nothing", session_id="s")
