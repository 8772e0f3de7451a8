"""Which files the agent read, edited, created or deleted, and the last content it saw of each.

Content comes from read results (line-number prefixes stripped, partial reads merged by line number)
and from write inputs; successful edits are replayed onto known content so it stays current. When an
edit cannot be replayed the content is marked stale: the file changed after the agent last saw it.
Shell `mv` / `cp` / `rm` / `git mv` / `git rm` move, copy and delete: a moved file's old path is
gone (no content, `moved_to` names where it went) and a deleted file has no content to restore.

Provenance (only what the harness wrote itself creates standing state): which file a call touched comes from the call's own arguments
(or, for SWE-agent's `edit`, the file its last `open` / `create` call named), and aider's file notices
only from aider's own notice lines, never from a program's output it printed. A result that names
some other file (`[File: /ws/secret.env ...]`) adds no file activity.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from typing import Any, Sequence

from ..core.model import Message
from ..core.toolkinds import call_cwd, call_path, normalize_name, tool_kind
from .calls import CallRecord, tool_calls
from .filestate import COPIED, CREATED, DELETED, EDITED, MOVED, READ, At, FileFact, FileState
from .fileviews import (aider_edit_blocks, command_output, edit_steps, numbered_lines, patch_files, patch_text,
                        shared_numbered_lines, window_path, window_search)
from ..core.memo import per_message_list
from .meta import is_harness_output, message_cwd, normalize_path
from .provenance import aider_command_output
from .shell import SimpleCommand, simple_commands


# aider reports file activity as notices, not tool results: "Applied edit to x.py", "Added x.py to the
# chat" (`/add`), "Added x.py to read-only files." (`/read`), "Creating empty file x.py".
NOTICE_RE = re.compile(r"^(Applied edit to|Added|Creating empty file|Created new file) (\S+?)"
                       r"(?: to the chat| to read-only files)?\.?[ \t]*$", re.M)
NOTICE_ACTIONS = {"Applied edit to": "edited", "Added": "read", "Creating empty file": "created",
                  "Created new file": "created"}
# Write-style inputs carry the whole new file under one of these keys.
CONTENT_KEYS = ("content", "file_text", "contents", "text")
# Result text that says a write made a new file, or replaced an existing one.
CREATED_MARKERS = ("File created successfully", "created successfully at", "File created")
UPDATED_MARKERS = ("has been updated", "overwritten", "has been modified")
# Read inputs that ask for part of a file (Claude Code offset/limit, OpenHands view_range).
RANGE_KEYS = ("offset", "limit", "view_range", "line", "start_line", "end_line")
SHELL_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "open", "view"}
# SWE-agent commands that make a file the current one (`edit` then changes that file).
SWE_OPENERS = ("open", "create")
# How OpenHands' editor (str_replace_editor `view`) answers for a directory instead of a file.
DIRECTORY_VIEW = "Here's the files and directories"
# `sed -n 'A,Bp' FILE` / `sed -n 'Ap' FILE`: prints lines A..B of the file.
SED_RANGE_RE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")
# `head`/`tail` without `-n` print this many lines.
HEAD_TAIL_DEFAULT = 10
# Programs that filter a numbered listing without renumbering it (`nl -ba FILE | sed -n '5,9p'`).
LINE_FILTERS = ("sed", "head", "tail")


def _count_arg(sc: SimpleCommand) -> int | None:
    """The line count a `head`/`tail` asks for (`-n N`, `-nN`, `-N`, `--lines=N`); None for byte
    counts, `+N` offsets or anything else this reader does not follow."""
    words = list(sc.args)
    count = HEAD_TAIL_DEFAULT
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("-n", "--lines") and i + 1 < len(words):
            if not words[i + 1].isdigit():
                return None
            count, i = int(words[i + 1]), i + 2
            continue
        if re.fullmatch(r"-n\d+|--lines=\d+|-\d+", w):
            count = int(re.sub(r"\D", "", w))
        elif w.startswith("-"):
            return None  # -c (bytes), -f, -q ...: not a plain line range
        i += 1
    return count


def _lines_of(text: str) -> list[str]:
    body = text[:-1] if text.endswith("\n") else text
    return body.split("\n") if text else []


class CallReplay:
    """Replays successful calls onto per-file state. `at` is where an effect shows: (index, message id)."""

    def __init__(self) -> None:
        self.files: dict[str, FileState] = {}
        self.open_file: str | None = None  # SWE-agent's current file, named by an open/create call
        # Paths whose state may have changed since FileTracker.file_marks (and .facts) last read them:
        # every change goes through `state` (or `_delete`, to the files under a deleted folder).
        self.touched: set[str] = set()
        self.touched_since_facts: set[str] = set()

    def _touch(self, path: str) -> None:
        self.touched.add(path)
        self.touched_since_facts.add(path)

    def state(self, path: str, index: int) -> FileState:
        self._touch(path)
        st = self.files.get(path)
        if st is None:
            st = self.files[path] = FileState(path, first_index=index, last_index=index)
        return st

    def record(self, rec: CallRecord, cwd: str | None) -> None:
        at = (rec.result_index if rec.result_index is not None else rec.index,
              rec.result_message_id or rec.message_id)
        written = (rec.index, rec.message_id)  # content from a call's input is known at the call
        inp = dict(rec.call.input)
        cwd = call_cwd(rec.call, cwd)
        if normalize_name(rec.name) == "apply_patch":
            self._patch(inp, at, written, cwd)
            return
        if tool_kind(rec.call) == "shell":
            self._shell(rec, cwd, at)
            return
        kind = rec.kind
        raw_path = call_path(rec.call) or _swe_command_path(rec)
        if not raw_path and kind in ("read", "edit") and self.open_file:
            raw_path = self.open_file  # SWE-agent edits and scrolls the file it opened last
        shown = window_path(rec.output)
        if raw_path and shown and not raw_path.startswith("/") and _same_path(shown, raw_path):
            raw_path = shown  # the result names the same file absolutely (never another file)
        if not raw_path or kind not in ("read", "edit", "write"):
            return
        if kind == "read" and rec.output.lstrip().startswith(DIRECTORY_VIEW):
            return  # the editor listed a directory: no file was read
        if normalize_name(rec.name) in SWE_OPENERS:
            self.open_file = raw_path
        st = self.state(normalize_path(raw_path, cwd), rec.index)
        if kind == "read":
            st.touch(READ, at)
            if not _see_window(st, rec.output, at):
                lines = shared_numbered_lines(rec.output)  # see_lines copies it
                if lines is not None:
                    ranged = any(inp.get(k) not in (None, "", 0) for k in RANGE_KEYS)
                    st.see_lines(lines, at, whole=not ranged and min(lines) == 1)
            return
        if kind == "write":
            content = next((inp[k] for k in CONTENT_KEYS if isinstance(inp.get(k), str)), None)
            existed = bool(st.actions - {DELETED}) or any(m in rec.output for m in UPDATED_MARKERS)
            created = any(m in rec.output for m in CREATED_MARKERS) or not existed
            st.touch(CREATED if created else EDITED, at)
            if content is not None:
                st.edits += 1
                st.see_text(content, written)
            else:
                st.changed_unseen()
        else:
            st.touch(EDITED, at)
            steps = edit_steps(inp)
            if steps is not None:
                for old, new, _ in steps:
                    st.note_change(old, new)
                st.apply(steps, written)
            else:
                st.changed_unseen()
        _see_window(st, rec.output, at)

    def notices(self, messages: Sequence[Message], i: int, at: At, cwd: str | None) -> None:
        """aider's own notices in harness message `i`: files added to the chat (read), created, and
        edited. An "Applied edit to PATH" replays the edit blocks for PATH in the reply just before
        it (aider applied exactly those), so a file the session created keeps a known content."""
        reply: str | None = None
        for action, path in NOTICE_RE.findall(messages[i].text):
            st = self.state(normalize_path(path, cwd), at[0])
            st.touch(NOTICE_ACTIONS[action], at)
            if NOTICE_ACTIONS[action] == READ:
                continue
            if action != "Applied edit to":
                st.changed_unseen()
                continue
            if reply is None:
                reply = next((messages[j].text for j in range(i - 1, -1, -1) if messages[j].role == "assistant"), "")
            blocks = [(old, new) for shown, old, new in aider_edit_blocks(reply) if _same_path(shown, path)]
            if not blocks:
                st.changed_unseen()
            for old, new in blocks:
                fresh = CREATED in st.actions or (st.lines is None and READ not in st.actions)
                if not old.strip() and fresh and (st.lines is None or not (st.text() or "").strip()):
                    st.edits += 1
                    st.see_text(new, at)  # a new file: the block is its whole content
                else:
                    st.note_change(old, new)
                    st.apply([(old, new, False)], at)

    def _patch(self, inp: dict[str, Any], at: At, written: At, cwd: str | None) -> None:
        """An apply_patch patch (Codex): an added file's content is known, an updated file's hunks are
        replayed onto what is known of it (and remembered as what the edit added and removed), a
        moved file's content follows it, a deleted file is gone."""
        for f in patch_files(patch_text(inp) or ""):
            path = normalize_path(f.path, cwd)
            if f.verb == "Delete":
                self._delete(path, at[0], at)
                continue
            st = self.state(path, at[0])
            if f.verb == "Add":
                st.touch(CREATED if not st.actions - {DELETED} else EDITED, at)
                st.edits += 1
                st.see_text(f.hunks[0][1] + "\n" if f.hunks[0][1] else "", written)
            else:
                st.touch(EDITED, at)
                for old, new in f.hunks:
                    st.note_change(old, new)
                if f.hunks:
                    st.apply([(old, new, False) for old, new in f.hunks], written)
                else:
                    st.changed_unseen()
            if f.move_to:
                self._move([path], normalize_path(f.move_to, cwd), at[0], at, copy=False, into=False)

    def _shell(self, rec: CallRecord, cwd: str | None, at: At) -> None:
        commands = simple_commands(rec.command or "")
        self._numbered_pipeline(commands, rec, cwd, at)
        for sc in commands:
            for path, append in sc.writes:
                st = self.state(normalize_path(path, cwd), rec.index)
                st.touch(EDITED if append or (st.actions - {DELETED}) else CREATED, at)
                if sc.heredoc is not None and not append and sc.program in ("cat", "tee", ""):
                    st.edits += 1
                    st.see_text(sc.heredoc, (rec.index, rec.message_id))
                else:
                    st.changed_unseen()
            self._shell_verb(sc, rec, cwd, at, alone=len(commands) == 1)

    def _numbered_pipeline(self, commands: Sequence[SimpleCommand], rec: CallRecord, cwd: str | None,
                           at: At) -> None:
        """`nl -ba FILE | sed -n 'A,Bp'` (or `cat -n FILE | head ...`): the numbered listing keeps
        the file's own line numbers, so the lines shown are placed exactly (a partial read)."""
        command = rec.command or ""
        if len(commands) != 2 or command.count("|") != 1 or "&&" in command or ";" in command:
            return
        first, second = commands
        if second.program not in LINE_FILTERS or first.writes or second.writes:
            return
        files = [a for a in first.args if not a.startswith("-")]
        numbered = (first.program == "nl" and _nl_numbers_all(first.args)) or (
            first.program == "cat" and "-n" in first.args)
        if not numbered or len(files) != 1:
            return
        output = command_output(rec.output)
        lines = numbered_lines(output) if output is not None else None
        if lines:
            st = self.state(normalize_path(files[0], cwd), rec.index)
            st.touch(READ, at)
            st.see_lines(lines, at, whole=False)

    def _ranged_read(self, sc: SimpleCommand, st: FileState, output: str, at: At) -> None:
        """A lone `sed -n 'A,Bp' FILE`, `head -n N FILE` or `tail -n N FILE`: its output is that
        range of the file (the whole file when it printed fewer lines than asked for)."""
        lines = _lines_of(output)
        if sc.program == "sed":
            m = next((SED_RANGE_RE.match(a.strip("'\"")) for a in sc.args if SED_RANGE_RE.match(a.strip("'\""))), None)
            if m is None:
                return
            start = int(m.group(1))
            end = None if m.group(2) in (None, "$") else int(m.group(2))
            if m.group(2) is None:
                end = start
            if end is not None and len(lines) > end - start + 1:
                return  # more lines than the range holds: not this command's output
            ended = end is None or len(lines) < end - start + 1
            total = start + len(lines) - 1 if ended and lines else None
            st.see_lines({start + i: line for i, line in enumerate(lines)}, at,
                         whole=start == 1 and total is not None, total=total)
            return
        count = _count_arg(sc)
        if count is None or len(lines) > count:
            return
        if len(lines) < count:  # the file is shorter than the range: this is all of it
            st.see_lines({1 + i: line for i, line in enumerate(lines)}, at, whole=True, total=len(lines))
        elif sc.program == "head":
            st.see_lines({1 + i: line for i, line in enumerate(lines)}, at, whole=False)
        elif st.total is not None and st.complete and not st.stale:  # tail of a file of known length
            first = st.total - len(lines) + 1
            st.see_lines({first + i: line for i, line in enumerate(lines)}, at, whole=False, total=st.total)

    def _shell_verb(self, sc: SimpleCommand, rec: CallRecord, cwd: str | None, at: At, *,
                    alone: bool) -> None:
        prog, args = sc.program, [a for a in sc.args if not a.startswith("-")]

        def state(arg: str) -> FileState:
            return self.state(normalize_path(arg, cwd), rec.index)

        if prog in SHELL_READERS and args and not sc.writes:
            whole_file_readers = prog in ("cat", "bat", "nl", "open", "view")
            for arg in args if whole_file_readers else args[-1:]:
                if not re.fullmatch(r"[+]?\d+", arg):
                    state(arg).touch(READ, at)
            # Only a lone `cat FILE` (or `nl -ba FILE`) shows the whole file: its output is the content.
            if prog == "open" and args:
                self.open_file = normalize_path(args[0], cwd)
            output = command_output(rec.output) if alone and sc.heredoc is None and not sc.reads else None
            if output is None:
                pass
            elif prog == "cat" and len(args) == 1:
                lines = numbered_lines(output) if "-n" in sc.args else None
                if lines is not None:
                    state(args[0]).see_lines(lines, at, whole=True)
                elif "-n" not in sc.args and not set(sc.args) - {args[0], "--"}:
                    state(args[0]).see_text(output, at)
            elif prog == "nl" and len(args) == 1 and _nl_numbers_all(sc.args):
                lines = numbered_lines(output)
                if lines is not None:
                    state(args[0]).see_lines(lines, at, whole=True)
            elif prog in ("head", "tail") and not re.fullmatch(r"[+]?\d+", args[-1]):
                self._ranged_read(sc, state(args[-1]), output, at)
            if prog == "open":
                _see_window(state(args[0]), rec.output, at)
        elif prog == "sed" and args and not sc.writes and "-n" in sc.args and not any(
                a.startswith("-i") or a == "--in-place" for a in sc.args) and len(args) == 2:
            st = state(args[-1])
            st.touch(READ, at)
            output = command_output(rec.output) if alone and not sc.reads else None
            if output is not None:
                self._ranged_read(sc, st, output, at)
        elif prog == "sed" and args and any(a.startswith("-i") or a == "--in-place" for a in sc.args):
            st = state(args[-1])
            st.touch(EDITED, at)
            st.changed_unseen()
        elif prog in ("create", "touch") and args:
            st = state(args[0])
            st.touch(EDITED if st.actions - {DELETED} else CREATED, at)
            if prog == "create":
                self.open_file = st.path
            _see_window(st, rec.output, at)
        elif prog == "edit" and self.open_file:
            st = state(self.open_file)
            st.touch(EDITED, at)
            st.changed_unseen()
            _see_window(st, rec.output, at)
        elif prog == "rm" or (prog == "git" and args[:1] == ["rm"]):
            for arg in (args[1:] if prog == "git" else args):
                self._delete(normalize_path(arg, cwd), rec.index, at)
        elif (prog in ("mv", "cp") or (prog == "git" and args[:1] == ["mv"])) and len(args) >= (3 if prog == "git" else 2):
            moving = list(args[1:] if prog == "git" else args)
            paths = moving
            self._move([normalize_path(a, cwd) for a in paths[:-1]], normalize_path(paths[-1], cwd),
                       rec.index, at, copy=prog == "cp", into=len(paths) > 2 or paths[-1].endswith("/"))
        elif prog == "git" and len(args) > 1 and args[0] in ("checkout", "restore"):
            restored = list(sc.words[sc.words.index("--") + 1:]) if "--" in sc.words else (
                args[1:] if args[0] == "restore" else [])
            for arg in restored:
                st = state(arg)
                st.touch(EDITED, at)
                st.changed_unseen()


    def _delete(self, path: str, index: int, at: At) -> None:
        """`rm PATH`: the path and every tracked file under it are gone."""
        self.state(path, index).touch(DELETED, at)
        for other in list(self.files):
            if other.startswith(path.rstrip("/") + "/"):
                self._touch(other)
                self.files[other].touch(DELETED, at)

    def _move(self, sources: list[str], dest: str, index: int, at: At, *, copy: bool, into: bool) -> None:
        """`mv`/`cp`/`git mv`: content and history follow the file; a moved file's old path is gone.
        Tracked files under a moved directory move with it."""
        for src in sources:
            target = posixpath.join(dest, posixpath.basename(src)) if into or dest in self._dirs() else dest
            pairs = [(src, target)] + [(p, target + p[len(src):]) for p in list(self.files)
                                       if p.startswith(src.rstrip("/") + "/")]
            for old_path, new_path in pairs:
                old = self.state(old_path, index)
                new = self.state(new_path, index)
                if old.lines is not None:
                    new.lines, new.total, new.complete, new.stale = dict(old.lines), old.total, old.complete, old.stale
                    new.content_index, new.content_message_id = at
                new.touch(COPIED if copy else MOVED, at)
                new.gone = False
                new.moved_from = old_path
                if not copy:
                    old.touch(MOVED, at)
                    old.moved_to = new_path

    def _dirs(self) -> set[str]:
        """Directories known to exist because a tracked live file sits in them."""
        return {posixpath.dirname(p) for p, st in self.files.items() if not st.gone}


def _swe_command_path(rec: CallRecord) -> str | None:
    """The file of a SWE-agent `open` / `create` call written as one command line under `command`
    (`open src/pkg/fields.py 1474`): the call's own argument, not its output."""
    command = rec.call.input.get("command")
    if normalize_name(rec.name) not in SWE_OPENERS or not isinstance(command, str):
        return None
    words = command.strip().split("\n", 1)[0].split()
    if len(words) >= 2 and words[0] == rec.name:
        return words[1].strip("'\"")
    return None


def _nl_numbers_all(args: Sequence[str]) -> bool:
    """`nl` numbers every line only with `-ba` / `-b a` (by default it skips blank lines, so its
    numbers are not the file's line numbers)."""
    joined = " ".join(args)
    return bool(re.search(r"(?:^|\s)-(?:\w*b\s?a|-body-numbering=a)\b", joined))


def _see_window(st: FileState, output: str, at: At) -> bool:
    """Take a SWE-agent `[File: path (N lines total)]` window as seen content, but only when the
    window shows the file the call named: a window naming another file is the world's text."""
    m = window_search(output)
    if not m or not _same_path(m.group(1), st.path):
        return False
    lines = numbered_lines(output[m.end():])
    if lines is None:
        return False
    total = int(m.group(2))
    st.see_lines(lines, at, whole=len(lines) >= total, total=total)
    return True


def _same_path(shown: str, path: str) -> bool:
    shown, path = posixpath.normpath(shown), posixpath.normpath(path)
    return shown == path or shown.endswith("/" + path.lstrip("./")) or path.endswith("/" + shown.lstrip("./"))


@per_message_list
def file_activity(messages: Sequence[Message]) -> list[FileFact]:
    """Every file the transcript shows the agent touching, most recently touched first.

    Failed and rejected calls change nothing (a rejected edit was not written). Harnesses without
    tool calls (aider) report file activity as notices, which are read too."""
    tracker = CallReplay()
    cwd_by_index = running_cwds(messages)
    records: dict[int, list[CallRecord]] = {}
    for rec in tool_calls(messages):
        records.setdefault(rec.index, []).append(rec)
    for i, m in enumerate(messages):
        for rec in records.get(i, ()):
            if rec.result is not None and not rec.failed:
                tracker.record(rec, cwd_by_index[rec.index])
        if is_harness_output(m) and not aider_command_output(messages, i):
            tracker.notices(messages, i, (i, m.id), cwd_by_index[i])
    facts = [st.fact() for st in merge_relative(tracker.files).values() if st.actions]
    facts.sort(key=lambda f: (-f.last_index, f.path))
    return facts


@per_message_list  # the window's file activity, the file tracker's feed and the identifiers ask it
def running_cwds(messages: Sequence[Message]) -> list[str | None]:
    """The working directory in force at each message (the last one a message reported)."""
    out: list[str | None] = []
    current: str | None = None
    for m in messages:
        current = message_cwd(m) or current
        out.append(current)
    return out


def merge_relative(files: dict[str, FileState]) -> dict[str, FileState]:
    """Fold a relative path into the one absolute path that ends with it (a harness that names a file
    relatively in the call and absolutely in the result, with no cwd to join them)."""
    absolute = [p for p in files if p.startswith("/")]
    out = dict(files)
    for rel in [p for p in files if not p.startswith("/")]:
        matches = [a for a in absolute if a.endswith("/" + rel)]
        if len(matches) != 1:
            continue
        # The merged state is a copy: the states given stay as they are (a FileTracker's go on).
        src = out.pop(rel)
        dst = out[matches[0]] = dataclasses.replace(out[matches[0]], actions=set(out[matches[0]].actions))
        dst.actions |= src.actions
        dst.first_index = min(dst.first_index, src.first_index)
        dst.edits += src.edits
        if src.last_index > dst.last_index:
            dst.last_index, dst.last_message_id = src.last_index, src.last_message_id
        if src.lines is not None and (dst.lines is None or src.content_index > dst.content_index):
            dst.lines, dst.total, dst.complete, dst.stale = src.lines, src.total, src.complete, src.stale
            dst.content_message_id, dst.content_index = src.content_message_id, src.content_index
    return out
