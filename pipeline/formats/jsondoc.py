"""Parsing whole-document JSON transcripts: strict for `read`, forgiving and shared for `sniff`."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..errors import FormatError

# detect_format asks several JSON adapters about the same text in a row; parsing it once for all of
# them keeps sniffing cheap. Two entries: the text being detected and, at most, one other.
_PEEK_CACHE_SIZE = 2


def parse_json(text: str, path: str | None, expected: str) -> Any:
    """Parse a JSON document; a decode error becomes a FormatError with the decoder's line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON ({exc.msg} at column {exc.colno}); expected {expected}",
                          path=path, line=exc.lineno) from None


@lru_cache(maxsize=_PEEK_CACHE_SIZE)
def peek_json(text: str) -> Any:
    """The parsed document for sniffing, or None when `text` is not one JSON list or object.

    The result is shared between sniffers: callers must not modify it.
    """
    start = text.lstrip()[:1]
    if start not in ("[", "{"):
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def as_messages(doc: Any) -> list[Any] | None:
    """The message list of a chat-shaped document (a bare list, or an object's `messages`)."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return doc["messages"]
    return None


def content_text(content: Any) -> str:
    """Text of a chat `content` that is a string, null, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return str(content)
