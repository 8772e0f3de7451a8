"""A long log's important lines are found over the joined lines at once, and the log is elided as the
line-by-line definition says: the same lines, the same verdicts, the same gap notes."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from worksurface.engine import reduce_output as reducers
from worksurface.engine.reduce_output import elide_log, important_lines, is_important

# Words and cues of the important-line pattern, the start-of-line forms, source locations, the four
# characters that lower to ASCII (İ among them lowers to two characters), a final sigma, other
# whitespace a line may hold, and plain text.
PIECES = ["error", "ERR!", "Warn", "warning", "timed out", "time", "exit code 2", "e ", "E\t", "3) ", "at f (",
          'File "', "x.py:12", "a.b:", "ok", "done", " ", "\t", "\r", "\x0b", "\u2028", "İ", "K", "ſ", "ΑΣ",
          "σ ", "✗", "×", "ok.rs:9", "Ünïcode", "-", "12", "(", '"']
LINE = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)


def _by_line(lines: list[str], start: int, stop: int) -> list[int]:
    return [i for i in range(start, stop) if is_important(lines[i])]


@settings(max_examples=500, deadline=None)
@given(st.lists(LINE, max_size=40), st.data())
@example(["", "e", "e x", "  at g (", "İ error"], None)
@example(["İİİİİİ", "x error", "ok"], None)  # İ lowers to two characters: the joined text's offsets would shift
@example(["ok", "error at the start", "done"], None)
def test_important_lines_are_those_is_important_keeps(lines: list[str], data) -> None:
    start = data.draw(st.integers(0, len(lines))) if data is not None else 0
    stop = data.draw(st.integers(start, len(lines))) if data is not None else len(lines)
    assert important_lines(lines, start, stop) == _by_line(lines, start, stop)


def _elide_by_line(lines: list[str], max_lines: int, head: int, tail: int, max_kept: int) -> tuple[list[str], bool]:
    """The definition: each middle line tested in turn until max_kept are kept, gaps counted line by line."""
    if len(lines) <= max_lines or head + tail >= len(lines):
        return lines, False
    middle = range(head, len(lines) - tail)
    keep: set[int] = set()
    for i in middle:
        if len(keep) >= max_kept:
            break
        if is_important(lines[i]):
            keep.update(j for j in (i - 1, i, i + 1) if head <= j < len(lines) - tail)
    out, gap = lines[:head], 0
    for i in middle:
        if i in keep:
            if gap:
                out.append(f"[... {gap} lines omitted ...]")
                gap = 0
            out.append(lines[i])
        else:
            gap += 1
    if gap:
        out.append(f"[... {gap} lines omitted ...]")
    return out + lines[len(lines) - tail:], True


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ok", "step done", "error: x", "warning y", "  at f (a.js:1)", ""]), max_size=90),
       st.integers(5, 40), st.integers(0, 10), st.integers(0, 10), st.integers(0, 12), st.integers(3, 30))
def test_a_log_is_elided_as_line_by_line(lines: list[str], max_lines: int, head: int, tail: int, max_kept: int,
                                         stretch: int) -> None:
    # Small stretches: the search over successive stretches stops where the line-by-line loop does.
    original = reducers.IMPORTANT_SEARCH_LINES
    reducers.IMPORTANT_SEARCH_LINES = stretch
    try:
        assert elide_log(lines, max_lines, head, tail, max_kept) == _elide_by_line(lines, max_lines, head, tail, max_kept)
    finally:
        reducers.IMPORTANT_SEARCH_LINES = original
