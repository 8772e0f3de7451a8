"""Server-sent events, read as they stream: each event is handed on as the exact bytes that came in,
with its name and (parsed only when asked) its data, so a relay can pass everything through byte for
byte and look only at the few events it needs (usage, a tool call it answers itself)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator

_SEPARATORS = (b"\n\n", b"\r\n\r\n")


@dataclass
class Event:
    """One event: `raw` is what arrived (blank line included); `name` its `event:` field, if any."""

    raw: bytes
    name: str | None
    data_text: str

    def data(self) -> Any:
        """The `data:` field as JSON (None when it is not JSON, e.g. OpenAI's `[DONE]`)."""
        try:
            return json.loads(self.data_text)
        except ValueError:
            return None


def encode(name: str | None, data: Any) -> bytes:
    """An event as bytes (compact JSON data; a lone surrogate stays the `\\udXXX` escape it came as)."""
    head = f"event: {name}\n" if name else ""
    data_text = json.dumps(data, ensure_ascii=False, separators=(',', ':'))
    return f"{head}data: {data_text}\n\n".encode("utf-8", "backslashreplace")


class Parser:
    """Incremental: `feed(chunk)` yields the events the chunk completes; `rest()` what never ended."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> Iterator[Event]:
        self._buffer += chunk
        while True:
            cut = _split(self._buffer)
            if cut is None:
                return
            raw, self._buffer = self._buffer[:cut], self._buffer[cut:]
            yield parse_event(raw)

    def rest(self) -> bytes:
        rest, self._buffer = self._buffer, b""
        return rest


def _split(buffer: bytes) -> int | None:
    """End of the first complete event in `buffer` (after its blank line), or None."""
    best: int | None = None
    for sep in _SEPARATORS:
        at = buffer.find(sep)
        if at >= 0 and (best is None or at + len(sep) < best):
            best = at + len(sep)
    return best


def parse_event(raw: bytes) -> Event:
    name: str | None = None
    data: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return Event(raw, name, "\n".join(data))


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[Event]:
    """Events of a byte stream; a trailing partial event is yielded as it is (never dropped)."""
    parser = Parser()
    async for chunk in chunks:
        for event in parser.feed(chunk):
            yield event
    rest = parser.rest()
    if rest:
        yield parse_event(rest)
