"""The session store's JSON text, in one place: how a value is encoded for storage, and a value that
arrives already encoded (a large part assembled from the texts of its unchanged records, so a save
re-encodes only what changed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any, Iterable

# Compact, ASCII-escaped (lone surrogates survive SQLite, no NUL reaches PostgreSQL's text), key order
# kept (raw provider records round-trip).
SEPARATORS = (",", ":")


def encode(value: Any) -> str:
    """The store's JSON text of a value (raises TypeError or ValueError when it is not JSON-able)."""
    return json.dumps(value, separators=SEPARATORS)


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
