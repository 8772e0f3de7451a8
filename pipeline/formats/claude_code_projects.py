"""Writing a compacted session where Claude Code finds it: `~/.claude/projects/<escaped cwd>/<id>.jsonl`.

Claude Code appends to a session file while it runs, so a compaction must never replace a file that
changed after worksurface read it (the new records would be lost): the content hash taken when the
input was read is compared again just before the write. Sidechain files (`<id>/subagents/*.jsonl`,
the subagents a Task call ran) are copied beside the session so the links from its tool results hold.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..core.errors import FormatError, SourceChangedError
from ..core.fileio import atomic_write, check_output_path, read_text, replace_unchanged
from ..core.model import Message
from . import claude_code
from .base import Transcript
from .convert import Dropped, convert

# Claude Code names a project folder after the cwd with every non-alphanumeric character as "-",
# and cuts names longer than this, adding a hash of the full path.
MAX_PROJECT_NAME = 200
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")
SUBAGENTS = "subagents"
# A Claude Code session id: a UUID in its usual text form.
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class SessionChangedError(SourceChangedError):
    """The session file changed after it was read (Claude Code is still writing it)."""

    def __init__(self, problem: str, *, path: str) -> None:
        super().__init__(problem, path=path)


def project_dir_name(cwd: str) -> str:
    """The folder under `~/.claude/projects/` that Claude Code uses for sessions started in `cwd`."""
    name = _NOT_ALNUM.sub("-", cwd)
    if len(name) <= MAX_PROJECT_NAME:
        return name
    return f"{name[:MAX_PROJECT_NAME]}-{_base36(abs(_java_hash(cwd)))}"


def _java_hash(text: str) -> int:
    """The 32-bit string hash Claude Code uses for long project names (h = h * 31 + code unit)."""
    h = 0
    data = text.encode("utf-16-le", "surrogatepass")  # JavaScript strings are UTF-16 code units
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i:i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_hash(path: Path) -> str | None:
    """The content hash of `path`, None when there is no such file."""
    try:
        return content_hash(read_text(path, "session file"))
    except FormatError:
        if not path.exists():
            return None
        raise


def check_session_id(sid: str, source: str) -> str:
    """`sid` when it is a session id as Claude Code makes them (a UUID), which is safe as a file name;
    else a FormatError: an id like `../x` or `/tmp/x` would write outside the projects folder."""
    if not UUID_RE.fullmatch(sid):
        raise FormatError(f"sessionId {sid[:80]!r} is not a Claude Code session id (a UUID): refusing to use it "
                          "as a file name", path=source)
    return sid


def session_id(transcript: Transcript) -> str | None:
    for m in transcript.messages:
        raw = m.meta.get("raw")
        if isinstance(raw, dict) and isinstance(raw.get("sessionId"), str):
            return raw["sessionId"]
    return None


def session_cwd(transcript: Transcript) -> str | None:
    return next((m.meta["cwd"] for m in transcript.messages if isinstance(m.meta.get("cwd"), str)), None)


def new_session_id(old: str, source_hash: str) -> str:
    """A deterministic id for `--as-new-session`: the same session file gives the same new id (the
    view itself carries wall-clock times, such as the status bar's, so it is not hashed)."""
    return str(uuid.uuid5(claude_code.UUID_NAMESPACE, f"{old}\x00new-session\x00{source_hash}"))


@dataclass
class Target:
    """Where a compacted Claude Code session goes, and what must still be there when it is written."""

    path: Path
    session_id: str | None          # the records' new sessionId (None: keep it)
    expected_hash: str | None       # the destination's content when the input was read (None: absent)
    source: Path                    # the input file (its `<id>/subagents/` folder is copied along)


def projects_target(projects: Path, transcript: Transcript, source: Path, new_id: str | None,
                    read_hash: str) -> Target:
    """The destination in a Claude Code projects folder: the session's own file when the input is
    one there, else `<escaped cwd of its first record>/<id>.jsonl`. An existing file there may be
    replaced only when it is the input itself, unchanged, or a byte-identical copy of it."""
    sid, cwd = session_id(transcript), session_cwd(transcript)
    if sid is None or cwd is None:
        raise FormatError("--claude-projects needs a Claude Code session (records with sessionId and cwd)",
                          path=str(source))
    check_session_id(sid, str(source))
    folder = projects / project_dir_name(cwd)
    if source.resolve().parent.parent == projects.resolve() and source.stem == sid:
        folder = source.parent  # a session already in the projects folder is compacted where it is
    path = folder / f"{check_session_id(new_id, str(source)) if new_id else sid}.jsonl"
    check_output_path(path)  # refused before any work, as every output path is
    current = file_hash(path)
    if current is not None and current != read_hash:
        raise SessionChangedError(
            f"refusing to overwrite it: it differs from the session that was compacted ({source}); "
            "it holds records this compaction never saw. Compact that file, or use --as-new-session", path=str(path))
    return Target(path, new_id, current, source)


def write_target(transcript: Transcript, view: Sequence[Message], target: Target) -> Dropped:
    """Write the compacted session (and its sidechain files), unless the destination changed since
    the input was read."""
    check_output_path(target.path)  # the rules of any output path (no symlink, directory, FIFO ...)
    fitted = convert(transcript, claude_code.NAME, view)
    text = claude_code.write_session(fitted.transcript, fitted.messages, session_id=target.session_id)
    if file_hash(target.path) != target.expected_hash:
        raise SessionChangedError(
            "refusing to overwrite it: it changed after it was read (is Claude Code still running in that "
            "session?); nothing was written. Run the compaction again once it is idle", path=str(target.path))
    _copy_subagents(target.source, target.path, target.session_id)
    # Checked again under the lock, right before the rename (Claude Code may have appended meanwhile).
    replace_unchanged(target.path, text, target.expected_hash, inputs=[target.source])
    return fitted.dropped


def _copy_subagents(source: Path, destination: Path, new_id: str | None) -> None:
    """Copy `<id>/subagents/*.jsonl` from beside the source to beside the destination (records moved
    to the new session id when there is one)."""
    folder = source.parent / source.stem / SUBAGENTS
    target = destination.parent / destination.stem / SUBAGENTS
    if not folder.is_dir() or folder.resolve() == target.resolve():
        return
    for file in sorted(folder.glob("*.jsonl")):
        text = read_text(file, "sidechain file")
        if new_id is not None:
            text = "".join(_moved(line, new_id) + "\n" for line in text.split("\n") if line.strip())
        atomic_write(target / file.name, text, inputs=[file])


def _moved(line: str, new_id: str) -> str:
    record = json.loads(line)
    if isinstance(record, dict) and "sessionId" in record:
        record["sessionId"] = new_id
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
