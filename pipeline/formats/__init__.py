"""Format adapters: read any supported transcript into `Message`s and write views back.

Every format can be written: in its own format an unmodified transcript writes back as it was read;
to another format, every message is converted first (convert.py) and what did not fit is reported.
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

from ..core import progress
from ..core.collector import collection_paused
from ..core.errors import FormatError, UnknownFormatError
from ..core.fileio import BOM, STDIN, atomic_write_chunks, display_name, read_text, text_lines
from ..core.model import Message
from . import (aider, anthropic_messages, claude_code, codex, mini_swe_agent, openai_chat, openai_responses, openhands,
               swe_agent)
from .base import FormatAdapter, Keep, Transcript
from .damaged import (SNIFF_LINES, DamagedLine, StrictError, damaged_lines, first_record, notice, parsed_lines,
                      strict_error)
from .diagnose import unrecognised
from .jsondoc import MAX_DEPTH
from .convert import Conversion, Dropped, convert

log = logging.getLogger("worksurface")

# Sniff order matters: the most specific shapes first (a Claude Code or Codex JSONL line is also
# JSON; a Codex record needs `type` + object `payload` + `timestamp`, which no Claude Code record has).
ADAPTERS: dict[str, FormatAdapter] = {
    a.NAME: a for a in (codex, claude_code, swe_agent, openhands, mini_swe_agent, anthropic_messages,
                        openai_chat, openai_responses, aider)
}
FORMAT_NAMES = tuple(ADAPTERS)
WRITABLE_FORMATS = tuple(n for n, a in ADAPTERS.items() if a.WRITABLE)


def detect_format(text: str, path: str | None = None) -> str:
    for name, adapter in ADAPTERS.items():
        try:
            if adapter.sniff(text, path):
                return name
        except RecursionError:      # too deep for this sniffer's parser: not its format, reported below
            continue
    # Not "unrecognised" when the file is broken JSON(L) or one format's shape with a bad record:
    # the most specific error, with its line or record, is what the user can act on.
    raise unrecognised(text, path, {n: a.read for n, a in ADAPTERS.items()})


def get_adapter(name: str) -> FormatAdapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise UnknownFormatError(f"unknown format {name!r} (known: {', '.join(FORMAT_NAMES)})") from None


def loads(text: str, format: str = "auto", path: str | None = None, *, strict: bool = False) -> Transcript:
    """Parse a transcript. A session file's damaged lines (see damaged.py) are read around, with one
    warning on the `worksurface` logger naming them; `strict` refuses such a file (StrictError)."""
    text = text.removeprefix(BOM)
    name = detect_format(text, path) if format == "auto" else format
    adapter = get_adapter(name)
    try:
        with collection_paused():
            transcript = adapter.read(text, path)
    except RecursionError:      # a deep value the adapter's own parsing let through
        raise FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path) from None
    if format != "auto" and not transcript.messages and text.strip():
        _refuse_wrong_format(text, path, name)
    return _checked(transcript, path, strict)


# JSON Lines formats whose reader takes lines one at a time (`read_records`): a file of theirs is
# streamed by `stream_transcript`; any other format is a JSON document, read whole. In sniff order:
# they are ADAPTERS' first two, and their sniffers look only at the first record that parses.
LINE_READERS = {codex.NAME: codex.read_records, claude_code.NAME: claude_code.read_records}


def stream_transcript(path: str | os.PathLike[str], format: str = "auto", *, strict: bool = False,
                      keep: Keep | None = None) -> Transcript:
    """`read_transcript`, reading a JSON Lines session file line by line (never its whole text);
    `keep` is what the reader keeps of each message as it is read (inspect: huge texts as samples).
    Standard input, a JSON document, and a file whose first records name no JSON Lines format are
    read whole, as `read_transcript` reads them (with the same errors)."""
    if str(path) == STDIN:
        return read_transcript(path, format, strict=strict)
    name = display_name(path)
    detected = _line_format(path, name) if format == "auto" else format
    reader = LINE_READERS.get(detected or "")
    if reader is None:
        return read_transcript(path, format, strict=strict)
    parsed = parsed_lines(text_lines(path))
    try:
        with collection_paused():
            transcript = reader(parsed, name, keep)
    except RecursionError:
        raise FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=name) from None
    if format != "auto" and not transcript.messages:
        return read_transcript(path, format, strict=strict)  # refused (or read) as the whole text is
    return _checked(transcript, name, strict)


def _line_format(path: str | os.PathLike[str], name: str) -> str | None:
    """The JSON Lines format the file's first lines show (up to the first that parses, as the
    sniffers read them), or None."""
    head: list[str] = []
    for _, line, _ in text_lines(path):
        if not line.strip():
            continue
        head.append(line)
        if len(head) >= SNIFF_LINES or first_record(line) is not None:
            break
    text = "\n".join(head)
    return next((n for n in LINE_READERS if ADAPTERS[n].sniff(text, name)), None)


def _checked(transcript: Transcript, path: str | None, strict: bool) -> Transcript:
    """The transcript, after its damaged lines' notice (or, `strict`, its refusal)."""
    damaged = damaged_lines(transcript.extras)
    if damaged:
        if strict:
            raise strict_error(path, damaged)
        log.warning("%s", notice(path, damaged))
    return transcript


# What the user called each format in a "not a ..." error.
_FORMAT_LABELS = {"codex": "Codex rollout", "claude-code": "Claude Code session file"}


def _refuse_wrong_format(text: str, path: str | None, name: str) -> None:
    """An explicit --format that read nothing from a non-empty file is the wrong format, not an empty
    session: say so, with the format the file does look like, instead of reporting 0 messages."""
    if ADAPTERS[name].sniff(text, path):
        return          # the format's own shape, just without messages (a session cut before its first turn)
    try:
        actual = detect_format(text, path)
        looks = f"; it looks like {actual} (drop --format, or pass --format {actual})"
    except FormatError:
        looks = ""
    label = _FORMAT_LABELS.get(name, f"{name} transcript")
    raise FormatError(f"not a {label}: no {name} record in it{looks}", path=path)


def read_transcript(path: str | os.PathLike[str], format: str = "auto", *, strict: bool = False) -> Transcript:
    """Read a transcript file (`-`: standard input), detecting its format unless given."""
    name = display_name(path)
    progress.phase(f"reading {name}")
    return loads(read_text(path), format, name, strict=strict)


def dumps(transcript: Transcript, messages: Sequence[Message] | None = None,
          format: str | None = None) -> str:
    """`messages` (default: the transcript's) in `format` (default: the transcript's own)."""
    return dumps_report(transcript, messages, format)[0]


def dumps_report(transcript: Transcript, messages: Sequence[Message] | None = None,
                 format: str | None = None) -> tuple[str, Dropped]:
    """Like `dumps`, and what the target format could not carry (see convert.py): a write to
    another format converts every message and drops the source's own records first."""
    adapter, fitted = _converted(transcript, messages, format)
    return adapter.write(fitted.transcript, fitted.messages), fitted.dropped


def _converted(transcript: Transcript, messages: Sequence[Message] | None,
               format: str | None) -> tuple[FormatAdapter, Conversion]:
    """The adapter that writes `format` (default: the transcript's own), and the transcript and messages
    converted to it."""
    name = format or transcript.format
    adapter = get_adapter(name)
    if not adapter.WRITABLE:
        raise FormatError(f"format {name!r} is read-only; write one of: {', '.join(WRITABLE_FORMATS)}",
                          path=transcript.path)
    return adapter, convert(transcript, name, messages)


def write_transcript(transcript: Transcript, path: str | os.PathLike[str],
                     messages: Sequence[Message] | None = None, format: str | None = None, *,
                     inputs: Sequence[str | os.PathLike[str]] = ()) -> Dropped:
    """Serialize and write atomically (temp file in the same directory, then rename), no more readable
    than `inputs` (the files it was made from); returns what the target format could not carry."""
    progress.phase(f"writing {display_name(path)}")
    adapter, fitted = _converted(transcript, messages, format)
    # The JSONL formats give their lines as they make them: a large file is written as it goes.
    write_chunks = getattr(adapter, "write_chunks", None)
    chunks = (write_chunks(fitted.transcript, fitted.messages) if write_chunks is not None
              else [adapter.write(fitted.transcript, fitted.messages)])
    atomic_write_chunks(path, chunks, inputs=inputs)
    return fitted.dropped


__all__ = ["ADAPTERS", "DamagedLine", "FORMAT_NAMES", "StrictError", "WRITABLE_FORMATS", "Dropped", "Transcript",
           "damaged_lines",
           "convert", "detect_format", "dumps", "dumps_report", "get_adapter", "loads", "read_transcript", "stream_transcript", "write_transcript"]
