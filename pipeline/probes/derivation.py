"""Derive probes mechanically from a transcript: the facts an agent needs right after a compaction.

These rules grade the summarizers, so they are deliberately independent of them: simple patterns over
messages, tool calls and results, sharing no code with `worksurface.facts` or `worksurface.summarizers`.
Every derived needle is checked to be visible in the messages it came from, so the full transcript
always retains 100% and a view's score measures only what it dropped.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..facts.errors import is_transient
from ..core.model import Message, ToolCall, ToolResult, is_user_turn
from ..core.toolkinds import call_path, call_target, effective_kind, normalize_name, shell_command
from .match import haystack, retained
from .model import CATEGORIES, EXACT, Probe, ProbeSet

# Paraphrase-tolerant match for prose needles (requests, rules, errors): a summary that quotes the text
# with small edits still counts; 85 keeps unrelated sentences of similar shape out.
FUZZY = "fuzzy:85"
# Prose needles are cut to this many characters: long enough to identify the sentence, short enough
# that a summary quoting it with a different ending still matches.
HEAD_CHARS = 100
COMMAND_CHARS = 80
# Shorter needles ("main", "ls") match by accident inside ordinary words; a probe needs a needle
# that only the fact itself explains.
MIN_NEEDLE_CHARS = 5
# A sentence longer than this is code or pasted output, not a rule someone stated.
MAX_RULE_CHARS = 300
# "continue" or "yes" is an answer, not a request; "Implement spotter-gqc" is one.
MIN_REQUEST_WORDS = 2
# Caps per category, so one chatty category does not dominate the score.
MAX_ARTIFACTS = 12
MAX_RECENT_READS = 3
MAX_CONSTRAINTS = 8
MAX_NEGATIVES = 6
MAX_PLAN_ITEMS = 8
MAX_TOOLS = 6
MAX_PROGRAMS = 5

# A user-role message holding one of these was written by the harness, not typed by the user
# (Claude Code slash commands, background-task notifications, shell-escape output).
_HARNESS_MESSAGE = re.compile(r"<(command-name|local-command-[\w-]+|task-notification|bash-[\w-]+)>")
# Blocks a harness appends to what the user typed (reminders, hook output): dropped, the rest kept.
_HARNESS_BLOCK = re.compile(r"<(system-reminder|user-prompt-submit-hook)>.*?</\1>", re.S)
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_INTERRUPTED = "[request interrupted by user"
_REJECTED = re.compile(r"the user doesn't want to proceed|user rejected|tool use was rejected", re.I)
_RULE = re.compile(
    r"\b(must|mustn't|never|always|do not|don't|dont|should not|shouldn't|avoid|make sure|ensure|"
    r"only use|not allowed|forbidden|required|instead of|without)\b", re.I)
# A reply that turns down what the agent did ("No, ...", "that doesn't work"); only replies count,
# since the first message is the task and its "if that doesn't work" is advice, not a rejection.
_REJECTION = re.compile(
    r"^(no|nope|stop|wrong)[,.!:;]|^(undo|revert)\b|\b(didn't|doesn't|does not|did not|won't) work\b|"
    r"\bthat's not\b|\bnot what i\b|\bwrong approach\b", re.I)
# User-role messages that a harness wrote (aider's `>` notices and command output).
_HARNESS_KINDS = frozenset({"tool_output"})
_SHELL_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|\bexit (?:code|status):? ?[1-9]|command not found|"
    r"\b[1-9]\d* failed\b|\b[1-9]\d* failures?\b|^E\s{3}|\bSyntaxError\b|^(?:\*\* )?\(?\w*Error\b",
    re.I | re.M)
# The line that says what went wrong: an error message if there is one, else a "failed" summary.
_ERROR_LINE = re.compile(r"error|exception|fatal|denied|not found|no such|cannot|undefined", re.I)
_FAILED_LINE = re.compile(r"failed|failure", re.I)
_TEST_WORDS = r"passed|failed|tests?|failures?|errors?|skipped|doctests?|examples?|properties|" \
              r"warnings?|xfailed|xpassed|deselected"
# A count is at most 5 digits and its word is not followed by a path or name ("100644 test/x" is
# git's file mode, not a test result).
_COUNT = rf"\d{{1,5}} (?:{_TEST_WORDS})(?![\w/-]|\.\w)"
_TEST_SUMMARY = re.compile(rf"\bRan \d+ tests?\b|\b{_COUNT}(?:,? {_COUNT})*")
_TEST_CORE = re.compile(r"passed|failed|failure|test", re.I)
_CWD_LINE = re.compile(r"[Cc]urrent (?:working )?directory: ([^)\]\n]+)")
_BRANCH_LINE = re.compile(r"^On branch (\S+)", re.M)
# aider edits files without tool calls: a SEARCH/REPLACE block under the file's name in the reply,
# and an "Applied edit to PATH" notice in its output.
_AIDER_EDIT = re.compile(r"^([^\s`][^\n`]*?)\n```[^\n]*\n<<<<<<< SEARCH|^Applied edit to (\S+)", re.M)
_SUBCOMMAND = re.compile(r"^[a-z][\w.:-]*$")
# Commands so common that knowing the agent used them says nothing about its toolchain.
_TRIVIAL_PROGRAMS = frozenset(
    "cd ls cat echo head tail pwd grep rg find sed awk wc sleep true false mkdir rm cp mv sort uniq "
    "xargs tee touch chmod which test printf diff env export source set nl less more bat tree "
    "timeout git".split())


@dataclass(frozen=True)
class _Draft:
    category: str
    needles: tuple[str, ...]
    match: str
    established_at: str | None
    note: str


@dataclass(frozen=True)
class _Step:
    """A tool call with its result (None when missing): the call's position, and the ids of the
    messages holding each (what `established_at` names)."""

    call: ToolCall
    call_at: int
    call_msg: str
    result: ToolResult | None
    result_msg: str | None


def derive(messages: Sequence[Message], transcript: str | None = None,
           queued_inputs: Sequence[tuple[str | None, str]] = ()) -> ProbeSet:
    """Probes for `messages` (the transcript up to the cut), ids `<category>-<n>` in category order.

    `queued_inputs` is user text typed while the agent was busy, as `(after message id, text)` (Claude
    Code's queue): the model saw it, so it can state the latest request. Entries anchored after the
    cut are ignored."""
    steps = _steps(messages)
    inputs = _user_inputs(messages, queued_inputs)
    drafts = [*_requests(inputs), *_constraints(inputs), *_negatives(messages, steps, inputs),
              *_artifacts(messages, steps), *_recent(messages, steps), *_plan(steps),
              *_status(messages, steps), *_tools(steps)]
    text = haystack(messages) + " " + haystack("\n".join(t for _, t in inputs))
    probes: list[Probe] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for category in CATEGORIES:
        n = 0
        for d in drafts:
            key = (d.category, tuple(x.casefold() for x in d.needles))
            if d.category != category or key in seen:
                continue
            seen.add(key)
            probe = Probe(f"{category}-{n + 1}", category, d.needles, d.match, d.established_at, d.note)
            if retained(probe, text):
                probes.append(probe)
                n += 1
    return ProbeSet(probes, transcript, {"derived": "mechanically, by worksurface probe derive"})


# --- helpers ---------------------------------------------------------------------------------------

def _steps(messages: Sequence[Message]) -> list[_Step]:
    results = {r.call_id: (r, m.id) for m in messages for r in m.tool_results}
    return [_Step(c, i, m.id, *results.get(c.id, (None, None)))
            for i, m in enumerate(messages) for c in m.tool_calls]


def _head(text: str, limit: int = HEAD_CHARS) -> str:
    """The first `limit` characters of `text` on one line, cut at a word boundary."""
    one = re.sub(r"\s+", " ", text).strip()
    if len(one) <= limit:
        return one
    cut = one[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut


def _user_inputs(messages: Sequence[Message],
                 queued: Sequence[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """(message id, text) of what the user typed, in order: user turns and queued inputs (a queued
    input carries the id of the message it follows), without harness-written messages."""
    position = {m.id: i for i, m in enumerate(messages)}
    found: list[tuple[int, int, str | None, str]] = [(i, 0, m.id, m.text) for i, m in enumerate(messages)
             if is_user_turn(m) and m.meta.get("kind") not in _HARNESS_KINDS]
    found += [(position[after] if after is not None else -1, k + 1, after, text)
              for k, (after, text) in enumerate(queued) if after is None or after in position]
    out: list[tuple[str | None, str]] = []
    for _, _, at, text in sorted(found, key=lambda x: (x[0], x[1])):
        text = _HARNESS_BLOCK.sub("", text).strip()
        if text and not _HARNESS_MESSAGE.search(text) and not text.lower().startswith(_INTERRUPTED):
            out.append((at, text))
    return out


def _segments(text: str) -> Iterator[str]:
    """Lines of `text` split around markup tags, so a needle never spans a tag it would not match."""
    for line in text.splitlines():
        for seg in _TAG.split(line):
            if seg.strip():
                yield seg.strip()


def _sentences(text: str) -> Iterator[str]:
    for seg in _segments(text):
        for s in _SENTENCE_END.split(seg):
            s = s.strip()
            if MIN_NEEDLE_CHARS <= len(s) <= MAX_RULE_CHARS:
                yield s


def _request_needle(text: str) -> str | None:
    for seg in _segments(text):
        if len(seg.split()) >= MIN_REQUEST_WORDS:
            return _head(seg)
    return None


def _failure_line(step: _Step) -> str | None:
    """The error line of a failed step, or None when the step did not fail."""
    r = step.result
    if r is None or _REJECTED.search(r.content[:200]):
        return None
    if not r.is_error and not (effective_kind(step.call) == "shell" and _SHELL_FAILURE.search(r.content)):
        return None
    lines = [ln.strip() for ln in r.content.splitlines() if ln.strip()]
    if not lines:
        return None
    errors = [ln for ln in lines if _ERROR_LINE.search(ln)]
    failed = [ln for ln in lines if _FAILED_LINE.search(ln)]
    return _head((errors or failed or lines)[-1])


def _roots(messages: Sequence[Message]) -> list[str]:
    """The working directories the transcript records, outermost first, each ending in '/'."""
    cwds = {c.rstrip("/") + "/" for m in messages if isinstance(c := m.meta.get("cwd"), str) and c.strip("/")}
    return sorted(cwds, key=lambda c: (len(c), c))


def _short_path(path: str, roots: Sequence[str]) -> str:
    """`path` relative to the outermost working directory that contains it: how a summary names it,
    the same wherever the agent had cd'ed to, and still a substring of the absolute path calls show."""
    root = next((r for r in roots if path.startswith(r) and len(path) > len(r)), None)
    return path[len(root):] if root else path


def _call_label(call: ToolCall) -> str:
    """What a call tried: its command line, pattern, query or URL, else its target or its name."""
    for key in ("pattern", "query", "url"):
        if isinstance(call.input.get(key), str):
            return _head(call.input[key], COMMAND_CHARS)
    return _head(shell_command(call) or call_target(call) or call.name, COMMAND_CHARS)


def _draft(category: str, needles: Sequence[str], match: str, at: str | None, note: str) -> _Draft | None:
    clean = tuple(n for n in needles if n)
    if not clean or any(len(n) < MIN_NEEDLE_CHARS for n in clean):
        return None
    return _Draft(category, clean, match, at, note)


def _keep(drafts: Sequence[_Draft | None], limit: int | None = None) -> list[_Draft]:
    """Drop empty drafts; with `limit`, keep the newest `limit` (drafts are in transcript order)."""
    real = [d for d in drafts if d is not None]
    return real[-limit:] if limit is not None else real


# --- categories --------------------------------------------------------------------------------------

def _requests(inputs: Sequence[tuple[str | None, str]]) -> list[_Draft]:
    """The latest user request and, when it is another input, the first one (the task)."""
    turns = [(at, n) for at, text in inputs if (n := _request_needle(text))]
    if not turns:
        return []
    picks = [turns[0], turns[-1]] if len(turns) > 1 else [turns[0]]
    notes = ["first user request (the task)", "latest user request"]
    return _keep([_draft("request", [n], FUZZY, at, note) for (at, n), note in zip(picks, notes)])


def _constraints(inputs: Sequence[tuple[str | None, str]]) -> list[_Draft]:
    """User sentences stating a rule or a prohibition (rejections go to `negative` instead)."""
    drafts = [_draft("constraint", [_head(s)], FUZZY, at, "rule stated by the user")
              for k, (at, text) in enumerate(inputs) for s in _sentences(text)
              if _RULE.search(s) and not (k and _REJECTION.search(s))]
    return _keep(drafts, MAX_CONSTRAINTS)


def _negatives(messages: Sequence[Message], steps: Sequence[_Step],
               inputs: Sequence[tuple[str | None, str]]) -> list[_Draft]:
    """Approaches the user rejected (refused or interrupted calls, 'no, that doesn't work') and
    failures before the last one (the last is a `recent` probe)."""
    drafts: list[_Draft | None] = []
    for s in steps:
        if s.result is not None and _REJECTED.search(s.result.content[:200]):
            drafts.append(_draft("negative", [_call_label(s.call)], FUZZY, s.call_msg,
                                 f"user rejected this {s.call.name} call"))
    for i, m in enumerate(messages):
        if m.role == "user" and _INTERRUPTED in m.text.lower():
            before = [s for s in steps if s.call_at < i]
            if before:
                drafts.append(_draft("negative", [_call_label(before[-1].call)], FUZZY, before[-1].call_msg,
                                     f"user interrupted this {before[-1].call.name} call"))
    for at, text in inputs[1:]:
        drafts.extend(_draft("negative", [_head(s)], FUZZY, at, "approach the user rejected")
                      for s in _sentences(text) if _REJECTION.search(s))
    failures = _failures(steps)
    drafts.extend(_draft("negative", [line], FUZZY, s.result_msg,
                         f"{s.call.name} failed: {_call_label(s.call)}") for s, line in failures[:-1])
    return _keep(drafts, MAX_NEGATIVES)


def _failures(steps: Sequence[_Step]) -> list[tuple[_Step, str]]:
    """Failed steps with their error line; a passing refusal of the tool (too large to read, timed
    out) is no approach that failed."""
    return [(s, line) for s in steps
            if (line := _failure_line(s)) and not (s.result is not None and is_transient(s.result.content))]


def _artifacts(messages: Sequence[Message], steps: Sequence[_Step]) -> list[_Draft]:
    """Files edited or created: edit/write calls, and aider's edit blocks and notices (newest last)."""
    found: dict[str, tuple[str, str]] = {}
    roots = _roots(messages)
    for s in steps:
        kind = effective_kind(s.call)
        path = call_path(s.call) if kind in ("edit", "write") else None
        if path and (s.result is None or not s.result.is_error):
            path = _short_path(path, roots)
            found.pop(path, None)
            found[path] = (s.call_msg, "created" if kind == "write" else "edited")
    for m in messages:
        if not m.tool_results:
            for block, notice in _AIDER_EDIT.findall(m.text):
                path = (block or notice).strip()
                found.pop(path, None)
                found[path] = (m.id, "edited")
    drafts = [_draft("artifact", [p], EXACT, at, f"{how}: {p}") for p, (at, how) in found.items()]
    return _keep(drafts, MAX_ARTIFACTS)


def _recent(messages: Sequence[Message], steps: Sequence[_Step]) -> list[_Draft]:
    """The last failing command with its error line, and the last files read."""
    drafts: list[_Draft | None] = []
    failures = _failures(steps)
    if failures:
        s, line = failures[-1]
        label = _call_label(s.call)
        drafts.append(_draft("recent", [label, line] if len(label) >= MIN_NEEDLE_CHARS else [line],
                             FUZZY, s.result_msg, f"last failure ({s.call.name})"))
    reads: dict[str, str] = {}
    roots = _roots(messages)
    for s in steps:
        path = call_path(s.call) if effective_kind(s.call) == "read" else None
        if path:
            path = _short_path(path, roots)
            reads.pop(path, None)
            reads[path] = s.call_msg
    drafts.extend(_draft("recent", [p], EXACT, at, f"recently read: {p}")
                  for p, at in list(reads.items())[-MAX_RECENT_READS:])
    return _keep(drafts)


def _plan(steps: Sequence[_Step]) -> list[_Draft]:
    """Items of the latest todo list or plan: unfinished ones first, then finished ones."""
    plans = [s for s in steps if effective_kind(s.call) in ("todo", "plan") and _plan_items(s.call)]
    if not plans:
        return []
    s = plans[-1]
    items = sorted(_plan_items(s.call), key=lambda item: item[1] == "completed")[:MAX_PLAN_ITEMS]
    return _keep([_draft("plan", [_head(text)], FUZZY, s.call_msg, f"plan item ({status or 'listed'})")
                  for text, status in items])


def _plan_items(call: ToolCall) -> list[tuple[str, str]]:
    """(text, status) of each item of a todo or plan call: Claude Code `todos`, Codex `plan` steps,
    or the top-level bullets of a plan written in markdown (nested bullets are its details)."""
    raw = call.input.get("todos", call.input.get("plan"))
    if isinstance(raw, list):
        return [(str(x.get("content") or x.get("step") or ""), str(x.get("status") or ""))
                for x in raw if isinstance(x, dict) and (x.get("content") or x.get("step"))]
    if isinstance(raw, str):
        return [(ln.lstrip("-*0123456789. ").strip(), "") for ln in raw.splitlines()
                if re.match(r"(?:[-*]|\d+\.)\s+\S", ln)]
    return []


def _status(messages: Sequence[Message], steps: Sequence[_Step]) -> list[_Draft]:
    """The last test summary, the working directory and the git branch."""
    drafts: list[_Draft | None] = []
    tests = [(s, t) for s in steps if s.result is not None and (t := _test_summary(s.result.content))]
    if tests:
        s, summary = tests[-1]
        drafts.append(_draft("status", [summary], EXACT, s.result_msg, "latest test summary"))
    cwd = _last_meta(messages, "cwd") or _last_result_match(steps, _CWD_LINE)
    if cwd:
        drafts.append(_draft("status", [cwd[1]], EXACT, cwd[0], "working directory"))
    branch = _last_meta(messages, "git_branch") or _last_result_match(steps, _BRANCH_LINE)
    if branch and branch[1] != "HEAD":
        drafts.append(_draft("status", [branch[1]], EXACT, branch[0], "git branch"))
    return _keep(drafts)


def _test_summary(content: str) -> str | None:
    found = [m.group(0) for m in _TEST_SUMMARY.finditer(content) if _TEST_CORE.search(m.group(0))]
    return max(found, key=len) if found else None


def _last_meta(messages: Sequence[Message], key: str) -> tuple[str, str] | None:
    """(message id, value) of the newest message whose meta records `key` (adapters put the
    harness's cwd and git branch there)."""
    for m in reversed(messages):
        v = m.meta.get(key)
        if isinstance(v, str) and v.strip():
            return m.id, v.strip()
    return None


def _last_result_match(steps: Sequence[_Step], pattern: re.Pattern[str]) -> tuple[str, str] | None:
    for s in reversed(steps):
        if s.result is not None and s.result_msg and (found := pattern.findall(s.result.content)):
            return s.result_msg, found[-1].strip()
    return None


def _tools(steps: Sequence[_Step]) -> list[_Draft]:
    """Skills and agents invoked, distinctive tool names (MCP, CamelCase or snake_case identifiers, which
    prose does not contain by accident) and the command-line programs the agent relies on."""
    first: dict[str, str] = {}
    uses: Counter[str] = Counter()
    programs: Counter[str] = Counter()
    for s in steps:
        kind, at = effective_kind(s.call), s.call_msg
        names = [s.call.name] if re.search(r"[_A-Z0-9]", s.call.name[1:]) else []
        if kind == "skill":
            names.append(str(s.call.input.get("skill") or s.call.input.get("command") or ""))
        if kind == "agent":
            names.append(str(s.call.input.get("subagent_type") or ""))
        for n in filter(None, names):
            first.setdefault(n, at)
            uses[n] += 1
        if kind == "shell" and (prog := _program(shell_command(s.call) or "")):
            first.setdefault(prog, at)
            programs[prog] += 1
    ranked = [n for n, _ in sorted(uses.items(), key=lambda kv: (-kv[1], kv[0]))][:MAX_TOOLS]
    ranked += [p for p, c in sorted(programs.items(), key=lambda kv: (-kv[1], kv[0]))
               if c >= 2][:MAX_PROGRAMS]
    return _keep([_draft("tools", [n], EXACT, first[n], "tool in use") for n in ranked])


def _program(command: str) -> str | None:
    """`program subcommand` of a command line's first real command (after `cd X &&` and VAR=value)."""
    lines = command.strip().splitlines()
    for part in re.split(r"&&|\|\||;|\|", lines[0] if lines else ""):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        words = [w for w in words if not re.match(r"^\w+=", w)]
        if not words:
            continue
        prog = normalize_name(words[0].rsplit("/", 1)[-1])
        if prog in _TRIVIAL_PROGRAMS:
            continue
        sub = words[1] if len(words) > 1 and _SUBCOMMAND.match(words[1]) else None
        return f"{prog} {sub}" if sub else prog
    return None
