"""Where a session directory lives when worksurface keeps one for a file it wrote or a harness session
it serves, so the artifacts its markers name can be found from that file alone.

- beside an output file: `<dir>/<name>.worksurface/` (`worksurface compact FILE -o OUT`);
- in a Claude Code session's own folder: `<projects>/<project>/<session-id>/worksurface/`, next to
  the `subagents/` folder Claude Code keeps there (`--claude-projects`, the Claude Code hook);
- in Codex's home: `$CODEX_HOME/worksurface/<session-id>/` (the Codex hook).

Session data holds whatever the transcript held, secrets included: these directories are created
private (0700) and the artifact files in them 0600 (see `diskstore.DiskStore`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.errors import SessionError

SUFFIX = ".worksurface"
FOLDER = "worksurface"
# A session directory is recognised by its diskcache folder (see diskstore.DiskStore).
DB_FOLDER = "db"
ARTIFACTS_FOLDER = "artifacts"
# Session ids become directory names: only these characters, so an id can never climb out.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_session_dir(path: Path) -> bool:
    return (path / DB_FOLDER).is_dir()


def beside(output: Path) -> Path:
    """The session directory kept for an output file: `<output>.worksurface` in the same folder."""
    return output.parent / f"{output.name}{SUFFIX}"


def claude_session_folder(session_file: Path) -> Path:
    """The session directory kept for a Claude Code session file `<id>.jsonl`: `<id>/worksurface`."""
    return session_file.parent / session_file.stem / FOLDER


def codex_home() -> Path:
    """Codex's home: `$CODEX_HOME`, else `~/.codex`."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def codex_session_folder(session_id: str) -> Path:
    """The session directory the Codex hook keeps for a Codex session."""
    return codex_home() / FOLDER / safe_id(session_id)


def safe_id(session_id: str) -> str:
    """`session_id` when it is safe as one directory name; ValueError otherwise."""
    if not _SAFE_ID.fullmatch(session_id) or set(session_id) <= {"."}:
        raise ValueError(f"session id {session_id!r} is not usable as a directory name")
    return session_id


def check_home(path: Path) -> None:
    """Refuse, before any work, a place worksurface would keep a session by default but must not:
    a symbolic link (the session would go wherever it points), a file, or a folder that holds
    something other than a session (it is someone else's)."""
    if path.is_symlink():
        raise SessionError(f"{path}: is a symbolic link: refusing to keep the session there (give --session DIR)")
    if path.exists() and not path.is_dir():
        raise SessionError(f"{path}: is not a directory: refusing to keep the session there (give --session DIR)")
    if path.is_dir() and not is_session_dir(path) and any(path.iterdir()):
        raise SessionError(f"{path}: is a folder that holds no worksurface session: refusing to write into it "
                           "(give --session DIR)")


def session_for(path: Path) -> Path | None:
    """The session directory that holds the artifacts of `path`: `path` itself when it is one, else
    the one kept beside it or in its Claude Code session folder (None when neither exists)."""
    if path.is_dir():
        return path if is_session_dir(path) else None
    for candidate in candidates(path):
        if is_session_dir(candidate):
            return candidate
    return None


def candidates(path: Path) -> tuple[Path, ...]:
    """Where a session for the file `path` may be kept, in the order they are looked at."""
    return (claude_session_folder(path), beside(path))
