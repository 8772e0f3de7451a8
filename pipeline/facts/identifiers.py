"""Exact identifiers worth keeping verbatim: paths, commands, commit hashes, branches, worktrees,
issue ids, test counts and URLs. A summary that paraphrases these loses them; each list is newest first.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..core.model import Message
from ..core.toolkinds import call_path, tool_kind
from .calls import tool_calls
from .files import file_activity, running_cwds
from .fileviews import command_output, edit_steps, numbered_lines, patch_text
from .meta import message_branch
from .requests import user_message_flags
from .git import COMMIT_RE, GIT_LITERALS, PUSH_NEW_RE, PUSH_RANGE_RE, may_match
from .reading import TestRun, test_runs
from .shell import HEREDOC_RE, first_line, simple_commands
from .text import strip_reminders, trim

# How many distinct recent commands to keep by default: the verification workflow (build, test,
# lint, commit), tracker and sync commands, and the one-off commands of a long session. The summary
# packs by value per token, so a generous list costs nothing when the budget is tight.
DEFAULT_MAX_COMMANDS = 40
# A command line is kept whole up to this length: long `git add` lists and chained commands carry
# their informative part after the first 200 characters.
MAX_COMMAND_CHARS = 400
# Names defined in edit and write bodies kept, newest first.
MAX_SYMBOLS = 60
# Manifest scripts kept (each cut to MAX_SCRIPT_CHARS): a project's test, build and lint entries.
MAX_SCRIPTS = 12
MAX_SCRIPT_CHARS = 120
# Commands that only look at things; the commands worth restating are the ones that do something.
LOOK_ONLY = {"ls", "cat", "head", "tail", "pwd", "echo", "wc", "less", "more", "tree", "which", "file", "stat"}

COMMIT_WORD_RE = re.compile(r"\bcommit\s+([0-9a-f]{7,40})\b")
ONELINE_RE = re.compile(r"^([0-9a-f]{7,12}) \S", re.M)
BRANCH_RE = re.compile(r"^On branch (\S+)", re.M)
WORKTREE_LIST_RE = re.compile(r"^(/\S+)\s+[0-9a-f]{7,40} \[([^\]]+)\]", re.M)
JIRA_RE = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*[A-Z][A-Z0-9]*-\d+)(?![\w-])")
# Upper-case words with a number that are standards, not issue keys.
NOT_ISSUE_KEYS = {"UTF", "ISO", "SHA", "MD", "AES", "RFC", "HTTP", "TLS", "SSL", "WCAG", "PEP", "ES", "X"}
# `cd DIR && ` (or `;`) at the start of a command: where, not what.
CD_PREFIX_RE = re.compile(r"""^cd\s+(?:"[^"]*"|'[^']*'|\S+)\s*(?:&&|;)\s*""")
URL_RE = re.compile(r"https?://[^\s<>()\[\]\"'`]+")
# Issue tracker commands whose arguments are issue ids (beads, GitHub, GitLab, Jira, Linear).
TRACKERS = {"bd", "beads", "br", "gh", "glab", "jira", "linear"}
# Names a code change defines: functions, classes, constants, events and data attributes. They exist
# only inside edit and write bodies, which compaction drops.
SYMBOL_RES = (
    re.compile(r"\b(?:def|defp|defmacro|defmodule|function|class|interface|struct|enum|trait|fn|func|const|let|var|type)"
               r"\s+([A-Za-z_][\w.]*[\w])"),
    re.compile(r"""\b(?:pushEvent|handle_event|phx-click|phx-hook|emit|dispatchEvent)\W{1,4}["']([\w:-]{3,})["']"""),
    re.compile(r"\b(data-[a-z][\w-]+)"),
)
# Names too generic to identify anything.
COMMON_SYMBOLS = {"self", "this", "init", "main", "test", "run", "get", "set", "new", "data", "value", "result",
                  "render", "mount", "props", "state", "index", "item", "items", "name", "error", "err", "i", "x",
                  "handle_event", "handle_info", "handle_call", "handle_cast", "handle_params", "terminate",
                  "setup", "describe", "constructor", "__init__", "setUp", "tearDown"}
# A literal each scanning pattern cannot match without: a substring test (in C) decides for most texts
# and outputs that the pattern's scan would find nothing.
REQUIRED: dict[re.Pattern[str], str] = {
    **GIT_LITERALS, BRANCH_RE: "On branch ", WORKTREE_LIST_RE: " [", COMMIT_WORD_RE: "commit", URL_RE: "://",
    JIRA_RE: "-",
}
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
    symbols: tuple[str, ...] = ()  # names an edit or write defined (facts that live only in edit bodies)
    # Scripts a project manifest the agent read declares (`test: vitest run` from package.json): how
    # this project runs its tests and builds, which the agent would otherwise look up again.
    scripts: tuple[str, ...] = ()

    @classmethod
    def empty(cls) -> Identifiers:
        """No identifiers seen yet (a session before its first message)."""
        return cls(None, (), (), (), (), (), (), (), ())


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


def _may_match(pattern: re.Pattern[str], text: str) -> bool:
    """False when `text` lacks the literal `pattern` needs (REQUIRED), so it cannot match."""
    return may_match(pattern, text, REQUIRED)


def _hex_ok(value: str) -> bool:
    """A hash-like token: hex with both a digit and a letter (so words and numbers are not hashes)."""
    return bool(re.search(r"\d", value)) and bool(re.search(r"[a-f]", value))


def identifiers(messages: Sequence[Message], *, max_commands: int = DEFAULT_MAX_COMMANDS,
                runs: Sequence[TestRun] | None = None) -> Identifiers:
    """The exact identifiers the messages show, each list newest first. `runs`: the test runs already
    read from them (the ledger's progress reader), so their outputs are not read again."""
    branches, worktrees, hashes = _Newest(), _Newest(), _Newest()
    issues, commands, urls = _Newest(), _Newest(), _Newest()
    prefixes: set[str] = set()
    cwd: str | None = None
    texts: list[tuple[str, int]] = []  # prose and commands where issue ids and URLs are looked for

    cwds: dict[str, int] = {}
    typed = user_message_flags(messages)
    for i, (m, cwd) in enumerate(zip(messages, running_cwds(messages))):
        if cwd:
            cwds[cwd] = i
        branches.add(message_branch(m), i)
        if typed[i] or m.role == "assistant":
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
            commands.add(command_gist(rec.command), i)
        for w in words:
            _from_words(w, i, branches, worktrees, issues, prefixes)
        # Each pattern scans an output only when its literal is there: most outputs hold none of them.
        if _may_match(BRANCH_RE, out):
            branches.extend(BRANCH_RE.findall(out), i)
        if _may_match(COMMIT_RE, out):
            for cm in COMMIT_RE.finditer(out):
                hashes.add(cm.group(2), i)
                branches.add(cm.group(1), i)
                texts.append((cm.group(3), i))
        if _may_match(PUSH_RANGE_RE, out):
            for pm in PUSH_RANGE_RE.finditer(out):
                hashes.add(pm.group(1), i)
                branches.add(pm.group(2), i)
        if _may_match(PUSH_NEW_RE, out):
            branches.extend((nm.group(1) for nm in PUSH_NEW_RE.finditer(out)), i)
        if _may_match(WORKTREE_LIST_RE, out):
            for path, branch in WORKTREE_LIST_RE.findall(out):
                worktrees.add(path, i)
                branches.add(branch, i)
        if line.startswith("git log"):
            hashes.extend((h for h in ONELINE_RE.findall(out) if _hex_ok(h)), i)
        if _may_match(COMMIT_WORD_RE, out):
            hashes.extend((h for h in COMMIT_WORD_RE.findall(out) if _hex_ok(h)), i)

    for text, i in texts:
        if _may_match(COMMIT_WORD_RE, text):
            hashes.extend((h for h in COMMIT_WORD_RE.findall(text) if _hex_ok(h)), i)
        if _may_match(URL_RE, text):
            urls.extend((u.rstrip(".,;:!?") for u in URL_RE.findall(text)), i)
        if not _may_match(JIRA_RE, text):
            continue  # a tracker prefix's id holds the same dash
        issues.extend((k for k in JIRA_RE.findall(text) if k.split("-")[0] not in NOT_ISSUE_KEYS), i)
        for prefix in sorted(prefixes):
            if prefix + "-" in text:  # the literal the prefix's pattern opens with
                issues.extend(re.findall(rf"(?<![\w/-]){re.escape(prefix)}-[a-z0-9]+(?:\.\d+)*\b", text), i)
    # A working directory inside a worktree names it; a subdirectory of another cwd does not.
    for path, i in cwds.items():
        if "worktree" in path and not any(path.startswith(o.rstrip("/") + "/") for o in cwds):
            worktrees.add(path, i)

    symbols = _Newest()
    for rec in tool_calls(messages):
        if rec.succeeded and rec.kind in ("edit", "write"):
            symbols.extend(_defined(rec.call.input), rec.index)
    scripts = _Newest()
    for rec in tool_calls(messages):
        if rec.succeeded and rec.kind == "read":
            scripts.extend(manifest_scripts(call_path(rec.call) or "", rec.output), rec.index)
    summaries = _Newest()
    for run in test_runs(messages) if runs is None else runs:
        summaries.add(run.summary, run.index)
    return Identifiers(cwd, branches.newest_first(), worktrees.newest_first(), hashes.newest_first(),
                       issues.newest_first(), tuple(f.path for f in file_activity(messages)),
                       commands.newest_first(max_commands), summaries.newest_first(), urls.newest_first(),
                       symbols.newest_first(MAX_SYMBOLS), scripts.newest_first(MAX_SCRIPTS))


def manifest_scripts(path: str, output: str) -> list[str]:
    """`name: command` for each script a package.json read declares ([] for other files, or a
    partial or unparsable read)."""
    if posixpath.basename(path) != "package.json":
        return []
    body = command_output(output)  # without a harness's wrapper or header (Codex's exit code, wall time)
    if body is None:
        return []
    output = body
    lines = numbered_lines(output)
    text = "\n".join(lines[n] for n in sorted(lines)) if lines else output
    try:
        data = json.loads(text)
    except ValueError:
        return []
    found = data.get("scripts") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return []
    return [f"{name}: {trim(cmd, MAX_SCRIPT_CHARS)}" for name, cmd in found.items()
            if isinstance(name, str) and isinstance(cmd, str)][:MAX_SCRIPTS]


def _defined(inp: Mapping[str, Any]) -> list[str]:
    """Names a write's content or an edit's new text defines that its old text did not."""
    new_texts: list[str] = []
    old_texts: list[str] = []
    for key in ("content", "file_text", "new_string", "new_str", "contents"):
        if isinstance(inp.get(key), str):
            new_texts.append(inp[key])
    for key in ("old_string", "old_str"):
        if isinstance(inp.get(key), str):
            old_texts.append(inp[key])
    if isinstance(inp.get("edits"), list):
        for e in inp["edits"]:
            if isinstance(e, dict):
                new_texts += [e[k] for k in ("new_string", "new_str") if isinstance(e.get(k), str)]
                old_texts += [e[k] for k in ("old_string", "old_str") if isinstance(e.get(k), str)]
    if patch_text(dict(inp)) is not None:  # an apply_patch patch: its hunks' new and old texts
        for old_text, new_text, _ in edit_steps(dict(inp)) or ():
            new_texts.append(new_text)
            old_texts.append(old_text)
    old = "\n".join(old_texts)
    out: list[str] = []
    for text in new_texts:
        for pattern in SYMBOL_RES:
            for name in pattern.findall(text):
                if _distinctive(name) and name not in old and name not in out:
                    out.append(name)
    return out


def _distinctive(name: str) -> bool:
    """A name that identifies something: compound (snake, camel, dotted, dashed) or long, not a
    framework callback or a loop variable."""
    if name.lower() in COMMON_SYMBOLS or len(name) < 4:
        return False
    return bool(re.search(r"[_.-]|[a-z][A-Z]", name)) or len(name) >= 10


def command_gist(command: str, limit: int = MAX_COMMAND_CHARS) -> str:
    """A command as worth restating: its command lines (heredoc bodies left out) joined with " ; ",
    a leading `cd DIR &&` dropped (the cwd is listed once), cut at a word boundary to `limit`."""
    lines: list[str] = []
    heredoc_end: str | None = None
    body_seen = False
    for raw in command.splitlines():
        stripped = raw.strip()
        if heredoc_end is not None:
            if stripped == heredoc_end:
                heredoc_end = None
            elif stripped and not body_seen:  # a heredoc's first line (a commit subject) names it
                lines[-1] += f" {stripped}"
                body_seen = True
            continue
        if not stripped:
            continue
        lines.append(stripped)
        m = HEREDOC_RE.search(stripped)
        if m:
            heredoc_end, body_seen = m.group(2), False
    text = " ; ".join(lines) if lines else command.strip()
    text = CD_PREFIX_RE.sub("", text, count=1) or text
    return trim(" ".join(text.split()), limit)


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


# Programs whose runs are shown elsewhere (tracker updates, commits) or only plumb output: not a
# command form worth naming.
FORM_SKIP = LOOK_ONLY | {"cd", "grep", "rg", "sed", "awk", "sort", "uniq", "xargs", "tee", "true", "false",
                         "sleep", "export", "source", ".", "set", "test", "["}
# `git` and tracker subcommands that the summary already shows as commits and tracker updates.
FORM_SHOWN_ELSEWHERE = {("git", "add"), ("git", "commit"), ("git", "log"), ("git", "status"), ("git", "diff"),
                        ("git", "show")}
# Programs that run another tool named by their next word.
RUNNERS = {"npm", "npx", "uv", "uvx", "poetry", "pipx", "bundle", "pnpm", "yarn", "bunx", "cargo", "go", "dotnet"}
# A form keeps at most this many flags (a long flag list is one-off, not a workflow).
MAX_FORM_FLAGS = 3
# Flags and subcommands are short words; anything longer is an argument.
FORM_WORD_RE = re.compile(r"^[A-Za-z][\w.:-]{0,40}$")


def command_form(command: str) -> list[str]:
    """The forms of a command line: each simple command as program, subcommand and flags, without
    its file arguments, values and output plumbing (`mix test test/x_test.exs 2>&1 | tail -5` ->
    `mix test`). What a workflow repeats is the form; the arguments change from run to run."""
    forms: list[str] = []
    for sc in simple_commands(first_line(command)):
        words = list(sc.words)
        if not words or words[0] in FORM_SKIP or "/" in words[0] and not words[0].startswith("./"):
            continue
        form = [words[0]]
        rest = words[1:]
        if words[0].startswith("python") and len(rest) > 1 and rest[0] == "-m":
            form, rest = form + rest[:2], rest[2:]  # `python -m pytest`: the module is the program
        elif words[0] in RUNNERS and rest and not rest[0].startswith("-"):
            form, rest = form + rest[:1], rest[1:]  # `npx vitest`, `uv run pytest`: the tool is run
            if form[-1] == "run" and rest and not rest[0].startswith("-"):
                form, rest = form + rest[:1], rest[1:]
        if rest and not rest[0].startswith("-") and FORM_WORD_RE.match(rest[0]):
            form.append(rest[0])
            rest = rest[1:]
        if len(form) > 1 and (form[0], form[1]) in FORM_SHOWN_ELSEWHERE:
            continue
        if form[0] in TRACKERS and len(form) > 1 and form[1] in ("show", "update", "close", "create"):
            continue
        flags = [w.split("=", 1)[0] for w in rest if w.startswith("-") and len(w) > 1 and w != "--"]
        form += flags[:MAX_FORM_FLAGS]
        text = " ".join(form)
        if text not in forms:
            forms.append(text)
    return forms


def command_forms(commands: Sequence[str]) -> list[tuple[str, int]]:
    """(form, how many distinct commands used it) over `commands` (newest first, as `Identifiers`
    lists them), most used first and then newest: the session's working commands (its build, test,
    lint and sync steps), short enough to name all of them."""
    counts: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for n, command in enumerate(commands):
        for form in command_form(command):
            counts[form] = counts.get(form, 0) + 1
            first_seen.setdefault(form, n)
    return sorted(counts.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))
