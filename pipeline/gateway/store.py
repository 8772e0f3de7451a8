"""Where the gateway's sessions live: one worksurface session per recognised conversation.

`open_gateway_session`, `list_gateway_sessions` and `delete_gateway_session` are the only places that
know the store: a directory with one subdirectory per session, or a `postgresql://` database shared
by several gateway replicas (`worksurface.session.locations` either way). Directory session data is
private: directories 0700, files 0600 (the gateway process runs with umask 077), whatever the user's
umask.

Beside the worksurface session the gateway keeps what it knows about the conversation (the API, how
it was recognised, the compaction summaries it handed out): `gateway.json` in the session's directory,
or in the session's own metadata in a database.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..core.config import Config
from ..core.errors import SessionError, SessionNotFoundError
from ..core.fileio import atomic_write
from ..session.locations import delete_session, list_sessions, open_store
from ..session.pgstore import is_postgres_url
from ..session.session import Session
from ..session.writebehind import Flusher, WriteBehindStore

INFO_FILE = "gateway.json"
# In a database, the gateway's notes about a session are this metadata key of the session.
INFO_META = "gateway_info"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")
PRIVATE_DIR = 0o700


def is_url(store: str) -> bool:
    return "://" in store


def valid_session_id(session_id: str) -> bool:
    """A name a session of the gateway's can have (what the admin routes accept)."""
    return bool(_ID.fullmatch(session_id))


def _check(store: str, session_id: str) -> None:
    if not valid_session_id(session_id):
        raise SessionError(f"{session_id!r} is not a session id")
    if is_url(store) and not is_postgres_url(store):
        raise SessionError(f"{store.split('://')[0]}:// stores are not supported: give a directory or a "
                           "postgresql:// URL")


def session_dir(store: str, session_id: str) -> Path:
    _check(store, session_id)
    return Path(store) / session_id


def open_gateway_session(store: str, session_id: str, config: Config, flusher: Flusher | None = None) -> Session:
    """The session `session_id` in `store`, created on first use; with `flusher`, kept hot in memory
    and written behind (session.writebehind)."""
    _check(store, session_id)
    if not is_url(store):
        root = Path(store)
        root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        os.chmod(root, PRIVATE_DIR)
        session_dir(store, session_id).mkdir(exist_ok=True, mode=PRIVATE_DIR)
    if flusher is None:
        return Session.open(store, session_id=session_id, config=config)
    # Session.open closes the store it was given if the session cannot be opened on it.
    return Session.open(WriteBehindStore(open_store(store, session_id, limits=config.store), flusher), config=config)


def list_gateway_sessions(store: str) -> list[str]:
    """Ids of the sessions in `store`, sorted."""
    if is_url(store) and not is_postgres_url(store):
        return []
    return [i for i in list_sessions(store) if _ID.fullmatch(i)]


def delete_gateway_session(store: str, session_id: str) -> bool:
    """Remove a session and everything it stored; False when there is none."""
    _check(store, session_id)
    try:
        delete_session(store, session_id)
    except SessionNotFoundError:
        return False
    return True


def read_info(store: str, session_id: str) -> dict[str, Any]:
    """The gateway's notes about a session ({} when none were written)."""
    if is_postgres_url(store):
        try:
            with open_store(store, session_id, create=False) as kept:
                data = kept.get_meta(INFO_META)
        except SessionNotFoundError:
            return {}
        except SessionError as exc:  # a damaged session is listed as such; opening it says what is wrong
            return {"error": str(exc)}
    else:
        try:
            data = json.loads((session_dir(store, session_id) / INFO_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
    return data if isinstance(data, dict) else {}


def write_info(store: str, session_id: str, info: dict[str, Any]) -> None:
    if is_postgres_url(store):
        _check(store, session_id)
        with open_store(store, session_id) as kept:
            kept.set_meta(INFO_META, info)
        return
    path = session_dir(store, session_id) / INFO_FILE
    atomic_write(path, json.dumps(info, ensure_ascii=False, indent=1))
    os.chmod(path, 0o600)
