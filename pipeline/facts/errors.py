"""Tool errors, the line that says what went wrong, and whether (and how) the agent got past them.

An error is "fixed by" the changes made before the same command next ran without that error, or
"worked around with" a different command on the same target that succeeded. Rejected calls are not
errors (they are excluded approaches) and a parallel call's cascade failure is not either.
A shell command whose exit status says success can still print a failure (`mix test | tail` exits
with tail's status): a strong error signature anywhere in its output makes it an error too
(`printed`). A transient refusal of the tool itself (a read over the token limit, a timeout, a rate
limit) is an error but never an approach that was tried and excluded (`transient`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from ..core.memo import forgotten_with_the_others
from ..core.model import Message
from ..core.toolkinds import call_path, tool_kind
from .calls import CallRecord, is_sibling_error, tool_calls, tool_label
from .testsummary import parse_test_output
from .fileviews import edit_gist
from .shell import first_line, signature, simple_commands
from .text import one_line, output_body, trim

# How far ahead (in calls) a retry or workaround of a failed call is looked for.
RESOLUTION_WINDOW = 60
# Outputs whose classification is remembered: enough for the error window (two per call of it).
CLASSIFY_CACHE_SIZE = 4 * RESOLUTION_WINDOW
# Commands' verdicts remembered: a first fold of a long session reads every call twice (its errors,
# and the approaches they exclude), tens of thousands apart; the cache holds strings the messages hold.
VERDICT_CACHE_SIZE = 1 << 16
# An error line longer than this is cut: the cause is at its start.
MAX_ERROR_LINE = 300
# Kinds that change nothing, so they cannot be what fixed an error.
PASSIVE_KINDS = {"read", "grep", "glob", "list", "search", "fetch", "todo", "plan", "agent", "ask", "other"}
# At most this many changes are named in a "fixed by" note (the latest ones).
MAX_FIXES_NAMED = 2

TRACEBACK = "Traceback (most recent call last)"
TRACEBACK_LAST_RE = re.compile(r"^\s*[\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*")
# Error lines, strongest first; the first pattern that matches any line picks the line.
ERROR_LINE_RES = tuple(re.compile(p) for p in (
    r"\*\* \(\w[\w.]*\)",                              # Elixir: ** (RuntimeError) ...
    r"^\s*(error|Error|ERROR)(\[\w+\])?\s*[:!]",        # compilers, linters: error: ..., error[E0308]: ...
    r"^\s*fatal:",                                     # git
    r"^\s*(FAILED|FAIL)\b",                             # pytest / go test
    r"\b\w*(Error|Exception)\b",                       # exception names anywhere
    r"(?i)\b(failed|failure|not found|no such file|permission denied|cannot|could not|unable to)\b",
))
# Lines that report the size of a problem rather than the problem (linter and compiler banners):
# the complaint lines they summarise are what to keep.
BANNER_RE = re.compile(
    r"(?i)^\s*(?:found \d+ (?:errors?|problems?|issues?)|✖ \d+ problems?|\d+ problems? \(|"
    r"compilation failed due to warnings|please report incorrect results|checking \d+ source files|"
    r"analysis took|\d+ mods/funs|make: \*\*\*|error: recipe|npm err! (?:a complete log|code \w+$)|"
    r"\d+ errors? (?:generated|found)|error: could not compile|aborting due to|exit code|"
    r"(?:error: )?(?:script|command) \"[^\"]*\" exited with code|(?:.*: )?exited with code -?\d+\s*$|"
    r"[\w ]+ - please take a look|(?:code readability|software design|refactoring opportunities|"
    r"consistency|warnings)\s*$)")
# A linter or compiler complaint: `path:line[:col]: message`, eslint's `  12:5  error  message`, or
# credo's `[W] ↗ message` rows.
COMPLAINT_RE = re.compile(r"^[\s┃│|]*(?:\S+?\.\w+:\d+(?::\d+)?:?\s+\S|\d+:\d+\s+(?:error|warning)\s|\[[A-Z]\]\s+\S)")
WARNING_LINE_RE = re.compile(r"^\s*warning:", re.I)
# Error signatures that mean a command failed even when its exit status says otherwise.
PRINTED_ERROR_RE = re.compile(
    r"^Traceback \(most recent call last\)|^\s*\*\* \(\w[\w.]*\)|^\s*(?:error|ERROR)(?:\[\w+\])?:\s"
    r"|^\s*fatal:\s|^npm ERR!|^Segmentation fault|: command not found$|^\s*FAILED\s|^FAIL\s"
    r"|^\s*panic:|^thread '.+' panicked at", re.M)
# Commands that only show text (a file, a search hit): an error signature in their output is content.
SHOW_ONLY = {"cat", "head", "tail", "less", "more", "grep", "rg", "ag", "ack", "find", "ls", "echo",
             "printf", "sed", "awk", "jq", "git", "diff", "wc", "sort", "uniq", "bat", "nl", "tree", "file"}
# git subcommands that only show the repository's state.
READ_ONLY_GIT = {"status", "log", "diff", "show", "ls-files", "ls-tree", "rev-parse", "blame", "grep",
                 "describe", "shortlog", "reflog", "check-ignore", "cat-file"}
# A refusal of the tool itself, not of the approach: retrying differently is routine, not a lesson.
TRANSIENT_RE = re.compile(
    r"(?i)exceeds? (?:the )?maximum allowed (?:tokens|size)|file content \([\d.]+ ?(?:tokens|[kmg]?b)\) exceeds"
    r"|too large to read"
    r"|timed out|timeout after|rate limit|overloaded|file has not been read yet|"
    r"file has been modified since read|modified since it was last read|try again later|"
    r"ECONNRESET|temporarily unavailable")
EXIT_LINE_RE = re.compile(r"^\s*Exit code \d+\s*$")
TAG_RE = re.compile(r"</?tool_use_error>")


@dataclass(frozen=True)
class ErrorFact:
    """A failed tool call; `resolution` says how it was got past, or is None while unresolved."""

    call_id: str
    tool: str
    target: str
    line: str
    message_id: str
    index: int
    resolution: str | None = None
    resolved_message_id: str | None = None
    workaround: bool = False
    label: str = ""  # how a summary names the call: the command in backticks, or `Tool target`
    printed: bool = False  # the command exited 0 but printed an error signature
    transient: bool = False  # the tool refused this once (size, timeout, rate): not an excluded approach

    @property
    def resolved(self) -> bool:
        return self.resolution is not None


# The ledger's error window re-reads the outputs of its open errors on every call: remember them.
@lru_cache(maxsize=CLASSIFY_CACHE_SIZE)
def error_line(output: str) -> str:
    """The line of an error output that says what went wrong (verbatim, one line); a harness's header
    above the output (Codex's chunk id, wall time, exit code) is not the output."""
    text = TAG_RE.sub("", output_body(output))
    lines = [ln for ln in text.splitlines() if ln.strip() and not EXIT_LINE_RE.match(ln)]
    if not lines:
        return ""
    if TRACEBACK in text:
        for ln in reversed(lines):
            if TRACEBACK_LAST_RE.match(ln):
                return trim(ln.strip(), MAX_ERROR_LINE)
    content = [ln for ln in lines if not BANNER_RE.match(ln)] or lines
    for pattern in ERROR_LINE_RES[:3]:
        for ln in content:
            if pattern.search(ln) and not WARNING_LINE_RE.match(ln):
                return trim(ln.strip(), MAX_ERROR_LINE)
    # A banner said the run failed on warnings (--warnings-as-errors, a linter's summary): the first
    # warning is the complaint, then a linter's complaint rows.
    warning = next((n for n, ln in enumerate(content) if WARNING_LINE_RE.match(ln)), None)
    if warning is not None and len(content) < len(lines):
        return trim(content[warning].strip(), MAX_ERROR_LINE)
    complaint = next((ln for ln in content if COMPLAINT_RE.match(ln)), None)
    if complaint is not None:
        return trim(complaint.strip(), MAX_ERROR_LINE)
    for pattern in ERROR_LINE_RES[3:]:
        for ln in content:
            if pattern.search(ln) and not WARNING_LINE_RE.match(ln):
                return trim(ln.strip(), MAX_ERROR_LINE)
    return trim(content[0].strip(), MAX_ERROR_LINE)


def printed_error(rec: CallRecord) -> bool:
    """A shell command that exited 0 but printed a failure: an error signature anywhere in its
    output, or a test summary with failures. Commands that only show text (cat, grep, git log...)
    are not judged by what they show."""
    if rec.result is None or rec.failed or rec.command is None:
        return False
    return _printed_failure(rec.command, rec.output)


@lru_cache(maxsize=VERDICT_CACHE_SIZE)
def _printed_failure(command: str, output: str) -> bool:
    programs = [sc.program for sc in simple_commands(command) if sc.program not in ("cd", "export")]
    if not programs or programs[0] in SHOW_ONLY:
        return False
    summary = parse_test_output(output)
    if summary is not None:
        return summary.failed > 0
    return bool(PRINTED_ERROR_RE.search(TAG_RE.sub("", output)))


forgotten_with_the_others(_printed_failure.cache_clear)  # it holds outputs: freed with the transcript


def is_transient(output: str) -> bool:
    """The tool refused this call for a passing reason (size, timeout, rate limit)."""
    return _transient_head(output[:2000])


# The error window re-reads each open error's output on every call, and the case-blind search of the
# pattern's many wordings costs a few hundred microseconds on a 2,000-character head: remember it.
@lru_cache(maxsize=CLASSIFY_CACHE_SIZE)
def _transient_head(head: str) -> bool:
    return bool(TRANSIENT_RE.search(head))


def _bad(rec: CallRecord) -> bool:
    return rec.failed or printed_error(rec)


def target_key(rec: CallRecord) -> str:
    """What a retry of this call would share with it: the file, the command's signature, or name+target."""
    # The kind first: a shell call's path is read by tokenizing its command line.
    path = call_path(rec.call) if rec.kind in ("read", "edit", "write") else None
    if path:
        return f"file:{path}"
    if tool_kind(rec.call) == "shell" and rec.command:
        return f"cmd:{signature(rec.command)}"
    return f"{rec.name}:{rec.target}"


def _label(rec: CallRecord) -> str:
    if rec.command:
        return f"`{one_line(first_line(rec.command), 160)}`"
    return one_line(tool_label(rec), 160)


def _change_label(rec: CallRecord) -> str:
    """A change named with the first line it added, when it is an edit: `Edit path (+ `line`)`."""
    gist = edit_gist(dict(rec.call.input)) if rec.kind == "edit" else None
    return f"{_label(rec)} (+ `{gist}`)" if gist else _label(rec)


def _resolve(records: list[CallRecord], i: int) -> tuple[str, str, bool] | None:
    """(resolution text, message id, workaround?) for the failed call at `i`, or None."""
    failed = records[i]
    key, line = target_key(failed), error_line(failed.output)
    changes: list[CallRecord] = []
    for later in records[i + 1: i + 1 + RESOLUTION_WINDOW]:
        found = _step(failed, key, line, changes, later)
        if found is not None:
            return found
    return None


def _step(failed: CallRecord, key: str, line: str, changes: list[CallRecord],
          later: CallRecord) -> tuple[str, str, bool] | None:
    """Read one later call of a failed call's search: its resolution when `later` resolves it, else
    None (and `later` joins `changes` when it is a change that could be the fix)."""
    if later.result is None or later.rejected:
        return None
    same = target_key(later) == key
    bad = _bad(later)
    if same and bad and error_line(later.output) == line:
        changes.clear()  # the same error again: what came before did not fix it
        return None
    if same:
        where = later.result_message_id or later.message_id
        if bad:  # a different error: the earlier one was got past
            return (_fixed_by(changes) or "got past; next attempt failed differently", where, False)
        if later.call.input_json != failed.call.input_json and not changes:
            return f"worked around with {_label(later)}", where, True
        fixed = _fixed_by(changes) or "succeeded on retry"
        if changes and later.command and failed.command and _label(later) != _label(failed):
            # The retry itself changed (a flag, an argument): that change is the lesson.
            fixed += f"; then succeeded as {_label(later)}"
        return fixed, where, False
    if later.succeeded and later.kind not in PASSIVE_KINDS and not _looks_only(later):
        changes.append(later)
    return None


def _looks_only(rec: CallRecord) -> bool:
    """A shell command that only shows things (`git ls-files`, `ls`, `cat`): it cannot have fixed
    anything, so it is never named as a fix."""
    if rec.command is None:
        return False
    commands = [sc for sc in simple_commands(rec.command) if sc.program not in ("cd", "export")]
    if not commands:
        return False
    for sc in commands:
        if sc.writes:
            return False
        if sc.program == "git":
            sub = next((w for w in sc.args if not w.startswith("-")), "")
            if sub not in READ_ONLY_GIT:
                return False
        elif sc.program not in SHOW_ONLY or sc.program in ("sed", "awk") and any(
                w.startswith("-i") for w in sc.args):
            return False
    return True


def _fixed_by(changes: list[CallRecord]) -> str | None:
    names: list[str] = []
    for rec in reversed(changes):
        label = _change_label(rec)
        if label not in names:
            names.append(label)
        if len(names) == MAX_FIXES_NAMED:
            break
    return "fixed by " + ", ".join(reversed(names)) if names else None


def _is_error(rec: CallRecord) -> tuple[bool, bool]:
    """(an error worth a record, printed): failed or printed a failure, and neither rejected nor a
    parallel call's cascade failure."""
    printed = printed_error(rec)
    return (rec.failed or printed) and not rec.rejected and not is_sibling_error(rec.result), printed


def _fact(rec: CallRecord, found: tuple[str, str, bool] | None, printed: bool) -> ErrorFact:
    resolution, where, workaround = found if found else (None, None, False)
    return ErrorFact(rec.call.id, rec.name, rec.target, error_line(rec.output), rec.result_message_id or rec.message_id,
                     rec.result_index if rec.result_index is not None else rec.index,
                     resolution, where, workaround, _label(rec), printed, is_transient(rec.output))


def tool_errors(messages: Sequence[Message]) -> list[ErrorFact]:
    """Every failed tool call, oldest first, with its error line and resolution (None if unresolved)."""
    records = tool_calls(messages)
    out: list[ErrorFact] = []
    for i, rec in enumerate(records):
        error, printed = _is_error(rec)
        if error:
            out.append(_fact(rec, _resolve(records, i), printed))
    return out


@dataclass
class _Search:
    """One failed call's search for its resolution, kept between reads: the later calls read for good
    (each with its result), the changes among them, and the answer once it can no longer change."""

    failed: CallRecord
    key: str
    line: str
    printed: bool
    read: int = 0
    changes: list[CallRecord] = field(default_factory=list)
    final: ErrorFact | None = None  # resolved, or its window ran out: the same on every later read

    def advance(self, records: list[CallRecord], at: int) -> tuple[str, str, bool] | None:
        later = records[at + 1: at + 1 + RESOLUTION_WINDOW]
        while self.read < len(later) and later[self.read].result is not None:
            found = _step(self.failed, self.key, self.line, self.changes, later[self.read])
            self.read += 1
            if found is not None:
                self.final = _fact(self.failed, found, self.printed)
                return found
        if self.read >= RESOLUTION_WINDOW:
            self.final = _fact(self.failed, None, self.printed)
            return None
        # Past a call still waiting for its result: read on as a one-shot reading would, on a copy
        # (the waiting call, once answered, is read in its place next time).
        changes = list(self.changes)
        for rec in later[self.read:]:
            found = _step(self.failed, self.key, self.line, changes, rec)
            if found is not None:
                return found
        return None


class ErrorReader:
    """`tool_errors` for a message window that only grows at its end between reads (a session's
    error window): each later call is read once per open error, and a call's error verdict and a
    settled error are never derived again. Holds only the calls of the last window read."""

    def __init__(self) -> None:
        self._verdicts: dict[str, tuple[bool, bool]] = {}  # call id -> _is_error, once it has a result
        self._searches: dict[str, _Search] = {}

    def read(self, messages: Sequence[Message]) -> list[ErrorFact]:
        """What `tool_errors(messages)` returns, provided `messages` extends (by later messages) the
        part of the previous window that it still holds."""
        records = tool_calls(messages)
        verdicts: dict[str, tuple[bool, bool]] = {}
        searches: dict[str, _Search] = {}
        out: list[ErrorFact] = []
        for i, rec in enumerate(records):
            if rec.result is None:
                continue
            cid = rec.call.id
            verdict = verdicts[cid] = self._verdicts.get(cid) or _is_error(rec)
            if not verdict[0]:
                continue
            search = searches[cid] = self._searches.get(cid) or _Search(
                rec, target_key(rec), error_line(rec.output), verdict[1])
            found = search.advance(records, i) if search.final is None else None
            fact = search.final or _fact(rec, found, verdict[1])
            out.append(_at(fact, rec))
        self._verdicts, self._searches = verdicts, searches
        return out


def _at(fact: ErrorFact, rec: CallRecord) -> ErrorFact:
    """`fact` with its index in the current window (a settled fact was made in an earlier one)."""
    index = rec.result_index if rec.result_index is not None else rec.index
    return fact if fact.index == index else dataclasses.replace(fact, index=index)
