"""Format adapters: read any supported transcript into `Message`s and write views back.

Request formats (claude-code, openai, anthropic) can be written; the others are read-only.
"""

from __future__ import annotations

import os
from typing import Sequence

from ..errors import FormatError, UnknownFormatError
from ..fileio import atomic_write, read_text
from ..model import Message
from . import aider, anthropic_messages, claude_code, mini_swe_agent, openai_chat, openhands, swe_agent
from .base import FormatAdapter, Transcript

# Sniff order matters: the most specific shapes first (a Claude Code JSONL line is also JSON).
ADAPTERS: dict[str, FormatAdapter] = {
    a.NAME: a for a in (claude_code, swe_agent, openhands, mini_swe_agent, anthropic_messages,
                        openai_chat, aider)  # type: ignore[misc]
}
FORMAT_NAMES = tuple(ADAPTERS)
WRITABLE_FORMATS = tuple(n for n, a in ADAPTERS.items() if a.WRITABLE)


def detect_format(text: str, path: str | None = None) -> str:
    for name, adapter in ADAPTERS.items():
        if adapter.sniff(text, path):
            return name
    raise UnknownFormatError(
        f"unrecognised transcript format (expected one of: {', '.join(FORMAT_NAMES)})", path=path)


def get_adapter(name: str) -> FormatAdapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise UnknownFormatError(f"unknown format {name!r} (known: {', '.join(FORMAT_NAMES)})") from None


def loads(text: str, format: str = "auto", path: str | None = None) -> Transcript:
    name = detect_format(text, path) if format == "auto" else format
    return get_adapter(name).read(text, path)


def read_transcript(path: str | os.PathLike[str], format: str = "auto") -> Transcript:
    return loads(read_text(path), format, str(path))


def dumps(transcript: Transcript, messages: Sequence[Message] | None = None,
          format: str | None = None) -> str:
    name = format or transcript.format
    adapter = get_adapter(name)
    if not adapter.WRITABLE:
        raise FormatError(f"format {name!r} is read-only; write one of: {', '.join(WRITABLE_FORMATS)}",
                          path=transcript.path)
    return adapter.write(transcript, messages)


def write_transcript(transcript: Transcript, path: str | os.PathLike[str],
                     messages: Sequence[Message] | None = None, format: str | None = None) -> None:
    """Serialize and write atomically (temp file in the same directory, then rename)."""
    atomic_write(path, dumps(transcript, messages, format))


__all__ = ["ADAPTERS", "FORMAT_NAMES", "WRITABLE_FORMATS", "Transcript",
           "detect_format", "dumps", "get_adapter", "loads", "read_transcript", "write_transcript"]
