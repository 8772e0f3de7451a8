"""The session store's JSON text, in one place: how a value is encoded for storage, and a value that
arrives already encoded (a large part assembled from the texts of its unchanged records, so a save
re-encodes only what changed)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any, Iterable

# Compact, ASCII-escaped (lone surrogates survive SQLite, no NUL reaches PostgreSQL's text), key order
# kept (raw provider records round-trip).
SEPARATORS = (",", ":")
# Built once: `json.dumps` with any non-default option builds a new encoder per call, which cost as
# much as encoding the small values a call stores.
_ENCODER = json.JSONEncoder(separators=SEPARATORS)
# A transcript line: compact, UTF-8 kept as written by the harnesses.
_LINE_ENCODER = json.JSONEncoder(separators=SEPARATORS, ensure_ascii=False)
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode(value: Any) -> str:
    """The store's JSON text of a value (raises TypeError or ValueError when it is not JSON-able)."""
    return _ENCODER.encode(value)


def encode_line(record: Any) -> str:
    """A record as one compact JSON line of a transcript file (no newline): characters as they are,
    but ASCII-escaped when the record holds a lone surrogate, which UTF-8 cannot write."""
    line = _LINE_ENCODER.encode(record)
    if line.isascii() or not _SURROGATE.search(line):  # isascii reads a flag: no scan of the line
        return line
    return _ENCODER.encode(record)


@dataclass(frozen=True)
class EncodedJSON:
    """A value given as its store JSON text (what `encode` of the value would give): stored as is."""

    text: str

    @classmethod
    def of_object(cls, items: Iterable[tuple[str, str]]) -> "EncodedJSON":
        """A JSON object from (key, value's encoded text) pairs: byte for byte what `encode` gives for
        the dict of those keys and values."""
        # A key is quoted as `encode` quotes a string (ASCII-escaped), by the json module's own C function.
        return cls("{" + ",".join(f"{encode_basestring_ascii(k)}:{text}" for k, text in items) + "}")

    def value(self) -> Any:
        return json.loads(self.text)
