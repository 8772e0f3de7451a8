"""The forwarded body's bytes, encoded from what changed since the conversation's previous call.

A conversation's successive forwarded bodies share most of their values as the same objects: the
blocks of every message the view kept (what the writer's memo and the client's own raw JSON give
back from call to call), the tool definitions, the system prompt. `BodyEncoder.dumps(doc)` is
`apis.dumps(doc)` byte for byte, but reuses the bytes of any such value it encoded on the previous
call (held, so an object's identity cannot be taken by another), and encodes only the new ones: the
per-request cost follows what is new, not the size of the conversation. It relies on what the
gateway never does: change a value of a body in place after building it.
"""

from __future__ import annotations

import json
from typing import Any

from .apis import dumps

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# The lists of a request whose elements are a conversation's turns or items (Messages and Chat:
# `messages`, Responses: `input`); any other list is encoded element by element too (`tools`).
CONVERSATION_KEYS = frozenset({"messages", "input"})
SHORT_TEXT = 256


def _raw(value: Any) -> bytes:
    return _ENCODE(value).encode("utf-8", "backslashreplace")


class BodyEncoder:
    """`dumps` for one conversation's successive forwarded bodies (module doc)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[Any, bytes]] = {}
        self._next: dict[int, tuple[Any, bytes]] = {}
        self.reused = 0         # values whose bytes the last call took from the previous one

    def dumps(self, doc: Any) -> bytes:
        if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
            return dumps(doc)
        self.reused = 0
        parts = []
        for key, value in doc.items():
            if isinstance(value, list):
                turns = key in CONVERSATION_KEYS
                encoded = b"[" + b",".join(self._turn(v) if turns else self._held(v) for v in value) + b"]"
            else:
                encoded = self._held(value)
            parts.append(_raw(key) + b":" + encoded)
        self._last, self._next = self._next, {}
        return b"{" + b",".join(parts) + b"}"

    def _turn(self, turn: Any) -> bytes:
        """A turn: a new dict on every call (Messages and Chat), whose content blocks are not."""
        content = turn.get("content") if isinstance(turn, dict) else None
        if not isinstance(content, list) or not all(isinstance(k, str) for k in turn):
            return self._held(turn)
        fields = [_raw(k) + b":" + (b"[" + b",".join(self._held(b) for b in v) + b"]" if k == "content" else _raw(v))
                  for k, v in turn.items()]
        return b"{" + b",".join(fields) + b"}"

    def _held(self, value: Any) -> bytes:
        if not isinstance(value, (dict, list)) and not (isinstance(value, str) and len(value) > SHORT_TEXT):
            return _raw(value)      # as quick to encode as to look up
        key = id(value)
        hit = self._next.get(key) or self._last.get(key)
        if hit is not None and hit[0] is value:
            self.reused += 1
        else:
            hit = (value, _raw(value))
        self._next[key] = hit
        return hit[1]
