"""Pure text reducers for a tool's output, applied before the output is first sent to the model.

Each reducer removes what a terminal shows but a model does not need: escape codes, redrawn progress
lines, runs of identical lines, the middle of long JSON arrays, base64 and hex blobs, the middle of huge
logs. None of them drops a line that reports an error, a failure or a warning (`is_important`); the
lossy ones (JSON, blobs, logs) say what they left out, and the caller stores the original as an
artifact. The caller decides when reducing is free (a result not yet sent: no cache to break).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import operator
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..core.config import IngestConfig

# CSI sequences (colors, cursor moves, erase), OSC sequences (titles, hyperlinks) and the lone
# two-character escapes terminals also emit.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Progress output: tqdm/pip bars, bracket bars, percentages with a bar, spinner frames.
_PROGRESS = re.compile(
    r"(\d{1,3}(?:\.\d+)?%\s*\|[^|]{3,}\|)"              # tqdm: 45%|████      |
    r"|(\[[=#>\-. ]{8,}\]\s*\d{1,3}(?:\.\d+)?%)"         # [=====>    ] 45%
    r"|(^\s*[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⣾⣽⣻⢿⡿⣟⣯⣷◐◓◑◒]\s)"             # spinner frames
)
# pip / rich bars with a percent after them (or a percent before a box bar). Searched in two steps
# (the bar, then the percent after it): as one pattern `bar.*percent`, a line of '=' backtracks
# cubically (seconds per line on a Codex rollout's markdown rules).
_BAR = re.compile(r"[━─█▓▒░#=]{8}")
_BOX_BAR = re.compile(r"[━─█▓▒░]{8}")
_PERCENT = re.compile(r"\d{1,3}(?:\.\d+)?\s*%")
_PERCENT_TIGHT = re.compile(r"\d{1,3}(?:\.\d+)?%")
# Lines that report what went wrong, what failed and where: never dropped by any reducer.
_IMPORTANT = re.compile(
    r"error|\bERR!|fail|exception|traceback|warning|warn\b|fatal|panic|assert|denied|refused|not found|"
    r"no such|cannot|can't|could not|unable|undefined|segfault|killed|timed? ?out|exit code|abort|"
    r"[✗✘×]|^E\s|^\s*\d+\)\s|^\s*at \S+ \(|^\s*File \"|"
    # A source location (path.ext:line): the dot first, then the path character before it (what
    # `[\w./-]+\.\w{1,5}:\d+` matches, without retrying every run of path characters at every start).
    r"\.(?<=[\w./-]\.)\w{1,5}:\d+",
    re.IGNORECASE)
# base64 (standard and URL-safe) and hex runs; a blob must mix letter cases and digits so long
# identifiers and words never qualify.
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{32,}={0,2}")
_HEX_RUN = re.compile(r"\b[0-9a-fA-F]{32,}\b")
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,")
# A blob keeps this many of its first characters, so two blobs stay distinguishable.
BLOB_PREFIX_CHARS = 16


@dataclass(frozen=True)
class Reduction:
    """The reduced text, which reducers changed it, and whether anything was left out that only the
    original holds (then the caller must keep the original as an artifact)."""

    text: str
    kinds: tuple[str, ...]
    lossy: bool


# `_IMPORTANT` costs about 240 ns per character (its alternatives are tried at every position), three
# times what tiktoken takes, and most lines match none of them. Substring tests of the lowered line
# decide first: a word below is one of its alternatives verbatim, so finding it decides; a line with
# none of them and none of the cues cannot match. Lowering agrees with IGNORECASE on every line without
# the four non-ASCII characters that IGNORECASE matches with an ASCII letter (İ ı ſ K).
_IMPORTANT_WORDS = ("error", "fail", "exception", "traceback", "warning", "fatal", "panic", "assert", "denied",
                    "refused", "not found", "no such", "cannot", "can't", "could not", "unable", "undefined",
                    "segfault", "killed", "exit code", "abort")
# The alternatives that are more than a word hold one of these (`\bERR!`, `warn\b`, `timed? ?out`, the
# marks); a source location holds a dot, a short extension and a colon before a digit.
_IMPORTANT_CUES = ("err!", "warn", "time", "✗", "✘", "×")
_SOURCE_LOCATION_CUE = re.compile(r"\.\w{1,5}:\d")
_IMPORTANT_AT_START = re.compile(r"\s*(?:e\s|\d+\)\s|at \S+ \(|file \")", re.IGNORECASE)
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")


def is_important(line: str) -> bool:
    """A line naming an error, failure, warning, exit code or stack frame."""
    if line.isascii() or not _FOLDS_TO_ASCII.search(line):
        low = line.lower()
        if any(w in low for w in _IMPORTANT_WORDS):
            return True
        if not (any(c in low for c in _IMPORTANT_CUES) or _IMPORTANT_AT_START.match(line)
                or _SOURCE_LOCATION_CUE.search(line)):
            return False
    return bool(_IMPORTANT.search(line))


# _IMPORTANT_AT_START searched across a run of lines joined by newlines: a line's own leading
# whitespace only (never the newline before it), so each match starts at the line it is for.
_IMPORTANT_AT_LINE_START = re.compile(r"^[^\S\n]*" + _IMPORTANT_AT_START.pattern.removeprefix(r"\s*"),
                                      re.IGNORECASE | re.MULTILINE)


def important_lines(lines: Sequence[str], start: int, stop: int) -> list[int]:
    """The indices in [start, stop) of the lines `is_important` keeps, in order. The lines are searched
    as one lowered text, a substring search per word and per cue instead of a test of every line (a
    long log's lines cost half what counting its tokens does, line by line); only a line holding a
    cue and no word is tested by the whole pattern. Lowering the joined text lowers each line alike:
    no character lowers to another length but one of _FOLDS_TO_ASCII, which sends the run line by line."""
    block = "\n".join(lines[start:stop])
    if not block.isascii() and _FOLDS_TO_ASCII.search(block):
        return [i for i in range(start, stop) if is_important(lines[i])]
    low = block.lower()
    ends = list(itertools.accumulate(len(lines[i]) + 1 for i in range(start, stop)))  # each next line's offset

    def hits(text: str, needle: str) -> Iterator[int]:
        at = text.find(needle)
        while at >= 0:
            k = bisect.bisect_right(ends, at)
            yield start + k
            at = text.find(needle, ends[k])  # on from the next line: one hit decides a line
    found = {i for word in _IMPORTANT_WORDS for i in hits(low, word)}
    cued = {i for cue in _IMPORTANT_CUES for i in hits(low, cue)}
    for pattern in (_IMPORTANT_AT_LINE_START, _SOURCE_LOCATION_CUE):
        cued.update(start + bisect.bisect_right(ends, m.start()) for m in pattern.finditer(block))
    found.update(i for i in cued - found if _IMPORTANT.search(lines[i]))
    return sorted(found)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def resolve_redraws(text: str) -> str:
    """Carriage-return redraws: a terminal shows only what was written after a line's last `\\r`."""
    if "\r" not in text:
        return text
    lines = text.replace("\r\n", "\n").split("\n")
    out = []
    for line in lines:
        if "\r" in line:
            frames = [f for f in line.split("\r") if f.strip()]
            line = frames[-1] if frames else ""
        out.append(line)
    return "\n".join(out)


# The first characters of spinner frames: every other progress pattern needs a percent sign, so a
# line with neither is not searched at all (most lines of most outputs).
_SPINNER_FRAMES = frozenset("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⣾⣽⣻⢿⡿⣟⣯⣷◐◓◑◒")


# Any character a progress line needs: a text without one has no progress line (one C-speed search
# instead of a test per line).
_MAY_HOLD_PROGRESS = re.compile("[%" + "".join(sorted(_SPINNER_FRAMES)) + "]")


def is_progress(line: str) -> bool:
    if "%" not in line and line.lstrip()[:1] not in _SPINNER_FRAMES:
        return False
    return _progress_patterns(line)


def _progress_patterns(line: str) -> bool:
    if _PROGRESS.search(line):
        return True
    bar = _BAR.search(line)
    if bar is not None and _PERCENT.search(line, bar.end()):
        return True
    percent = _PERCENT_TIGHT.search(line)
    return percent is not None and _BOX_BAR.search(line, percent.end()) is not None


def collapse_progress(lines: list[str]) -> list[str]:
    """A run of progress lines keeps its last line (the final state); important lines always stay."""
    # Only the lines holding a progress mark are tested (found at C speed), and only a progress line
    # followed by another can go.
    marked = itertools.compress(range(len(lines)), map(_MAY_HOLD_PROGRESS.search, lines))
    progress = {i for i in marked if is_progress(lines[i])}
    drop = {i for i in progress if i + 1 in progress and not is_important(lines[i])}
    return [line for i, line in enumerate(lines) if i not in drop] if drop else lines


def collapse_repeats(lines: list[str], min_run: int) -> list[str]:
    """A run of at least `min_run` identical non-blank lines becomes the line and a count."""
    if min_run > 1 and not any(map(operator.eq, lines, lines[1:])):
        return lines  # no two neighbours alike: no run (a C-speed pass instead of the loop)
    return _collapse_runs(lines, min_run)


def _collapse_runs(lines: list[str], min_run: int) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1] == lines[i]:
            j += 1
        run = j - i + 1
        if run >= min_run and lines[i].strip():
            out.append(lines[i])
            out.append(f"[previous line repeated {run - 1} more times]")
        else:
            out.extend(lines[i:j + 1])
        i = j + 1
    return out


def replace_blobs(text: str, min_chars: int) -> tuple[str, bool]:
    """base64 / hex runs of at least `min_chars` become a one-line note (length, kind, first
    characters, a short hash). Returns the text and whether anything was replaced."""
    changed = False

    def b64(m: re.Match[str]) -> str:
        nonlocal changed
        s = m.group(0)
        if len(s) < min_chars or not (re.search(r"[a-z]", s) and re.search(r"[A-Z]", s) and re.search(r"\d", s)):
            return s
        changed = True
        return _blob_note(s, "base64")

    def hexa(m: re.Match[str]) -> str:
        nonlocal changed
        s = m.group(0)
        # A run of decimal digits is a number, never a blob.
        if len(s) < min_chars or not re.search(r"[a-fA-F]", s) or not re.search(r"\d", s):
            return s
        changed = True
        return _blob_note(s, "hex")

    # A blob lies within one run of non-space characters: an output without a run that long (almost
    # every output) has none, and splitting on spaces is several times faster than the scans.
    if max(map(len, text.split()), default=0) < min_chars:
        return text, False
    text = _B64_RUN.sub(b64, text)
    text = _HEX_RUN.sub(hexa, text)
    return text, changed


def _blob_note(blob: str, kind: str) -> str:
    digest = hashlib.sha256(blob.encode()).hexdigest()[:8]
    return f"[{kind} blob: {len(blob)} chars, starts {blob[:BLOB_PREFIX_CHARS]}, sha256 {digest}]"


def shorten_json(text: str, max_items: int, keep_head: int, keep_tail: int) -> tuple[str, bool]:
    """A whole-JSON output whose arrays are longer than `max_items`: each keeps its first `keep_head`
    and last `keep_tail` items, and every item that mentions an error; a string item says how many
    went. Returns the text (same indentation style) and whether anything was left out."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or len(stripped) < 2:
        return text, False
    try:
        data = json.loads(stripped)
    except ValueError:
        return text, False
    changed = False

    def walk(value: Any) -> Any:
        nonlocal changed
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if not isinstance(value, list):
            return value
        items = [walk(v) for v in value]
        if len(items) <= max_items:
            return items
        head, tail = items[:keep_head], items[len(items) - keep_tail:] if keep_tail else []
        middle = items[keep_head:len(items) - keep_tail if keep_tail else len(items)]
        kept = [v for v in middle if is_important(json.dumps(v, ensure_ascii=False))]
        omitted = len(middle) - len(kept)
        if omitted <= 0:
            return items
        changed = True
        return head + kept + [f"... {omitted} of {len(items)} items omitted ..."] + tail

    reduced = walk(data)
    if not changed:
        return text, False
    pretty = "\n" in stripped
    out = json.dumps(reduced, ensure_ascii=False, indent=2 if pretty else None,
                     separators=None if pretty else (",", ":"))
    return out, True


# Lines of a long log's middle searched for important lines at once (see elide_log).
IMPORTANT_SEARCH_LINES = 2_000


def elide_log(lines: list[str], max_lines: int, head: int, tail: int, max_kept: int) -> tuple[list[str], bool]:
    """A log over `max_lines` lines keeps its first `head` and last `tail` lines and, in between, the
    important lines (up to `max_kept`, with the lines around each for context); gaps are marked with
    the number of lines left out. Returns the lines and whether anything was left out."""
    if len(lines) <= max_lines or head + tail >= len(lines):
        return lines, False
    middle_range = range(head, len(lines) - tail)
    keep: set[int] = set()
    # The middle is searched a stretch at a time, each when the loop reaches it: a log of errors
    # stops at its first max_kept.
    stretches = (important_lines(lines, at, min(at + IMPORTANT_SEARCH_LINES, middle_range.stop))
                 for at in range(head, middle_range.stop, IMPORTANT_SEARCH_LINES))
    for i in itertools.chain.from_iterable(stretches):
        if len(keep) >= max_kept:
            break
        keep.update(j for j in (i - 1, i, i + 1) if head <= j < middle_range.stop)
    out = lines[:head]
    after = head  # the line after the last one kept
    for i in sorted(keep):
        if i > after:
            out.append(f"[... {i - after} lines omitted ...]")
        out.append(lines[i])
        after = i + 1
    if after < middle_range.stop:
        out.append(f"[... {middle_range.stop - after} lines omitted ...]")
    out += lines[middle_range.stop:]
    return out, True


# An output longer than REDUCE_HEAD_CHARS + REDUCE_TAIL_CHARS is reduced from its first and last
# characters only (each cut at a line end), the middle left out with a note and kept in the artifact:
# the reducers' per-line work over a 200 MB log takes minutes, and no view shows that much of one
# output. Real outputs are far smaller (Claude Code keeps 30,000 characters of a Bash output), so
# their reduction is unchanged; an error line only in a huge output's middle is not shown on arrival.
REDUCE_HEAD_CHARS = 800_000
REDUCE_TAIL_CHARS = 200_000


def reduce_output(text: str, config: IngestConfig, *, lossy: bool = True) -> Reduction:
    """All reducers in order. With `lossy=False` (a document the agent may edit) only terminal
    escapes and redraws are removed. A huge output is reduced from its ends (REDUCE_HEAD_CHARS)."""
    if lossy and len(text) > REDUCE_HEAD_CHARS + REDUCE_TAIL_CHARS:
        return _reduce_ends(text, config)
    kinds: list[str] = []
    out = strip_ansi(text)
    if out != text:
        kinds.append("ansi")
    redrawn = resolve_redraws(out)
    if redrawn != out:
        kinds.append("redraws")
    out = redrawn
    if not lossy:
        return Reduction(out, tuple(kinds), False)
    # Most outputs need no reducer: the text is split into lines once, and the whole-text checks
    # below skip a reducer whose per-line loop would keep every line.
    lines = out.split("\n")
    reduced = collapse_progress(lines) if _MAY_HOLD_PROGRESS.search(out) else lines
    if len(reduced) != len(lines):
        kinds.append("progress")
    before = len(reduced)
    reduced = collapse_repeats(reduced, config.repeat_min_run)
    if len(reduced) != before:
        kinds.append("repeats")
    if reduced is not lines:
        out = "\n".join(reduced)
    # A blob lies within one line: with every line shorter than a blob there is none to look for.
    blobs = False
    if max(map(len, reduced), default=0) >= config.blob_min_chars:
        out, blobs = replace_blobs(out, config.blob_min_chars)
    if blobs:
        kinds.append("blobs")
    out, shortened = shorten_json(out, config.json_max_items, config.json_keep_head, config.json_keep_tail)
    if shortened:
        kinds.append("json")
    final, elided = elide_log(out.split("\n") if blobs or shortened else reduced, config.log_max_lines,
                              config.log_head_lines, config.log_tail_lines, config.log_max_kept_lines)
    if elided:
        kinds.append("log")
        out = "\n".join(final)
    dropped = blobs or shortened or elided
    return Reduction(out, tuple(kinds), dropped)


def _reduce_ends(text: str, config: IngestConfig) -> Reduction:
    """A huge output's head and tail, each reduced, around a note of what was not read on arrival."""
    head_end = text.rfind("\n", 0, REDUCE_HEAD_CHARS)
    head_end = head_end if head_end > 0 else REDUCE_HEAD_CHARS
    tail_start = text.find("\n", len(text) - REDUCE_TAIL_CHARS) + 1 or len(text) - REDUCE_TAIL_CHARS
    head, tail = reduce_output(text[:head_end], config), reduce_output(text[tail_start:], config)
    skipped = text.count("\n", head_end, tail_start)
    note = (f"[... {skipped:,} lines ({tail_start - head_end:,} characters) of the output not read on arrival: "
            "the whole output is in the artifact ...]")
    kinds = tuple(dict.fromkeys(("ends", *head.kinds, *tail.kinds)))
    return Reduction(f"{head.text}\n{note}\n{tail.text}", kinds, True)


def lost_important_lines(original: str, reduced: str, blob_min_chars: int = IngestConfig().blob_min_chars) -> list[str]:
    """Important lines of `original` (escape codes removed, blobs noted as `reduce_output` notes them)
    that `reduced` no longer shows: what a reduction must never produce, short of a log whose
    important lines exceed its cap."""
    shown = set(reduced.split("\n"))
    clean = resolve_redraws(strip_ansi(original)).split("\n")
    lost = []
    for line in clean:
        if not is_important(line) or is_progress(line) or line in shown:
            continue
        if replace_blobs(line, blob_min_chars)[0] not in shown:
            lost.append(line)
    return lost
