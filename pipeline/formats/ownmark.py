"""How a request format with no field of its own for it marks worksurface's own messages.

The provider APIs accept no extra keys on a message or block, so a mark has to live in what they do
accept and their SDKs keep:
- OpenAI chat: the message's `name` (`worksurface_<origin>[_<epoch>]_<tag>`), a field of user, system
  and developer messages that a tool's output can never set;
- Anthropic Messages and Responses: a first line `[worksurface:<origin> <role> epoch=<n> id=<id> tag=<tag>]`
  of a text block in a user turn or in `system`, which only the harness writes (a tool's output is a
  `tool_result` block and is never read for a mark).

A mark is authenticated, never recognised by its shape: its tag is an HMAC-SHA256 under a secret key
over the origin, role, epoch, id and the message's text, and only a mark whose tag verifies is read as
one. Conversation text is never escaped nor unescaped: text that starts like a mark, or a message
named like one, is the conversation's own text, read and written back exactly. The key is the one
`keyed(key)` sets (the gateway keeps one per session in its store), else the user's own (`user_key`:
a file in their worksurface config folder, made on first use), so a file worksurface compacted reads
back with its marks for the same user wherever the file is moved, and as plain text for anyone else
(or from before marks were tagged). `keyed(NO_KEY)` reads no mark at all.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..core.errors import ConfigError
from ..core.fileio import PRIVATE_FILE_MODE
from ..core.model import Message, Origin, Role
from ..core.trust import user_config_dir

log = logging.getLogger("worksurface")

_ORIGINS = "|".join(o.value for o in Origin if o is not Origin.CONVERSATION)
# OpenAI: the `name` of a message worksurface made.
NAME_PREFIX = "worksurface_"
# The tag: the first TAG_HEX hex digits of the HMAC (96 bits; a chat `name` holds at most 64 characters).
TAG_HEX = 24
_TAG = rf"[0-9a-f]{{{TAG_HEX}}}"
_NAME_RE = re.compile(rf"^{NAME_PREFIX}(?P<origin>{_ORIGINS})(?:_(?P<epoch>\d{{1,9}}))?(?:_(?P<tag>{_TAG}))?$")
# Anthropic: the first line of a text block of a message worksurface made.
TEXT_MARK = "[worksurface:"
_TEXT_RE = re.compile(rf"^\[worksurface:(?P<origin>{_ORIGINS}) (?P<role>user|system)"
                      r"(?: epoch=(?P<epoch>\d{1,9}))?(?: id=(?P<id>[\w.:~+-]{1,200}))?"
                      rf"(?: tag=(?P<tag>{_TAG}))?\]\n")
_ID_RE = re.compile(r"^[\w.:~+-]{1,200}$")
# A key under which no tag verifies: with it, no text and no name is read as a mark.
NO_KEY = b""
_KEY: ContextVar[bytes | None] = ContextVar("worksurface_ownmark_key", default=None)
# The user's mark key: this file in their worksurface config folder, 64 hex digits, mode 0600.
USER_KEY_FILE = "mark.key"
KEY_BYTES = 32
_user_keys: dict[str, bytes] = {}   # per key file (XDG_CONFIG_HOME can change within a process)
_user_keys_lock = threading.Lock()


class MarkKeyError(ConfigError):
    """The user's mark key file exists but is not one worksurface wrote."""


def new_key() -> bytes:
    """A fresh secret for one store's marks."""
    return secrets.token_bytes(KEY_BYTES)


def user_key() -> bytes:
    """The user's own mark key, made on first use (`USER_KEY_FILE`, 0600, in `user_config_dir()`).
    Per user rather than per session folder, so a compacted file keeps its marks for its user wherever
    it is moved or copied. Where the folder cannot be written, a key for this process only (with a
    warning): its marks read as text later, which loses nothing."""
    path = user_config_dir() / USER_KEY_FILE
    where = str(path)
    with _user_keys_lock:
        key = _user_keys.get(where)
        if key is None:
            key = _read_or_make_key(path)
            _user_keys[where] = key
        return key


def _read_or_make_key(path: Path) -> bytes:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = new_key()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE_MODE)
        except FileExistsError:
            return _read_key(path)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(fresh.hex() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return fresh
    except MarkKeyError:
        raise
    except OSError as exc:
        log.warning("worksurface: cannot keep a mark key in %s (%s): marks written now read as text later",
                    path, exc.strerror or exc)
        return new_key()


def _read_key(path: Path) -> bytes:
    # A file half-written by a concurrent first use is waited for briefly; anything else is refused by name.
    for _ in range(50):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(4 * KEY_BYTES)
        text = raw.decode("ascii", "replace").strip()
        if re.fullmatch(rf"[0-9a-f]{{{2 * KEY_BYTES}}}", text):
            return bytes.fromhex(text)
        if raw and not raw.endswith(b"\n") and len(raw) < 2 * KEY_BYTES:
            time.sleep(0.01)
            continue
        break
    raise MarkKeyError(f"{path}: not a worksurface mark key (expected {2 * KEY_BYTES} hex digits); remove it "
                       "to make a new one (files compacted under the old key then read their marks as text)")


def _key() -> bytes:
    """The key marks are written and read under: `keyed`'s, else the user's own."""
    key = _KEY.get()
    return user_key() if key is None else key


@contextmanager
def keyed(key: bytes) -> Iterator[None]:
    """Marks written and read within are authenticated under `key` (see the module doc)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


def _tag(key: bytes, origin: Origin, role: str, epoch: int | None, mark_id: str | None, text: str) -> str:
    fields = "\x00".join((origin.value, role, "" if epoch is None else str(epoch), mark_id or "", text))
    return hmac.new(key, fields.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:TAG_HEX]


def _verified(key: bytes, tag: str | None, origin: Origin, role: str, epoch: int | None, mark_id: str | None,
              text: str) -> bool:
    """The tag is the one `key` gives these fields (compared in constant time; never with NO_KEY)."""
    return bool(key) and tag is not None and hmac.compare_digest(tag, _tag(key, origin, role, epoch, mark_id, text))


@dataclass(frozen=True)
class Mark:
    """What a mark says: the message's origin and role, and the epoch and id when it gave them."""

    origin: Origin
    role: Role
    epoch: int | None = None
    id: str | None = None

    def meta(self) -> dict[str, Any]:
        return {"epoch": self.epoch} if self.epoch is not None else {}


def _epoch(message: Message) -> int | None:
    epoch = message.meta.get("epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and 0 <= epoch < 10**9 else None


# ---- OpenAI: the `name` field -----------------------------------------------------------------

def name_for(message: Message, written_role: str | None = None) -> str:
    """The `name` that marks a message worksurface made (tagged over its text and the role it is
    written as, `written_role` when that is not its own: a summary is written as a user message)."""
    epoch = _epoch(message)
    name = f"{NAME_PREFIX}{message.origin.value}" + (f"_{epoch}" if epoch is not None else "")
    key = _key()
    if key:
        role = "user" if (written_role or message.role) == "user" else "system"
        name += "_" + _tag(key, message.origin, role, epoch, None, message.text)
    return name


def from_name(name: Any, role: str, text: str = "") -> Mark | None:
    """The mark a message's `name` gives, when it is one (never on a tool or assistant message);
    under a key only when its tag verifies over `text`, the message's text."""
    if role not in ("user", "system", "developer") or not isinstance(name, str):
        return None
    m = _NAME_RE.match(name)
    if m is None:
        return None
    epoch = int(m.group("epoch")) if m.group("epoch") else None
    mark = Mark(Origin(m.group("origin")), "system" if role != "user" else "user", epoch)
    if not _verified(_key(), m.group("tag"), mark.origin, mark.role, epoch, None, text):
        return None
    return mark


# ---- Anthropic: a first line of a text block --------------------------------------------------

def mark_of(message: Message) -> Mark:
    """The mark for a message worksurface made."""
    return Mark(message.origin, "system" if message.role == "system" else "user", _epoch(message),
                message.id if _ID_RE.match(message.id) else None)


def marked_text(mark: Mark, text: str) -> str:
    """`text` of a message worksurface made, with the mark line that says so."""
    parts = [f"{TEXT_MARK}{mark.origin.value} {mark.role}"]
    if mark.epoch is not None:
        parts.append(f"epoch={mark.epoch}")
    if mark.id is not None:
        parts.append(f"id={mark.id}")
    key = _key()
    if key:
        parts.append(f"tag={_tag(key, mark.origin, mark.role, mark.epoch, mark.id, text)}")
    return " ".join(parts) + "]\n" + text


def read_text(text: str) -> tuple[Mark | None, str]:
    """(the mark, the text without it) of a text block where marks are read, when its first line is a
    mark whose tag verifies; else (None, the text exactly as it is)."""
    m = _TEXT_RE.match(text)
    if m is not None:
        epoch = int(m.group("epoch")) if m.group("epoch") else None
        role: Role = "system" if m.group("role") == "system" else "user"
        mark = Mark(Origin(m.group("origin")), role, epoch, m.group("id"))
        rest = text[m.end():]
        if _verified(_key(), m.group("tag"), mark.origin, role, epoch, mark.id, rest):
            return mark, rest
    return None, text
