"""worksurface's tables in a PostgreSQL database, created and migrated by worksurface itself.

`worksurface_schema_version` holds one row: the schema version the tables are at. `ensure_schema`
brings a database up to `SCHEMA_VERSION` in one transaction under a transaction-level advisory lock
(so two workers starting at once migrate once), and refuses a database whose schema is newer than
this worksurface knows. The tables live in worksurface's own PostgreSQL schema, `worksurface`
(whatever the connection's search_path says), and each starts with `worksurface_`, so the tables of a
LangGraph checkpointer (or anything else) live in the same database untouched; tables an earlier
worksurface made in the search path's first schema are moved into it by the next migration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.errors import StoreSchemaError

if TYPE_CHECKING:
    import psycopg

# The PostgreSQL schema worksurface owns; every table name below is qualified with it.
SCHEMA = "worksurface"
_BARE = ("worksurface_schema_version", "worksurface_sessions", "worksurface_values", "worksurface_artifact_chunks")
VERSION_TABLE, SESSIONS, VALUES, CHUNKS = (f"{SCHEMA}.{name}" for name in _BARE)
# The transaction-level advisory lock migrations run under (an arbitrary constant: "wsmigrat").
MIGRATION_LOCK_KEY = 0x77736D6967726174

# MIGRATIONS[v - 1] takes a database from version v - 1 to v. Append only: never edit a released step.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        # A session: its id, and a revision bumped by every committed write (a reader's cache of the
        # session is valid while the revision it read is still the current one).
        f"""CREATE TABLE {SESSIONS} (
            id text PRIMARY KEY,
            revision bigint NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now())""",
        # The store's key-value layer: one JSON text per key (log entries, edits, meta, artifact records).
        f"""CREATE TABLE {VALUES} (
            session_id text NOT NULL REFERENCES {SESSIONS} (id) ON DELETE CASCADE,
            key text NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (session_id, key))""",
        # Artifact contents (the JSON text of `artifact:<id>`), in chunks so a large one never travels
        # or sits in memory as one value.
        f"""CREATE TABLE {CHUNKS} (
            session_id text NOT NULL REFERENCES {SESSIONS} (id) ON DELETE CASCADE,
            artifact_id text NOT NULL,
            seq integer NOT NULL,
            chunk text NOT NULL,
            PRIMARY KEY (session_id, artifact_id, seq))""",
    ),
    (
        # The id of the commit that made the session's current revision: a writer that lost the answer
        # to its commit reads it back to learn whether the commit landed (and never writes it twice).
        f"ALTER TABLE {SESSIONS} ADD COLUMN last_commit text",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: "psycopg.Connection[object]") -> int | None:
    """The version the database's worksurface tables are at (None: no worksurface tables)."""
    from psycopg.rows import tuple_row

    cur = conn.cursor(row_factory=tuple_row)
    exists = cur.execute("SELECT to_regclass(%s) IS NOT NULL", (VERSION_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return None
    row = cur.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
    return None if row is None else int(row[0])


def ensure_schema(conn: "psycopg.Connection[object]", where: str) -> int:
    """Create or migrate worksurface's tables to `SCHEMA_VERSION`; return the version found before.
    `conn` must be in autocommit mode (the migration is its own transaction)."""
    from psycopg.rows import tuple_row

    current = schema_version(conn)
    if current == SCHEMA_VERSION:
        return current  # the common case, every process start: one read, no lock, no DDL
    with conn.transaction():
        cur = conn.cursor(row_factory=tuple_row)
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        if cur.execute("SELECT to_regnamespace(%s) IS NULL", (SCHEMA,)).fetchone() == (True,):
            cur.execute(f"CREATE SCHEMA {SCHEMA}")
        _adopt_search_path_tables(cur)
        cur.execute(f"""CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            version integer NOT NULL,
            migrated_at timestamptz NOT NULL DEFAULT now())""")
        found = schema_version(conn) or 0
        if found > SCHEMA_VERSION:
            raise StoreSchemaError(f"{where}: the database's worksurface schema is version {found}, newer than "
                                   f"this worksurface (which knows up to version {SCHEMA_VERSION}); upgrade "
                                   "worksurface to use it (nothing was changed)")
        if found < 1 and cur.execute("SELECT to_regclass(%s) IS NOT NULL", (SESSIONS,)).fetchone() == (True,):
            raise StoreSchemaError(f"{where}: a table {SESSIONS} exists without a worksurface schema version "
                                   f"(not created by worksurface?); nothing was changed")
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                cur.execute(statement)
        if found != SCHEMA_VERSION:
            cur.execute(f"""INSERT INTO {VERSION_TABLE} (singleton, version) VALUES (true, %s)
                            ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version, migrated_at = now()""",
                        (SCHEMA_VERSION,))
    return found


def _adopt_search_path_tables(cur: "psycopg.Cursor[tuple[object, ...]]") -> None:
    """Move the tables an earlier worksurface created in the search path's first schema (it did not
    qualify their names) into worksurface's own schema, when that schema holds none yet: only where
    worksurface's version table says they are worksurface's."""
    if cur.execute("SELECT to_regclass(%s) IS NULL", (VERSION_TABLE,)).fetchone() != (True,):
        return
    if cur.execute("SELECT to_regclass(%s) IS NOT NULL", (_BARE[0],)).fetchone() != (True,):
        return
    for name in _BARE:
        if cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone() == (True,):
            cur.execute(f"ALTER TABLE {name} SET SCHEMA {SCHEMA}")
