"""Progress-line detection says what the single-pattern definition said, without its backtracking (a
line of box-drawing characters, a table rule in a tool's output, took seconds per result: the
overhead benchmark's field rows show it)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.engine.reduce_output import _progress_patterns, is_progress

# The definition the two-step searches replace (cubic backtracking on long runs of bar characters).
REFERENCE = re.compile(
    r"(\d{1,3}(?:\.\d+)?%\s*\|[^|]{3,}\|)"
    r"|(\[[=#>\-. ]{8,}\]\s*\d{1,3}(?:\.\d+)?%)"
    r"|([━─█▓▒░#=]{8,}.*\d{1,3}(?:\.\d+)?\s*%)"
    r"|(\d{1,3}(?:\.\d+)?%.*[━─█▓▒░]{8,})"
    r"|(^\s*[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⣾⣽⣻⢿⡿⣟⣯⣷◐◓◑◒]\s)")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="━─█#=|[]>-. %.0123456789ab⠋\t", max_size=40))
def test_progress_lines_are_those_of_the_reference_pattern(line: str) -> None:
    assert is_progress(line) == bool(REFERENCE.search(line))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \t0123456789.%|[]=#>-━─█▓▒░⠋⠙◐◓xe", max_size=40))
def test_the_percent_and_spinner_prefilter_answers_as_the_patterns_do(line: str) -> None:
    assert is_progress(line) == _progress_patterns(line)
