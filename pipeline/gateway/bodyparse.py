"""Request bodies parsed from where they differ from a recent one of the same conversation.

A harness sends the whole conversation on every call, so a body is mostly the text of the previous
one: the same system prompt and tools, the same turns, a few new ones at the end. `BodyParser.parse`
returns what `json.loads` returns, but a value whose text (a top-level field's, or an element's of
the conversation list) is character for character the text that a recent body had at that place is
that body's parsed object, not a new parse: only what changed is decoded, and the session's readers
see the same objects again (the formats' `Reuse` then matches them by identity). A value is taken
over only when its text is self-delimiting (an object, an array or a string: a number's text can be
the start of a longer one). Which recent body to compare with is the one that shared the longest of
the body's beginnings (the first 256, 1,024, 4,096 ... characters, by hash): a conversation grows at
the end of its list, so its previous body shares the longest beginning that still ends before the
new turns. The comparison itself is what decides, so a wrong guess only parses more.
Anything this parser does not expect is handed to `json.loads`, whose result or error stands.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

_DECODER = json.JSONDecoder()
_SCAN = _DECODER.scan_once  # type: ignore[attr-defined]
_SCANSTRING = json.decoder.scanstring  # type: ignore[attr-defined]
_WHITESPACE = " \t\n\r"
# The beginnings of a body by which the recent body it is compared with is found (characters).
WINDOWS = tuple(256 * 4**k for k in range(8))       # 256 ... 4,194,304
# Conversation lists parsed element by element (Messages and Chat: `messages`, Responses: `input`).
LIST_KEYS = frozenset({"messages", "input"})
_SELF_DELIMITING = frozenset('{["')


class _Odd(Exception):
    """Not the shape this parser reads: json.loads decides."""


@dataclass(frozen=True)
class ParsedBody:
    """A parsed body with the text span of each top-level value and conversation element."""

    text: str
    doc: dict[str, Any]
    fields: dict[str, tuple[int, int]]
    elements: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def value_text(self, key: str) -> str | None:
        span = self.fields.get(key)
        return self.text[span[0]:span[1]] if span is not None else None


class BodyParser:
    """`json.loads` for successive request bodies (module doc); `recent` bodies are kept to compare
    with (each holds its text and parsed value: memory is about twice that many bodies)."""

    def __init__(self, recent: int = 64) -> None:
        # A beginning's (window, hash) -> the latest body that had it; about len(WINDOWS) per body.
        self._recent: OrderedDict[tuple[int, int], ParsedBody] = OrderedDict()
        self._limit = recent * len(WINDOWS)
        self._lock = threading.Lock()      # read_head runs on several worker threads
        self.reused = 0                    # values the last parse took over (for tests and profiles)

    def parse(self, raw: bytes) -> Any:
        """What `json.loads(raw)` returns (its error when it raises one)."""
        try:
            text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        except (UnicodeDecodeError, LookupError):
            return json.loads(raw)
        keys = [(w, hash(text[:w])) for w in WINDOWS if w <= len(text)] or [(0, hash(text))]
        with self._lock:
            previous = next((self._recent[k] for k in reversed(keys) if k in self._recent), None)
        try:
            parsed = self._parse(text, previous)
        except (_Odd, ValueError, IndexError, KeyError, StopIteration, RecursionError):
            return json.loads(raw)
        with self._lock:
            for key in keys:
                self._recent[key] = parsed
                self._recent.move_to_end(key)
            while len(self._recent) > self._limit:
                self._recent.popitem(last=False)
        return parsed.doc

    def _parse(self, s: str, previous: ParsedBody | None) -> ParsedBody:
        self.reused = 0
        i = _skip(s, 0)
        if s[i] != "{":
            raise _Odd
        doc: dict[str, Any] = {}
        fields: dict[str, tuple[int, int]] = {}
        elements: dict[str, list[tuple[int, int]]] = {}
        i = _skip(s, i + 1)
        if s[i] == "}":
            i += 1
        else:
            while True:
                if s[i] != '"':
                    raise _Odd
                key, i = _SCANSTRING(s, i + 1, True)
                i = _skip(s, i)
                if s[i] != ":":
                    raise _Odd
                i = _skip(s, i + 1)
                start = i
                if key in LIST_KEYS and s[i] == "[":
                    doc[key], i, elements[key] = self._list(s, i, previous, key)
                else:
                    doc[key], i = self._value(s, i, previous, key)
                fields[key] = (start, i)
                i = _skip(s, i)
                if s[i] == ",":
                    i = _skip(s, i + 1)
                    continue
                if s[i] != "}":
                    raise _Odd
                i += 1
                break
        if _skip(s, i) != len(s):
            raise _Odd
        return ParsedBody(s, doc, fields, elements)

    def _value(self, s: str, i: int, previous: ParsedBody | None, key: str) -> tuple[Any, int]:
        if previous is None or key not in previous.doc:
            return _SCAN(s, i)
        return self._taken_over(s, i, previous.value_text(key), previous.doc[key])

    def _list(self, s: str, i: int, previous: ParsedBody | None,
              key: str) -> tuple[list[Any], int, list[tuple[int, int]]]:
        old = previous.doc.get(key) if previous is not None else None
        old_spans = previous.elements.get(key, []) if previous is not None and isinstance(old, list) else []
        items: list[Any] = []
        spans: list[tuple[int, int]] = []
        i = _skip(s, i + 1)
        if s[i] == "]":
            return items, i + 1, spans
        while True:
            n, start = len(items), i
            if n < len(old_spans):
                assert previous is not None and isinstance(old, list)
                a, b = old_spans[n]
                value, i = self._taken_over(s, i, previous.text[a:b], old[n])
            else:
                value, i = _SCAN(s, i)
            items.append(value)
            spans.append((start, i))
            i = _skip(s, i)
            if s[i] == ",":
                i = _skip(s, i + 1)
                continue
            if s[i] != "]":
                raise _Odd
            return items, i + 1, spans

    def _taken_over(self, s: str, i: int, before: str | None, value: Any) -> tuple[Any, int]:
        """`value` and the end of its text when the text at `i` is `before` (a self-delimiting value's
        text, so the value there ends where `before` does), else what is there, parsed."""
        if before is not None and s[i] in _SELF_DELIMITING and s.startswith(before, i):
            self.reused += 1
            return value, i + len(before)
        return _SCAN(s, i)    


def _skip(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WHITESPACE:
        i += 1
    return i
