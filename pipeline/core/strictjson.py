"""JSON as worksurface reads its input: a value that could not be written back as it was read is
refused, with where it is, instead of becoming something else.

Python's `json` turns `1e400` into infinity (written back as `Infinity`, which is not JSON), accepts
`NaN` and `Infinity` (not JSON either), and raises a bare ValueError on an integer of more than 4,300
digits. A transcript holding one of them is refused with the literal and its line, so nothing is
written back changed.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from .errors import FormatError

# Python refuses to convert longer digit strings (sys.get_int_max_str_digits, 4300 by default).
MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300
# How much of a refused literal an error message shows.
SHOWN_CHARS = 24


class UnreadableNumber(ValueError):
    """A number in JSON text that would not survive a round trip; `literal` is its text."""

    def __init__(self, literal: str, problem: str) -> None:
        self.literal = literal
        self.problem = problem
        super().__init__(problem)


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise UnreadableNumber(text, f"an integer of {len(text.lstrip('-')):,} digits is too long to read "
                                     f"(at most {MAX_INT_DIGITS:,})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnreadableNumber(text, f"the number {_shown(text)} is too large for a 64-bit float (it would be "
                                     "written back as Infinity, which is not JSON)")
    return value


def _constant(text: str) -> Any:
    raise UnreadableNumber(text, f"{text} is not JSON (only finite numbers are)")


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


_intern = sys.intern


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are the process's one copy of each key string (`sys.intern`). A session's
    records repeat the same few dozen keys on every line, and `json` makes new key strings for each
    line it decodes: on a file of 100k small records they were a third of the records' memory (431 ->
    274 MB), for about a microsecond per record. Same dict, same order, a repeated key's last value,
    as `json` builds it."""
    return {_intern(k): v for k, v in pairs}


# Integers are left to the C scanner (a Python callback per integer costs a third of reading a
# session), which raises a plain ValueError past Python's digit limit; only then is the text read
# again with the checking callback, for the error that names the literal.
_DECODER = json.JSONDecoder(parse_float=_float, parse_constant=_constant, object_pairs_hook=_object)
_CHECKING_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant,
                                     object_pairs_hook=_object)


def loads(text: str) -> Any:
    """`json.loads`, refusing the numbers above (UnreadableNumber, a ValueError)."""
    try:
        return _DECODER.decode(text)
    except (json.JSONDecodeError, UnreadableNumber):
        raise
    except ValueError:
        return _CHECKING_DECODER.decode(text)


def number_error(exc: UnreadableNumber, text: str, path: str | None, line: int | None = None,
                 record: str | None = None) -> FormatError:
    """A FormatError for `exc` naming the file and the line of the literal (found in `text` when the
    caller does not know the line)."""
    if line is None:
        at = text.find(exc.literal)
        line = text.count("\n", 0, at) + 1 if at >= 0 else None
    return FormatError(f"{exc.problem}: not read", path=path, line=line, record=record)
