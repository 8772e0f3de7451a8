"""How a request format with no field of its own for it marks worksurface's own messages.

The provider APIs accept no extra keys on a message or block, so a mark has to live in what they do
accept and their SDKs keep:
- OpenAI chat: the message's `name` (`worksurface_<origin>[_<epoch>]`), a field of user, system
  and developer messages that a tool's output can never set;
- Anthropic Messages: a first line `[worksurface:<origin> <role> epoch=<n> id=<id>]` of a text
  block in a user turn or in `system`, which only the harness writes (a tool's output is a
  `tool_result` block and is never read for a mark). So that no conversation text can pass for one,
  a writer puts a backslash before conversation text that starts like a mark (`\\[worksurface:`) and
  the reader takes one off again: the escape is undone on every read, so text round-trips exactly.

Where a secret is known (`keyed(key)`: the gateway keeps one per session in its store), a mark is
authenticated instead of recognised by shape: it carries `tag=<hmac>` (the name a `_<hmac>` suffix),
an HMAC-SHA256 under the key over the origin, role, epoch, id and the message's text, and only a
mark whose tag verifies is read as one. Conversation text is then never escaped nor unescaped: a
client's text that starts like a mark, or a message named like one, is the client's text as it
came. `keyed(NO_KEY)` reads no mark at all.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator

from ..core.model import Message, Origin, Role

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
_ESCAPED_RE = re.compile(r"^\\+\[worksurface:")
_ID_RE = re.compile(r"^[\w.:~+-]{1,200}$")
# A key under which no tag verifies: with it, no text and no name is read as a mark.
NO_KEY = b""
_KEY: ContextVar[bytes | None] = ContextVar("worksurface_ownmark_key", default=None)


def new_key() -> bytes:
    """A fresh secret for one store's marks."""
    return secrets.token_bytes(32)


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

def name_for(message: Message) -> str:
    """The `name` that marks a message worksurface made (tagged over its text under a key)."""
    epoch = _epoch(message)
    name = f"{NAME_PREFIX}{message.origin.value}" + (f"_{epoch}" if epoch is not None else "")
    key = _KEY.get()
    if key:
        role = "user" if message.role == "user" else "system"
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
    key = _KEY.get()
    if key is not None and not _verified(key, m.group("tag"), mark.origin, mark.role, epoch, None, text):
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
    key = _KEY.get()
    if key:
        parts.append(f"tag={_tag(key, mark.origin, mark.role, mark.epoch, mark.id, text)}")
    return " ".join(parts) + "]\n" + text


def conversation_text(text: str) -> str:
    """Conversation text as written where a mark could be read: without a key, one more backslash
    before text that starts like a mark (or like an escaped one), so it can never pass for one;
    under a key, the text as it is (a mark is known by its tag)."""
    if _KEY.get() is not None:
        return text
    return "\\" + text if text.startswith(TEXT_MARK) or _ESCAPED_RE.match(text) else text


def read_text(text: str) -> tuple[Mark | None, str]:
    """(the mark, the text without it) of a text block where marks are read; conversation text has
    its escape taken off (mark None). Under a key: only a mark whose tag verifies, and conversation
    text exactly as it is."""
    key = _KEY.get()
    m = _TEXT_RE.match(text)
    if m is not None:
        epoch = int(m.group("epoch")) if m.group("epoch") else None
        role: Role = "system" if m.group("role") == "system" else "user"
        mark = Mark(Origin(m.group("origin")), role, epoch, m.group("id"))
        rest = text[m.end():]
        if key is None or _verified(key, m.group("tag"), mark.origin, role, epoch, mark.id, rest):
            return mark, rest
    if key is not None:
        return None, text
    if _ESCAPED_RE.match(text):
        return None, text[1:]
    return None, text
