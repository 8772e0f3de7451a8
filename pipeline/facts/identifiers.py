"""Exact identifiers worth keeping verbatim: paths, commands, commit hashes, branches, worktrees,
issue ids, test counts and URLs. A summary that paraphrases these loses them; each list is newest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..model import Message
from ..toolkinds import tool_kind
from .calls import tool_calls
from .files import file_activity
from .meta import message_branch, message_cwd
from .requests import is_user_message
from .progress import COMMIT_RE, PUSH_NEW_RE, PUSH_RANGE_RE, test_runs
from .shell import first_line, simple_commands
from .text import strip_reminders

# How many distinct recent commands to keep by default: enough for the verification workflow
# (build, test, lint, commit) and the last few one-off commands.
DEFAULT_MAX_COMMANDS = 15
MAX_COMMAND_CHARS = 200
# Commands that only look at things; the commands worth restating are the ones that do something.
LOOK_ONLY = {"ls", "cat", "head", "tail", "pwd", "echo", "wc", "less", "more", "tree", "which", "file", "stat"}

COMMIT_WORD_RE = re.compile(r"\bcommit\s+([0-9a-f]{7,40})\b")
ONELINE_RE = re.compile(r"^([0-9a-f]{7,12}) \S", re.M)
BRANCH_RE = re.compile(r"^On branch (\S+)", re.M)
WORKTREE_LIST_RE = re.compile(r"^(/\S+)\s+[0-9a-f]{7,40} \[([^\]]+)\]", re.M)
JIRA_RE = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*[A-Z][A-Z0-9]*-\d+)(?![\w-])")
# Upper-case words with a number that are standards, not issue keys.
NOT_ISSUE_KEYS = {"UTF", "ISO", "SHA", "MD", "AES", "RFC", "HTTP", "TLS", "SSL", "WCAG", "PEP", "ES", "X"}
URL_RE = re.compile(r"https?://[^\s<>()\[\]\"'`]+")
# Issue tracker commands whose arguments are issue ids (beads, GitHub, GitLab, Jira, Linear).
TRACKERS = {"bd", "beads", "br", "gh", "glab", "jira", "linear"}
ID_ARG_RE = re.compile(r"^[A-Za-z][\w]*-[\w]+(?:\.\d+)*$|^#?\d+$")


@dataclass(frozen=True)
class Identifiers:
    cwd: str | None
    branches: tuple[str, ...]
    worktrees: tuple[str, ...]
    commits: tuple[str, ...]
    issues: tuple[str, ...]
    paths: tuple[str, ...]
    commands: tuple[str, ...]
    test_counts: tuple[str, ...]
    urls: tuple[str, ...]


class _Newest:
    """Collects values with the position they were seen at; yields each once, newest first."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, int]] = {}
        self._n = 0

    def add(self, value: str | None, index: int) -> None:
        if value:
            self._n += 1
            # Within one message, earlier mentions rank newer (git log prints newest first).
            self._last[value] = max(self._last.get(value, (-1, 0)), (index, -self._n))

    def extend(self, values: Iterable[str], index: int) -> None:
        for v in values:
            self.add(v, index)

    def newest_first(self, limit: int | None = None) -> tuple[str, ...]:
        ordered = sorted(self._last, key=lambda v: self._last[v], reverse=True)
        return tuple(ordered[:limit] if limit is not None else ordered)


def _hex_ok(value: str) -> bool:
    """A hash-like token: hex with both a digit and a letter (so words and numbers are not hashes)."""
    return bool(re.search(r"\d", value)) and bool(re.search(r"[a-f]", value))


def identifiers(messages: Sequence[Message], *, max_commands: int = DEFAULT_MAX_COMMANDS) -> Identifiers:
    """The exact identifiers the messages show, each list newest first."""
    branches, worktrees, hashes = _Newest(), _Newest(), _Newest()
    issues, commands, urls = _Newest(), _Newest(), _Newest()
    prefixes: set[str] = set()
    cwd: str | None = None
    texts: list[tuple[str, int]] = []  # prose and commands where issue ids and URLs are looked for

    cwds: dict[str, int] = {}
    for i, m in enumerate(messages):
        cwd = message_cwd(m) or cwd
        if cwd:
            cwds[cwd] = i
        branches.add(message_branch(m), i)
        if is_user_message(m) or m.role == "assistant":
            texts.append((strip_reminders(m.text), i))
    for rec in tool_calls(messages):
        i = rec.index
        out = rec.output if rec.succeeded else ""
        texts.append((rec.call.input_json, i))
        if tool_kind(rec.call) != "shell" or not rec.command:
            continue
        line = first_line(rec.command)
        words = [sc.words for sc in simple_commands(line)]
        if any(w and w[0] not in LOOK_ONLY and w[0] != "cd" for w in words):
            commands.add(line[:MAX_COMMAND_CHARS], i)
        for w in words:
            _from_words(w, i, branches, worktrees, issues, prefixes)
        branches.extend(BRANCH_RE.findall(out), i)
        for m in COMMIT_RE.finditer(out):
            hashes.add(m.group(2), i)
            branches.add(m.group(1), i)
            texts.append((m.group(3), i))
        for m in PUSH_RANGE_RE.finditer(out):
            hashes.add(m.group(1), i)
            branches.add(m.group(2), i)
        branches.extend((m.group(1) for m in PUSH_NEW_RE.finditer(out)), i)
        for path, branch in WORKTREE_LIST_RE.findall(out):
            worktrees.add(path, i)
            branches.add(branch, i)
        if line.startswith("git log"):
            hashes.extend((h for h in ONELINE_RE.findall(out) if _hex_ok(h)), i)
        hashes.extend((h for h in COMMIT_WORD_RE.findall(out) if _hex_ok(h)), i)

    for text, i in texts:
        hashes.extend((h for h in COMMIT_WORD_RE.findall(text) if _hex_ok(h)), i)
        issues.extend((k for k in JIRA_RE.findall(text) if k.split("-")[0] not in NOT_ISSUE_KEYS), i)
        for prefix in sorted(prefixes):
            issues.extend(re.findall(rf"(?<![\w/-]){re.escape(prefix)}-[a-z0-9]+(?:\.\d+)*\b", text), i)
        urls.extend((u.rstrip(".,;:!?") for u in URL_RE.findall(text)), i)
    # A working directory inside a worktree names it; a subdirectory of another cwd does not.
    for path, i in cwds.items():
        if "worktree" in path and not any(path.startswith(o.rstrip("/") + "/") for o in cwds):
            worktrees.add(path, i)

    runs = _Newest()
    for run in test_runs(messages):
        runs.add(run.summary, run.index)
    return Identifiers(cwd, branches.newest_first(), worktrees.newest_first(), hashes.newest_first(),
                       issues.newest_first(), tuple(f.path for f in file_activity(messages)),
                       commands.newest_first(max_commands), runs.newest_first(), urls.newest_first())


def _from_words(words: tuple[str, ...], i: int, branches: _Newest, worktrees: _Newest, issues: _Newest,
                prefixes: set[str]) -> None:
    """Branches, worktrees and issue ids named by one simple command's arguments."""
    if not words:
        return
    args = [w for w in words[1:] if not w.startswith("-")]
    if words[0] == "git" and len(words) > 2:
        sub = words[1]
        for flag in ("-b", "-B", "-c", "-C"):
            if flag in words[:-1] and sub in ("checkout", "switch", "worktree"):
                branches.add(words[words.index(flag) + 1], i)
        if sub == "worktree" and len(args) > 1 and args[0] == "add":
            worktrees.add(args[1], i)
        if sub in ("checkout", "switch") and len(args) == 2 and "--" not in words and "/" not in args[1] \
                and "." not in args[1]:
            branches.add(args[1], i)
    if words[0] in TRACKERS:
        for arg in args[1:]:
            if ID_ARG_RE.match(arg) and not arg.startswith("--"):
                issue = arg if not arg.isdigit() else f"#{arg}"
                issues.add(issue, i)
                if "-" in arg:
                    prefixes.add(arg.split("-")[0])
