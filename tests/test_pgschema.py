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
        ours = {f"{pgschema.SCHEMA}.{r[0]}" for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (pgschema.SCHEMA,))}
    assert tables == {"checkpoints"}  # worksurface's tables live in its own schema, not the search path's
    assert ours == {pgschema.VERSION_TABLE, pgschema.SESSIONS, pgschema.VALUES, pgschema.CHUNKS}


def test_the_tables_do_not_follow_the_search_path(fresh_database):
    """A role whose search_path starts with another schema still finds and keeps worksurface's tables in
    worksurface's schema (nothing is created where the search path points)."""
    import psycopg
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA elsewhere")
        conn.execute("ALTER DATABASE " + fresh_database.rsplit("/", 1)[1] + " SET search_path = elsewhere, public")
    with Session.open(fresh_database, session_id="s1") as session:
        session.prepare([], now=1.0)
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("elsewhere, public",)
        where = {r[0] for r in conn.execute("SELECT DISTINCT schemaname FROM pg_tables "
                                            "WHERE tablename LIKE 'worksurface%%'")}
        assert where == {pgschema.SCHEMA}
        assert conn.execute(f"SELECT id FROM {pgschema.SESSIONS}").fetchall() == [("s1",)]


def test_tables_an_earlier_version_left_in_the_search_path_are_moved_into_the_schema(fresh_database):
    """A database migrated by a worksurface that did not qualify its tables (version 1, in `public`)
    keeps its sessions: the next migration moves the tables into worksurface's schema, then adds the
    commit id."""
    import psycopg
    from psycopg.rows import tuple_row
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        cur = conn.cursor(row_factory=tuple_row)
        cur.execute("CREATE TABLE worksurface_schema_version (singleton boolean PRIMARY KEY DEFAULT true, "
                    "version integer NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now())")
        cur.execute("INSERT INTO worksurface_schema_version (version) VALUES (1)")
        for statement in pgschema.MIGRATIONS[0]:  # version 1's tables, as the old version made them: unqualified
            cur.execute(statement.replace(f"{pgschema.SCHEMA}.", ""))
        cur.execute("INSERT INTO worksurface_sessions (id, revision) VALUES ('old', 3)")
        cur.execute("INSERT INTO worksurface_values VALUES ('old', 'meta:x', '1')")
        assert pgschema.ensure_schema(conn, "test") == 1
        assert cur.execute(f"SELECT id, revision, last_commit FROM {pgschema.SESSIONS}").fetchall() == [("old", 3, None)]
        assert cur.execute(f"SELECT value FROM {pgschema.VALUES}").fetchall() == [("1",)]
        left = cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    assert left == []
    assert _version(fresh_database) == pgschema.SCHEMA_VERSION


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
        conn.execute(f"CREATE SCHEMA {pgschema.SCHEMA}")
        conn.execute(f"CREATE TABLE {pgschema.SESSIONS} (something int)")
        with pytest.raises(StoreSchemaError, match="without a worksurface schema version"):
            pgschema.ensure_schema(conn, "test")
    assert _version(fresh_database) is None  # the refused migration left nothing behind


def test_a_foreign_table_of_the_same_name_elsewhere_is_left_alone(fresh_database):
    import psycopg
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE worksurface_sessions (something int)")  # someone else's, in public
        pgschema.ensure_schema(conn, "test")
        assert conn.execute("SELECT count(*) FROM public.worksurface_sessions").fetchone() == (0,)
    assert _version(fresh_database) == pgschema.SCHEMA_VERSION


def test_an_unreachable_server_is_one_clear_error():
    from worksurface.core.errors import SessionError
    with pytest.raises(SessionError, match=r"postgresql://nobody@127\.0\.0\.1:9/nothing: cannot use the database"):
        Session.open("postgresql://nobody:secret@127.0.0.1:9/nothing", session_id="s")


def test_an_unreachable_server_names_its_address():
    from worksurface.core.errors import DatabaseUnreachableError
    with pytest.raises(DatabaseUnreachableError, match=r"server 127\.0\.0\.1:9 unreachable") as caught:
        Session.open("postgresql://nobody:secret@127.0.0.1:9/nothing", session_id="s")
    assert caught.value.address == "127.0.0.1:9" and "secret" not in str(caught.value)
