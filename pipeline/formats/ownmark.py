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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.model import Message, Origin, Role

_ORIGINS = "|".join(o.value for o in Origin if o is not Origin.CONVERSATION)
# OpenAI: the `name` of a message worksurface made.
NAME_PREFIX = "worksurface_"
_NAME_RE = re.compile(rf"^{NAME_PREFIX}(?P<origin>{_ORIGINS})(?:_(?P<epoch>\d{{1,9}}))?$")
# Anthropic: the first line of a text block of a message worksurface made.
TEXT_MARK = "[worksurface:"
_TEXT_RE = re.compile(rf"^\[worksurface:(?P<origin>{_ORIGINS}) (?P<role>user|system)"
                      r"(?: epoch=(?P<epoch>\d{1,9}))?(?: id=(?P<id>[\w.:~+-]{1,200}))?\]\n")
_ESCAPED_RE = re.compile(r"^\\+\[worksurface:")
_ID_RE = re.compile(r"^[\w.:~+-]{1,200}$")


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
    """The `name` that marks a message worksurface made."""
    epoch = _epoch(message)
    return f"{NAME_PREFIX}{message.origin.value}" + (f"_{epoch}" if epoch is not None else "")


def from_name(name: Any, role: str) -> Mark | None:
    """The mark a message's `name` gives, when it is one (never on a tool or assistant message)."""
    if role not in ("user", "system", "developer") or not isinstance(name, str):
        return None
    m = _NAME_RE.match(name)
    if m is None:
        return None
    epoch = int(m.group("epoch")) if m.group("epoch") else None
    return Mark(Origin(m.group("origin")), "system" if role != "user" else "user", epoch)


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
    return " ".join(parts) + "]\n" + text


def conversation_text(text: str) -> str:
    """Conversation text as written where a mark could be read: one more backslash before text that
    starts like a mark (or like an escaped one), so it can never pass for one."""
    return "\\" + text if text.startswith(TEXT_MARK) or _ESCAPED_RE.match(text) else text


def read_text(text: str) -> tuple[Mark | None, str]:
    """(the mark, the text without it) of a text block where marks are read; conversation text has
    its escape taken off (mark None)."""
    m = _TEXT_RE.match(text)
    if m is not None:
        epoch = int(m.group("epoch")) if m.group("epoch") else None
        role: Role = "system" if m.group("role") == "system" else "user"
        return Mark(Origin(m.group("origin")), role, epoch, m.group("id")), text[m.end():]
    if _ESCAPED_RE.match(text):
        return None, text[1:]
    return None, text
