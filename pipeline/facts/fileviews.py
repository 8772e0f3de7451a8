"""What a tool's output or an edit's input shows of a file: line-numbered listings (Claude Code,
`cat -n`, SWE-agent), SWE-agent's file window, the harness's wrapper around a shell command's own
output, aider's edit blocks, Codex's apply_patch patches, and the lines an edit adds. Pure readers of
one text or one input; the file tracker (files.py) decides what they mean for a file.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from .text import HEADER_LINE_RE, MAX_HEADER_LINES, OUTPUT_LABEL

# Line-numbered read formats: Claude Code `     1→text`, `cat -n` / OpenHands `     1\ttext`,
# SWE-agent `1:text`.
NUMBERED_LINE_RES = (
    re.compile(r"^\s*(\d+)→(.*)$"),
    re.compile(r"^\s*(\d+)\t(.*)$"),
    re.compile(r"^(\d+):(.*)$"),
)
# The same patterns over a whole text at once (one C scan, not a match per row): a row matches alone
# exactly where a line of the text matches; `^\s*` that starts on a blank line and runs on to the
# next matches what that next row matches alone.
NUMBERED_LINE_SCANS = tuple(re.compile(p.pattern, re.M) for p in NUMBERED_LINE_RES)
# SWE-agent's file window header: `[File: /path (94 lines total)]`.
SWE_WINDOW_RE = re.compile(r"^\[File: (.+?) \((\d+) lines total\)\]", re.M)
# The literal that header opens with: outputs without it are not searched line by line for it.
SWE_WINDOW_OPEN = "[File: "


def is_file_window(output: str) -> bool:
    """The output is an editor's window onto a file (SWE-agent's `[File: path (N lines total)]`):
    a file's content, which file activity decides about, not an observation of the work."""
    return SWE_WINDOW_OPEN in output and bool(SWE_WINDOW_RE.match(output.lstrip()))


# An edit gist longer than this is cut: it hints at the change, the file holds the rest.
GIST_CHARS = 120
GIST_LINES = 3


# A harness's wrapper around what a shell command printed. mini-swe-agent:
# `<returncode>N</returncode>\n<output>\n...\n</output>` (`<output_head>` when it cut the output);
# OpenHands appends `[The command completed with exit code N.]` and working-directory notes.
MINI_OUTPUT_RE = re.compile(r"\A\s*<returncode>(-?\d+)</returncode>\s*<output>\n?([\s\S]*?)\n?</output>\s*\Z")
MINI_CUT_MARKERS = ("<output_head>", "<elided_chars>", "<output_tail>")
HARNESS_TRAILER_RE = re.compile(
    r"\n?\[(?:The command completed with exit code (-?\d+)\.|Command finished with exit code (-?\d+)"
    r"|Current working directory: [^\]\n]*|Python interpreter: [^\]\n]*)\]\s*\Z")
OPENHANDS_CUT_MARKERS = ("[The command has no new output", "[Below was the output", "timed out")
# aider's edit blocks in the model's reply; aider applies them and says "Applied edit to PATH".
AIDER_BLOCK_RE = re.compile(r"^<{7} (?:SEARCH|ORIGINAL)[ \t]*\n([\s\S]*?)^={7}[ \t]*\n([\s\S]*?)^>{7} (?:REPLACE|UPDATED)[ \t]*$",
                            re.M)


# Codex's header lines that say the command has not finished or exited non-zero (its output is not
# a whole file then), and the note it writes first in an output it cut to max_output_tokens.
CODEX_EXIT_RE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$")
CODEX_RUNNING_RE = re.compile(r"^Process running with session ID (\d+)$")
CODEX_CUT_MARKER = "Warning: truncated output"
# Codex's apply_patch format: `*** Begin Patch`, per file `*** Add File: p` (+ lines), `*** Delete
# File: p`, or `*** Update File: p` (optional `*** Move to: q`) with `@@` hunks of ` `/`-`/`+` lines.
PATCH_BEGIN = "*** Begin Patch"
PATCH_FILE_RE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")
PATCH_MOVE_RE = re.compile(r"^\*\*\* Move to: (.+)$")
PATCH_END_LINES = ("*** End Patch", "*** End of File")


@dataclass(frozen=True)
class PatchFile:
    """One file of an apply_patch patch: what happens to it and its hunks as (old, new) texts (an
    added file: one hunk ("", its content))."""

    verb: str  # "Add", "Update" or "Delete"
    path: str
    move_to: str | None = None
    hunks: tuple[tuple[str, str], ...] = ()


def split_header(output: str) -> tuple[list[str], str] | None:
    """(header lines, body) of an output a harness wrote a metadata header above (Codex: `Chunk ID:
    ..`, `Wall time: ..`, `Process exited with code N`, ..., then `Output:`), or None when the text
    does not open with such a header. Only lines above the label are the harness's."""
    lines = output.split("\n", MAX_HEADER_LINES + 1)
    for n, line in enumerate(lines[:MAX_HEADER_LINES + 1]):
        if line.strip() == OUTPUT_LABEL:
            header = [x.strip() for x in lines[:n]]
            if n and all(HEADER_LINE_RE.match(x) for x in header):
                return header, "\n".join(lines[n + 1:])
            return None
        if not HEADER_LINE_RE.match(line.strip()):
            return None
    return None


def header_exit_code(header: list[str]) -> int | None:
    """The exit code a harness header reports (Codex's `Process exited with code N`, `Exit code: N`)."""
    for line in header:
        m = CODEX_EXIT_RE.match(line)
        if m:
            return int(m.group(1))
    return None


def patch_text(inp: dict[str, Any]) -> str | None:
    """The apply_patch patch among a call's inputs (Codex's `input`, or any string that opens with
    `*** Begin Patch`), if there is one."""
    for value in inp.values():
        if isinstance(value, str) and value.lstrip().startswith(PATCH_BEGIN):
            return value
        if isinstance(value, list):  # an older shell call: ["apply_patch", "*** Begin Patch ..."]
            found = next((v for v in value if isinstance(v, str) and v.lstrip().startswith(PATCH_BEGIN)), None)
            if found is not None:
                return found
    return None


def patch_files(patch: str) -> list[PatchFile]:
    """The files of an apply_patch patch, in order, each with its hunks."""
    out: list[PatchFile] = []
    verb, path, move_to = "", "", None
    hunks: list[tuple[str, str]] = []
    old: list[str] = []
    new: list[str] = []

    def end_hunk() -> None:
        if old or new:
            hunks.append(("\n".join(old), "\n".join(new)))
        old.clear()
        new.clear()

    def end_file() -> None:
        end_hunk()
        if path:
            if verb == "Add":
                out.append(PatchFile(verb, path, None, (("", "\n".join(h[1] for h in hunks)),)))
            else:
                out.append(PatchFile(verb, path, move_to, tuple(hunks)))
        hunks.clear()

    for line in patch.splitlines():
        header = PATCH_FILE_RE.match(line)
        if header:
            end_file()
            verb, path, move_to = header.group(1), header.group(2).strip(), None
            continue
        if not path:
            continue
        move = PATCH_MOVE_RE.match(line)
        if move:
            move_to = move.group(1).strip()
        elif line.startswith("@@") or line.strip() in PATCH_END_LINES:
            end_hunk()
        elif verb == "Add":
            new.append(line[1:] if line.startswith("+") else line)
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith("-"):
            old.append(line[1:])
        elif verb == "Update":
            text = line[1:] if line.startswith(" ") else line  # a context line (blank: an empty line)
            old.append(text)
            new.append(text)
    end_file()
    return out


def numbered_lines(text: str) -> dict[int, str] | None:
    """Lines of a line-numbered read result keyed by number (the numbering format picked by majority),
    or None when the text is not line-numbered. The caller's own dict: a file's state keeps it."""
    found = shared_numbered_lines(text)
    return dict(found) if found is not None else None


# The file tracker, the window's file activity and the test watcher read the same new results on one call.
@functools.lru_cache(maxsize=64)
def shared_numbered_lines(text: str) -> dict[int, str] | None:
    """`numbered_lines` as remembered for the last few texts: the dict itself, which a caller reads
    and never changes or keeps."""
    rows: list[str] | None = None
    for scan in NUMBERED_LINE_SCANS:
        found: dict[int, str] = {}
        for number, line in scan.findall(text):
            found.setdefault(int(number), line)
        if not found:
            continue
        rows = text.split("\n") if rows is None else rows
        if len(found) * 2 >= sum(1 for r in rows if r.strip() and not r.startswith("<")):
            return found
    return None


def edit_steps(inp: dict[str, Any]) -> list[tuple[str, str, bool]] | None:
    """(old, new, replace_all) steps of a string-replacement edit (of an apply_patch patch: its hunks,
    file after file), or None for other edit shapes."""
    patch = patch_text(inp)
    if patch is not None:
        return [(old, new, False) for f in patch_files(patch) if f.verb != "Delete" for old, new in f.hunks]
    if isinstance(inp.get("edits"), list):
        steps = []
        for e in inp["edits"]:
            if not isinstance(e, dict):
                return None
            old = e.get("old_string", e.get("old_str"))
            new = e.get("new_string", e.get("new_str", ""))
            if not isinstance(old, str) or not isinstance(new, str):
                return None
            steps.append((old, new, bool(e.get("replace_all"))))
        return steps
    old = inp.get("old_string", inp.get("old_str"))
    new = inp.get("new_string", inp.get("new_str"))
    if isinstance(old, str) and isinstance(new, str):
        return [(old, new, bool(inp.get("replace_all")))]
    return None


def added_lines(inp: dict[str, Any]) -> list[str]:
    """The lines an edit adds (new text not in its old text) or a write writes, stripped, in order."""
    steps = edit_steps(inp)
    if steps is None:
        content = next((inp[k] for k in ("content", "file_text", "contents") if isinstance(inp.get(k), str)), "")
        return [ln.strip() for ln in content.splitlines() if ln.strip()]
    added: list[str] = []
    for old, new, _ in steps:
        before = {ln.strip() for ln in old.splitlines()}
        added += [ln.strip() for ln in new.splitlines() if ln.strip() and ln.strip() not in before]
    return added


def edit_gist(inp: dict[str, Any]) -> str | None:
    """The first lines an edit adds (in its new text, not in its old), stripped and joined with " ; ":
    a short exact hint of what changed. None for edits without old/new strings or that only delete."""
    if not edit_steps(inp):
        return None
    added = added_lines(inp)
    if not added:
        return None
    gist = added[0][:GIST_CHARS]
    for line in added[1:GIST_LINES]:
        if len(gist) + len(line) + 3 > GIST_CHARS:
            break
        gist += " ; " + line
    return gist


def command_output(output: str) -> str | None:
    """What a shell command itself printed, without the harness's wrapper around it (mini-swe-agent's
    `<returncode>`/`<output>` tags, OpenHands' exit-code and directory notes, Codex's header). None when the wrapper
    says the command failed or the harness cut the output: then the output is not the file."""
    header = split_header(output)
    if header is not None:  # Codex: a command that failed, is still running or was cut shows no file
        lines, body = header
        if header_exit_code(lines) not in (None, 0) or any(CODEX_RUNNING_RE.match(x) for x in lines):
            return None
        return None if body.startswith(CODEX_CUT_MARKER) else body
    m = MINI_OUTPUT_RE.match(output)
    if m:
        body = m.group(2)
        return None if m.group(1) != "0" or any(c in body for c in MINI_CUT_MARKERS) else body
    if output.lstrip().startswith(MINI_CUT_MARKERS[0]) or any(c in output for c in OPENHANDS_CUT_MARKERS[:2]):
        return None
    while (t := HARNESS_TRAILER_RE.search(output)) is not None:
        code = t.group(1) or t.group(2)
        if code is not None and code != "0":
            return None
        output = output[:t.start()]
    return output


def aider_edit_blocks(reply: str) -> list[tuple[str, str, str]]:
    """(file, search text, replacement) of each edit block in an aider reply, in order: SEARCH/REPLACE
    (or the older ORIGINAL/UPDATED) with the file named on the line before the block or its fence."""
    out: list[tuple[str, str, str]] = []
    for m in AIDER_BLOCK_RE.finditer(reply):
        path = None
        for line in reversed(reply[: m.start()].rstrip("\n").split("\n")[-3:]):
            text = line.strip()
            if text and not text.startswith("```"):
                path = text.strip("`*: ")
                break
        if path:
            out.append((path, _chomp(m.group(1)), _chomp(m.group(2))))
    return out


def _chomp(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def window_search(output: str) -> re.Match[str] | None:
    """SWE_WINDOW_RE.search, with the substring test for its literal first."""
    return SWE_WINDOW_RE.search(output) if SWE_WINDOW_OPEN in output else None


def window_path(output: str) -> str | None:
    m = window_search(output)
    return m.group(1) if m else None
