"""Finding the transcripts a batch runs on: directories (recursively), globs, files and manifests.

A file found inside a directory or by a glob counts only when its first bytes look like a supported
format (`worksurface.formats.detect_format`), or is meant to be one but is malformed (its task gives
an error row); licences, READMEs, notes and other data are skipped with the reason. A file named
explicitly is always taken, so a malformed one gives an error row instead of vanishing. `@FILE` reads a manifest: one path per line (blank lines and `#` comments ignored).
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..core.errors import UnknownFormatError, WorksurfaceError
from ..core.fileio import atomic_write, read_text
from ..formats import detect_format
from .tasks import DEFAULT_MAX_BYTES, transcript_path

# The first bytes read to recognise a format: enough for the first records of every format (a
# Claude Code line, an aider header, the opening of a JSON document).
SNIFF_BYTES = 64 * 1024
# Files that sit beside transcripts in shared corpora and are never transcripts.
NOT_TRANSCRIPTS = frozenset({"license", "licence", "copying", "notice", "readme", "source.txt", "changelog",
                             "manifest.txt", "authors"})
MANIFEST_PREFIX = "@"
GLOB_CHARS = frozenset("*?[")


class DiscoveryError(WorksurfaceError):
    """An input that names nothing: a missing path, an empty glob, an unreadable manifest."""


@dataclass
class Discovery:
    """The transcripts to run (absolute paths, in a stable order) and the files skipped, with why."""

    transcripts: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def manifest(self) -> str:
        """The manifest text: one transcript path per line, readable back with `@FILE`."""
        return "".join(f"{p}\n" for p in self.transcripts)


def discover(inputs: Sequence[str], max_bytes: int = DEFAULT_MAX_BYTES) -> Discovery:
    """Expand `inputs` (directories, globs, files, `@manifest` files) into transcripts to run."""
    found = Discovery()
    seen: set[str] = set()

    def take(path: str, explicit: bool) -> None:
        key = transcript_path(path)
        if key in seen:
            return
        seen.add(key)
        reason = None if explicit else skip_reason(Path(path), max_bytes)
        if reason is None:
            found.transcripts.append(key)
        else:
            found.skipped.append((key, reason))

    for item in inputs:
        for path, explicit in _expand(item):
            take(path, explicit)
    return found


def _expand(item: str) -> Iterator[tuple[str, bool]]:
    """(path, named explicitly) for every file an input stands for."""
    if item.startswith(MANIFEST_PREFIX):
        yield from ((p, True) for p in read_manifest(item[len(MANIFEST_PREFIX):]))
        return
    if GLOB_CHARS & set(item):
        matches = sorted(glob.glob(item, recursive=True))
        if not matches:
            raise DiscoveryError(f"{item}: no file matches this pattern")
        for m in matches:
            yield from _walk(Path(m)) if os.path.isdir(m) else iter([(m, False)])
        return
    path = Path(item)
    if path.is_dir():
        yield from _walk(path)
    elif path.exists():
        yield str(path), True
    else:
        raise DiscoveryError(f"{item}: no such file or directory")


def _walk(root: Path) -> Iterator[tuple[str, bool]]:
    """Every regular file under `root`, sorted, hidden files and folders left out."""
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield os.path.join(directory, name), False


def read_manifest(path: str) -> list[str]:
    """Paths listed in a manifest, relative ones taken from the manifest's own folder."""
    text = read_text(path, "manifest")
    base = Path(path).resolve().parent
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(str(base / line))
    return out


def write_manifest(path: str | os.PathLike[str], paths: Iterable[str]) -> None:
    atomic_write(path, "".join(f"{p}\n" for p in paths))


def skip_reason(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """Why a file found in a folder is not a transcript, or None when it looks like one."""
    if path.name.lower() in NOT_TRANSCRIPTS or path.stem.lower() in NOT_TRANSCRIPTS:
        return "not a transcript (licence, readme or notes file)"
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head_bytes = fh.read(SNIFF_BYTES)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if not head_bytes.strip():
        return "empty file"
    head = _decode_head(head_bytes, complete=size <= SNIFF_BYTES)
    if head is None:
        return "not UTF-8 text"
    if _detects(head, str(path), complete=size <= SNIFF_BYTES):
        return None
    if size <= SNIFF_BYTES or head.lstrip()[:1] not in ("[", "{"):
        return "not a supported transcript format"
    # A JSON document longer than the sniffed bytes only parses whole. A huge one is kept: its task
    # reports it as too large instead of the driver reading it.
    if size > max_bytes:
        return None
    try:
        whole = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "not UTF-8 text"
    return None if _detects(whole, str(path), complete=True) else "not a supported transcript format"


def _decode_head(data: bytes, complete: bool) -> str | None:
    """The sniffed bytes as text; a multi-byte character cut at the end of a partial read is dropped."""
    for cut in range(1 if complete else 4):
        try:
            return (data[:len(data) - cut] if cut else data).decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _detects(text: str, path: str, complete: bool) -> bool:
    """True when `text` is in a supported format, or (when it is the whole file) is meant to be one
    but is malformed (broken JSON, a JSON Lines session with a bad record): that file gets an error
    row saying what is wrong, never a silent skip. Valid JSON of another shape (a manifest, a data
    file) is no transcript; a partial head's broken JSON may be the cut, so it decides nothing."""
    try:
        detect_format(text, path)
    except UnknownFormatError:
        return False
    except WorksurfaceError:
        return complete and not _one_json_document(text)
    return True


def _one_json_document(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
