"""Reading and writing files the way every part of worksurface must: errors that name the file,
and writes that never leave half a file behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import FormatError

# mkstemp creates the temp file private (0600); what we write is an ordinary readable file.
WRITTEN_FILE_MODE = 0o644


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path` (creating parent
    directories): a reader, or a crash, never sees a partial file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), WRITTEN_FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """A UTF-8 text file's content, or a FormatError naming the file (`what` says what was expected)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(f"no such {what}", path=str(p)) from None
    except IsADirectoryError:
        raise FormatError(f"is a directory, not a {what}", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text (byte {exc.start})", path=str(p)) from None
