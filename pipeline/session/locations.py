"""Where a session lives, by location: a directory (the embedded diskcache backend) or a
`postgresql://` URL (the PostgreSQL backend), and a session id naming one session in it.

For a URL the id is required (it names the session inside the database). For a directory, the
directory is the session, or with an id, the directory holds sessions by id in subdirectories (a
gateway's `--store DIR`). `list_sessions` and `delete_session` work on either kind of location.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.config_sections import StoreConfig
from ..core.errors import InvalidSessionIdError
from ..core.tokens import TokenCounter
from .pgstore import is_postgres_url
from .store import Store

Location = str | os.PathLike[str]
# A session id that is safe as one directory name on every platform.
_DIRECTORY_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}")


def check_directory_id(session_id: str) -> str:
    """A session id usable as a subdirectory name (letters, digits, `._+-`, not starting with a dot)."""
    if not isinstance(session_id, str) or not _DIRECTORY_ID.fullmatch(session_id):  # ASCII only: no lone surrogate
        raise InvalidSessionIdError(f"session id {str(session_id)[:80]!r} cannot name a session directory: use 1-128 "
                                    "letters, digits, '_', '+', '-' or '.', not starting with '.' or '-'")
    return session_id


def describe(location: Location | None, session_id: str | None = None) -> str:
    """The location as messages name it (a URL without its password)."""
    if location is None:
        return "<memory>"
    if is_postgres_url(location):
        from .pgstore import redacted
        return f"{redacted(str(location))} session {session_id!r}"
    return str(Path(location) / session_id) if session_id else str(location)


def open_store(location: Location, session_id: str | None = None, counter: TokenCounter | None = None, *,
               create: bool = True, limits: StoreConfig | None = None) -> Store:
    """The store of the session at `location` (named `session_id` there); created if needed unless
    `create` is False (then `SessionNotFoundError`). `limits` bounds a database's waits (the
    defaults when None)."""
    if is_postgres_url(location):
        from .pgstore import PostgresStore, check_session_id
        return PostgresStore(str(location), check_session_id(session_id), counter, create=create,
                             limits=limits or StoreConfig())
    from .diskstore import DiskStore
    path = Path(location)
    if session_id is not None:
        path = path / check_directory_id(session_id)
    return DiskStore(path, counter, create=create)


def list_sessions(location: Location) -> list[str]:
    """The ids of the sessions kept at `location`: a database's, or a directory's subdirectories."""
    if is_postgres_url(location):
        from .pgstore import PostgresStore
        return PostgresStore.list_sessions(str(location))
    from .diskstore import DiskStore
    return DiskStore.list_sessions(location)


def delete_session(location: Location, session_id: str | None, *, timeout: float = 30.0) -> None:
    """Remove the session `session_id` at `location` (for a directory, None: the directory is the
    session) once no one holds its lock (`SessionLockedError` after `timeout`); `SessionNotFoundError`
    if there is none."""
    if is_postgres_url(location):
        from .pgstore import PostgresStore, check_session_id
        PostgresStore.delete_session(str(location), check_session_id(session_id), timeout)
        return
    from .diskstore import DiskStore
    path = Path(location)
    if session_id is None:
        DiskStore.delete_session(path.parent, path.name, timeout)
    else:
        DiskStore.delete_session(path, check_directory_id(session_id), timeout)


__all__ = ["Location", "check_directory_id", "delete_session", "describe", "list_sessions", "open_store"]
