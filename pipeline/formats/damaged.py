"""Damaged lines of a JSON Lines session file: read around them, never lose them.

A line that is not a JSON object (a PII redactor that broke an escape, a disk that filled up, the
last line of a session a harness is still writing) stops no reader: the line is skipped, kept in
`Transcript.extras` as a `DamagedLine` at its place, written back byte for byte, and named in one
notice per file (`notice`). `loads(..., strict=True)` refuses such a file instead (`StrictError`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import orjson

from ..core import strictjson
from ..core.errors import FormatError

# How many damaged lines a notice names one by one; the rest are counted.
NOTICE_LINES = 3
# Sniffers look this many non-empty lines deep for the first record that parses: a damaged first
# line must not make a session file unrecognisable.
SNIFF_LINES = 5
CUT_PROBLEM = "the last line is cut off (no newline at its end): the harness may still be writing it"
_UUID_KEY = re.compile(r'"uuid"\s*:\s*"([^"\\]+)"')


@dataclass(frozen=True)
class DamagedLine:
    """A line that is not a record: its number, its text as read (without the newline), why it
    could not be read, and whether it is a cut last line (a harness still writing)."""

    line: int
    text: str
    problem: str
    cut: bool = False

    def mentions(self, ident: str) -> bool:
        """True when the line's text holds `ident` (a call id, a uuid) as a JSON string."""
        return f'"{ident}"' in self.text

    @property
    def uuid(self) -> str | None:
        """The record uuid the damaged text still shows, if any (first `"uuid": "..."`)."""
        match = _UUID_KEY.search(self.text)
        return match.group(1) if match else None

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "problem": self.problem, "cut": self.cut}


class StrictError(FormatError):
    """`--strict`: a session file with a damaged line is refused instead of read around it."""


# The fast path of `parse_line` (orjson) reads a line to the same value as `strictjson` except where
# orjson differs, and those lines go to strictjson instead: an integer past 64 bits (orjson makes it a
# float; a run of FAST_DIGITS digits anywhere in the line sends it), nesting near the depth where json
# stops (orjson goes on to 1024 levels; a line with more than FAST_MAX_DEPTH brackets sends it), text
# that is not UTF-8 (a lone surrogate) and any line orjson refuses (strictjson gives the error the
# notice names). Lines over FAST_MAX_CHARS (a huge tool result) are read by strictjson as well: the
# fast path would hold two more copies of them at once.
FAST_DIGITS = 19
FAST_MAX_DEPTH = 800
FAST_MAX_CHARS = 1 << 20
_DIGIT_RUN = b"0" * FAST_DIGITS
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))  # a digit -> "0", any other byte -> " "


def _fast_record(line: str) -> Any:
    """The line's JSON value by orjson, or None when strictjson must read it (see FAST_DIGITS)."""
    if len(line) > FAST_MAX_CHARS:
        return None
    try:
        data = line.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if _DIGIT_RUN in data.translate(_DIGITS):
        return None
    # Nesting FAST_MAX_DEPTH deep takes twice as many characters: a shorter line needs no count.
    if len(data) > 2 * FAST_MAX_DEPTH and data.count(b"[") + data.count(b"{") > FAST_MAX_DEPTH:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def parse_line(line: str, number: int, last: bool) -> dict[str, Any] | DamagedLine:
    """One JSONL line as a record object, or the DamagedLine saying why it is not one. `last`: the
    line ends the file without a newline, so a line that does not parse is cut, not broken."""
    record = _fast_record(line)
    if isinstance(record, dict):
        return record
    try:
        record = strictjson.loads(line)
    except strictjson.UnreadableNumber as exc:
        return DamagedLine(number, line, f"{exc.problem}: {exc.literal[:strictjson.SHOWN_CHARS]}")
    except json.JSONDecodeError as exc:
        return DamagedLine(number, line, CUT_PROBLEM if last else f"broken JSON: {exc.msg} at column {exc.colno}",
                           cut=last)
    except RecursionError:
        return DamagedLine(number, line, "JSON nested too deeply")
    if not isinstance(record, dict):
        return DamagedLine(number, line, f"record is a JSON {type(record).__name__}, not an object")
    return record


def lines(text: str) -> Iterable[tuple[int, str, bool]]:
    """(number, line, is the unterminated last line) for every non-blank line. Split on "\\n" only:
    JSON strings may hold a raw U+2028, which str.splitlines would break at."""
    parts = text.split("\n")
    for number, line in enumerate(parts, 1):
        if line.strip():
            yield number, line, number == len(parts) and not text.endswith("\n")


# One non-blank line of a session file: its number, its text, and its record (or why it is none).
ParsedLine = tuple[int, str, "dict[str, Any] | DamagedLine"]


def parsed_lines(numbered: Iterable[tuple[int, str, bool]]) -> Iterator[ParsedLine]:
    """Each non-blank line of `numbered` (from `lines` or `fileio.text_lines`) parsed as it comes."""
    for number, line, last in numbered:
        if line.strip():
            yield number, line, parse_line(line, number, last)


def first_record(text: str) -> Any:
    """The first line among the first SNIFF_LINES non-blank ones that parses as JSON, or None
    (reads only those lines: sniffing a large file stays cheap)."""
    start = tried = 0
    while start < len(text) and tried < SNIFF_LINES:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        start = end + 1
        if not line.strip():
            continue
        tried += 1
        try:
            return json.loads(line)
        except (ValueError, RecursionError):
            continue
    return None


def damaged_lines(extras: Sequence[tuple[str | None, Any]]) -> list[DamagedLine]:
    """The damaged lines a reader kept among a transcript's extras, in file order."""
    return [record for _, record in extras if isinstance(record, DamagedLine)]


def notice(path: str | None, damaged: Sequence[DamagedLine]) -> str:
    """One sentence for the user about a file's damaged lines (the first few named, the rest counted)."""
    named = "; ".join(f"line {d.line}: {d.problem}" for d in damaged[:NOTICE_LINES])
    more = f"; and {len(damaged) - NOTICE_LINES} more" if len(damaged) > NOTICE_LINES else ""
    what = "line that is not a JSON record" if len(damaged) == 1 else "lines that are not JSON records"
    return (f"{path or '<input>'}: skipped {len(damaged)} {what} ({named}{more}); "
            f"{'it is' if len(damaged) == 1 else 'they are'} kept as read when the file is written back "
            "(--strict refuses such a file)")


def strict_error(path: str | None, damaged: Sequence[DamagedLine]) -> StrictError:
    first = damaged[0]
    more = f" (and {len(damaged) - 1} more damaged line{'s' if len(damaged) > 2 else ''})" if len(damaged) > 1 else ""
    return StrictError(f"{first.problem}{more}; --strict refuses a damaged session file", path=path,
                       line=first.line)


def orphaned_by(call_id: str, damaged: Sequence[DamagedLine]) -> DamagedLine | None:
    """The damaged line that held the call `call_id` answers, when its record could not be read."""
    return next((d for d in damaged if d.mentions(call_id)), None)
