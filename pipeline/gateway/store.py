"""Where the gateway's sessions live: one worksurface session per recognised conversation.

`open_gateway_session`, `list_gateway_sessions` and `delete_gateway_session` are the only places that
know the store's layout (a directory with one subdirectory per session; the PostgreSQL store plugs
in behind the same three functions). Session data is private: directories 0700, files 0600 (the
gateway process runs with umask 077), whatever the user's umask.

Beside the worksurface session each directory holds `gateway.json`: what the gateway knows about
the conversation (the API, how it was recognised, the compaction summaries it handed out).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from ..core.config import Config
from ..core.errors import SessionError
from ..core.fileio import atomic_write
from ..session.session import Session

INFO_FILE = "gateway.json"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")
PRIVATE_DIR = 0o700


def is_url(store: str) -> bool:
    return "://" in store


def session_dir(store: str, session_id: str) -> Path:
    if not _ID.fullmatch(session_id):
        raise SessionError(f"{session_id!r} is not a session id")
    return Path(store) / session_id


def open_gateway_session(store: str, session_id: str, config: Config) -> Session:
    """The session `session_id` in `store`, created on first use."""
    if is_url(store):
        raise SessionError(f"{store}: this worksurface has no store for URLs; give a directory")
    root = Path(store)
    root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    os.chmod(root, PRIVATE_DIR)
    path = session_dir(store, session_id)
    path.mkdir(exist_ok=True, mode=PRIVATE_DIR)
    return Session.open(path, config=config)


def list_gateway_sessions(store: str) -> list[str]:
    """Ids of the sessions in `store`, sorted."""
    root = Path(store)
    if is_url(store) or not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _ID.fullmatch(p.name))


def delete_gateway_session(store: str, session_id: str) -> bool:
    """Remove a session and everything it stored; False when there is none."""
    path = session_dir(store, session_id)
    if not path.is_dir():
        return False
    shutil.rmtree(path)
    return True


def read_info(store: str, session_id: str) -> dict[str, Any]:
    """The gateway's notes about a session ({} when none were written)."""
    try:
        data = json.loads((session_dir(store, session_id) / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_info(store: str, session_id: str, info: dict[str, Any]) -> None:
    path = session_dir(store, session_id) / INFO_FILE
    atomic_write(path, json.dumps(info, ensure_ascii=False, indent=1))
    os.chmod(path, 0o600)
