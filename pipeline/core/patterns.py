"""Patterns a user gives (a `re:` pin): compiled with google-re2, whose matching takes time linear in
the text whatever the pattern, so nested quantifiers (`(a+)+$`) cannot hang a compaction over a whole
session the way Python's backtracking `re` does.

What re2 cannot match in linear time (backreferences, lookahead and lookbehind) it refuses to compile:
that is a PatternError naming the pattern, where it came from and why, never a silent fallback to `re`.
Every place that runs a pattern a user wrote goes through `compile_user_pattern`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import re2

from .errors import ConfigError

# re2's own limit on a compiled program (its default, 8 MiB): a pattern past it (`(a{100}){100}`) is
# refused as too large instead of taking the memory.
MAX_PROGRAM_BYTES = 8 << 20
# A lone surrogate: the one thing a Python string holds that UTF-8 (what re2 matches) cannot.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# What re2 leaves out, said where a pattern is refused for using it.
_WHY_RE2 = "patterns run on google-re2 (linear time), which has no backreferences, lookahead or lookbehind"


class PatternError(ConfigError):
    """A user's pattern that cannot be used: `source` names where it was given (a pin, a config key),
    `pattern` is the pattern as written, `problem` what re2 said."""

    def __init__(self, problem: str, *, pattern: str, source: str) -> None:
        self.problem = problem
        self.pattern = pattern
        self.source = source
        super().__init__(f"{source} {pattern!r} is not a valid regular expression: {problem} ({_WHY_RE2})")


@dataclass(frozen=True)
class UserPattern:
    """A compiled user pattern: `^` and `$` match at every line (as `re.M`)."""

    pattern: str
    _compiled: Any = field(repr=False, compare=False)

    def matches(self, text: str) -> Iterator[str]:
        """The text of every non-overlapping match, in order (empty matches included), cut from
        `text` itself (a lone surrogate in it is matched as U+FFFD but returned as it was)."""
        for m in self._compiled.finditer(_encodable(text)):
            yield text[m.start():m.end()]

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in `text`."""
        return self._compiled.search(_encodable(text)) is not None


def _encodable(text: str) -> str:
    """`text` with each lone surrogate (half an emoji from a JSON `\\ud83d` escape in a transcript)
    made U+FFFD, one character for one: re2 matches UTF-8, which cannot hold them, and the offsets of
    a match stay those of `text`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub("\ufffd", text)
    return text


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False      # re2 would print every refused pattern to stderr itself
    options.max_mem = MAX_PROGRAM_BYTES
    return options


def compile_user_pattern(pattern: str, *, source: str) -> UserPattern:
    """`pattern` compiled for linear-time matching, or a PatternError naming `source` (e.g. "pin")."""
    try:
        return UserPattern(pattern, re2.compile("(?m)" + pattern, _options()))
    except re2.error as exc:
        raise PatternError(_problem(exc), pattern=pattern, source=source) from None
    except (TypeError, ValueError) as exc:      # a NUL byte, a surrogate that is not UTF-8
        raise PatternError(str(exc), pattern=pattern, source=source) from None


def _problem(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
