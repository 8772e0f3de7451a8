"""Harness fields that adapters carry in `Message.meta` (working directory, git branch).

Adapters put them either at the top of `meta` or inside the source record they keep for round trips;
both places are looked at, and a missing field is None, never an error.
"""

from __future__ import annotations

import posixpath
from typing import Any

from ..core.model import Message

# Keys an adapter may use for the source record it keeps in meta.
RECORD_KEYS = ("record", "raw", "source_record")


def meta_field(message: Message, *keys: str) -> Any:
    """The first of `keys` found in the message's meta or in its kept source record."""
    meta = message.meta
    for key in keys:
        value = meta.get(key)
        if value is not None and not (isinstance(value, str) and not value):
            return value
    for rk in RECORD_KEYS:
        record = meta.get(rk)
        if isinstance(record, dict):
            for key in keys:
                value = record.get(key)
                if value is not None and not (isinstance(value, str) and not value):
                    return value
    return None


def message_cwd(message: Message) -> str | None:
    value = meta_field(message, "cwd")
    return value if isinstance(value, str) else None


def message_branch(message: Message) -> str | None:
    value = meta_field(message, "gitBranch", "git_branch", "branch")
    return value if isinstance(value, str) else None


def is_harness_output(message: Message) -> bool:
    """A user-role message the harness wrote (aider's notices and command output), not the user."""
    return meta_field(message, "kind") == "tool_output"


def normalize_path(path: str, cwd: str | None) -> str:
    """A path made absolute against `cwd` when it is relative and a cwd is known; `.`/`..` folded."""
    p = path.strip().strip("'\"")
    if not p:
        return p
    if not p.startswith(("/", "~")) and cwd:
        p = posixpath.join(cwd, p)
    return posixpath.normpath(p) if p not in (".", "..") else p
