"""Parsing whole-document JSON transcripts: strict for `read`, forgiving and shared for `sniff`."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..core import strictjson
from ..core.errors import FormatError

# detect_format asks several JSON adapters about the same text in a row; parsing it once for all of
# them keeps sniffing cheap. Two entries: the text being detected and, at most, one other.
_PEEK_CACHE_SIZE = 2
# Deepest nesting accepted. Real transcripts stay under about 20 levels (tool inputs included); much
# deeper documents are hostile or broken, and code that walks values recursively (hashing, copying,
# serializing) would hit Python's recursion limit (1000 frames) on them somewhere downstream.
MAX_DEPTH = 200


def parse_json(text: str, path: str | None, expected: str) -> Any:
    """Parse a JSON document; a decode error becomes a FormatError with the decoder's line, and
    nesting deeper than MAX_DEPTH a FormatError too."""
    try:
        doc = strictjson.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON ({exc.msg} at column {exc.colno}); expected {expected}",
                          path=path, line=exc.lineno) from None
    except strictjson.UnreadableNumber as exc:
        raise strictjson.number_error(exc, text, path) from None
    except RecursionError:
        doc = None
        deep = True
    else:
        deep = too_deep(doc)
    if deep:
        raise FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path)
    return doc


def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """True when lists and objects in `doc` nest more than `limit` levels (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


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
    except (ValueError, RecursionError):  # broken JSON, or an integer too long for Python to read
        return None


def as_messages(doc: Any) -> list[Any] | None:
    """The message list of a chat-shaped document (a bare list, or an object's `messages`)."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return doc["messages"]
    return None


def content_text(content: Any) -> str:
    """Text of a chat `content` that is a string, null, or a list of text parts ("" for anything
    else: for sniffing; `read` uses `text_of`, which rejects other types)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def text_of(content: Any, path: str | None, record: str, field: str = "content") -> str:
    """Like `content_text`, but a number, boolean or object is a FormatError naming the record:
    converting it to text would hand the model something the harness never showed it."""
    if content is None or isinstance(content, (str, list)):
        return content_text(content)
    raise FormatError(f"{field} must be a string, null or a list of parts, not {type(content).__name__}",
                      path=path, record=record)


def expect(value: Any, kind: type | tuple[type, ...], path: str | None, record: str, what: str) -> Any:
    """`value` if it is of `kind` (None allowed: absent fields), else a FormatError naming the record."""
    if value is None or isinstance(value, kind):
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = " or ".join(_TYPE_WORDS.get(k, k.__name__) for k in kinds)
    raise FormatError(f"{what} must be {names}, not {_TYPE_WORDS.get(type(value), type(value).__name__)}",
                      path=path, record=record)


# JSON's names for the Python types json.loads produces, for error messages.
_TYPE_WORDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string", int: "a number",
                                float: "a number", bool: "a boolean"}
