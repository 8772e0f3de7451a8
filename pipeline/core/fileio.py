"""Reading and writing files the way every part of worksurface must: errors that name the file,
and writes that never leave half a file behind.

Reading accepts only regular files (or `-` for stdin): a FIFO blocks forever, `/dev/zero` never
ends, and either can sit behind a symlink or be swapped in after a check, so the type is checked on
the path and again on the opened descriptor. Writing goes through `check_output_path` first, so a
command refuses a bad `-o` before it does any work.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from contextlib import contextmanager
from typing import BinaryIO, Iterable, Iterator, Sequence

from .errors import FormatError, OutputPathError, SourceChangedError, WorkspaceReadError

# mkstemp creates the temp file private (0600); what we write from no input is an ordinary readable
# file, unless it holds session data (artifacts: what a transcript's tool results held, secrets
# included); what we write from inputs is never readable by more people than every input is.
WRITTEN_FILE_MODE = 0o644
PRIVATE_FILE_MODE = 0o600
# The conventional name for standard input (and, for an output, standard output) on a command line.
STDIN = "-"
STDOUT = "-"
# How long a writer waits for another worksurface process that holds the lock on a file it replaces.
REPLACE_LOCK_TIMEOUT = 10.0
# How `path` names standard input in error messages.
STDIN_NAME = "<stdin>"
# A byte order mark some editors put before UTF-8 text: not part of any format, so it is skipped.
BOM = "\ufeff"
# `atomic_write_chunks` encodes and writes its chunks in batches of about this many characters.
WRITE_BATCH_CHARS = 1 << 20
# Opening with O_NONBLOCK makes open() of a FIFO return at once instead of waiting for a writer,
# so the descriptor can be checked (and refused) instead of hanging.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
# Opening a workspace file one component at a time: a symlink met on the way (one swapped in after the
# path was resolved) fails with ELOOP or ENOTDIR instead of being followed out of the root.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
FOLDER_FLAGS = os.O_RDONLY | _DIRECTORY | getattr(os, "O_CLOEXEC", 0)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, mode: int | None = None, *,
                 inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path` (creating parent
    directories): a reader, or a crash, never sees a partial file. The file gets `mode` when given,
    else `output_mode`: a transcript's secrets stay as private as the transcript they came from (0600
    stays 0600).

    Text is written as valid UTF-8: a lone surrogate (a JSON `\\ud83d` escape read from a transcript
    whose emoji was cut in half) becomes the same `\\ud83d` escape again, which reads back as the
    same string from JSON and stays visible text elsewhere.
    """
    with atomic_writer(path, mode, inputs=inputs) as fh:
        fh.write(_encoded(data))


def atomic_write_chunks(path: str | os.PathLike[str], chunks: Iterable[str], mode: int | None = None, *,
                        inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """`atomic_write` of the text `chunks` join to, encoded and written a batch at a time as they are
    made: a large output is never held whole (nor widened to its widest character) beside its bytes.
    The bytes are those `atomic_write` of the joined text writes (UTF-8 encodes character by character)."""
    with atomic_writer(path, mode, inputs=inputs) as fh:
        batch: list[str] = []
        size = 0
        for chunk in chunks:
            batch.append(chunk)
            size += len(chunk)
            if size >= WRITE_BATCH_CHARS:
                fh.write(_encoded("".join(batch)))
                batch, size = [], 0
        if batch:
            fh.write(_encoded("".join(batch)))


@contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: int | None = None, *,
                  inputs: Iterable[str | os.PathLike[str]] = ()) -> Iterator[BinaryIO]:
    """`atomic_write` for output written as it is produced: a binary file to write to, renamed over
    `path` (with `mode`, or `output_mode` when None) only when the block ends without an exception."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _temp_beside(target, output_mode(target, inputs) if mode is None else mode) as (fh, tmp):
        yield fh
    try:
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _encoded(data: bytes | str) -> bytes:
    return data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data


@contextmanager
def _temp_beside(target: Path, mode: int) -> Iterator[tuple[BinaryIO, str]]:
    """A temp file beside `target` and its path, given `mode` and fsynced when the block ends; removed
    when the block raises."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh, tmp
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_temp(target: Path, data: bytes | str, mode: int) -> str:
    """A fsynced temp file beside `target` holding `data`, with `mode`; its path."""
    with _temp_beside(target, mode) as (fh, tmp):
        fh.write(_encoded(data))
    return tmp


def output_mode(target: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()) -> int:
    """The permission bits for a file written from `inputs`: no wider than any regular-file input's nor
    than the file it replaces (a 0600 session file gives a 0600 compacted copy or report);
    WRITTEN_FILE_MODE when there is neither."""
    mode = WRITTEN_FILE_MODE
    for source in (*inputs, target):
        if str(source) == STDIN and source is not target:
            continue
        try:
            st = os.stat(source)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            mode &= stat.S_IMODE(st.st_mode)
    return mode


def replace_unchanged(path: str | os.PathLike[str], data: bytes | str, expected_sha256: str | None, *,
                      inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Replace `path` with `data` only if it still holds what was read (its SHA-256 is
    `expected_sha256`; None: it must not exist), so a harness appending to it while worksurface worked
    never loses a record.

    The file is locked (flock, where the platform has it) against other worksurface writers, checked
    again right before the atomic rename, and watched through the rename: anything appended to it in
    that last moment (a writer that does not lock) is saved beside it and reported, never dropped."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd: int | None = os.open(target, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        fd = None
    try:
        if fd is not None:
            _lock(fd, str(target))
        tmp = _write_temp(target, data, output_mode(target, inputs))
        try:
            held = _held(fd)
            if (None if held is None else hashlib.sha256(held).hexdigest()) != expected_sha256:
                raise SourceChangedError(
                    "it changed after it was read (is a harness still writing to it?); nothing was written. "
                    "Run again once it is idle", path=str(target))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if fd is not None and held is not None and os.fstat(fd).st_size > len(held):
            _save_late_records(fd, len(held), target)
    finally:
        if fd is not None:
            os.close(fd)  # closing drops the lock


def _lock(fd: int, name: str) -> None:
    """An exclusive advisory lock on `fd`, waiting up to REPLACE_LOCK_TIMEOUT for another holder."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: the content checks still hold
        return
    deadline = time.monotonic() + REPLACE_LOCK_TIMEOUT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SourceChangedError(f"another process has held a lock on it for {REPLACE_LOCK_TIMEOUT:.0f} s; "
                                         "nothing was written", path=name) from None
            time.sleep(0.05)
        except OSError:
            return  # a file system without locks: the content checks still hold


def _held(fd: int | None) -> bytes | None:
    """Everything the file open as `fd` holds now (None: there was no file)."""
    if fd is None:
        return None
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _save_late_records(fd: int, offset: int, target: Path) -> None:
    """What a writer appended to the replaced file during the rename, saved beside it; raises to say so."""
    os.lseek(fd, offset, os.SEEK_SET)
    late = b""
    while chunk := os.read(fd, 1 << 20):
        late += chunk
    saved = target.with_name(f"{target.name}.appended-{int(time.time())}")
    atomic_write(saved, late, inputs=[target])
    raise SourceChangedError(f"{len(late)} bytes were appended to it while it was being replaced; they are saved "
                             f"in {saved}: append them to the file (or compact again once the harness is idle)",
                             path=str(target), saved=str(saved))


def output_file(path: str | os.PathLike[str] | None, *, inputs: Iterable[str | os.PathLike[str]] = (),
                in_place: bool = False, stdout: bool = False) -> Path | None:
    """The one output-path policy of every command that writes: `-` is standard output where the
    command can print its result (None is returned) and refused where it cannot (a file named `-`
    is never written); any other path must pass `check_output_path`."""
    if path is None:
        return None
    if str(path) == STDOUT:
        if stdout:
            return None
        raise OutputPathError("`-` means standard output, which this command cannot write to; give a file "
                              "name", path=STDOUT)
    check_output_path(path, inputs=inputs, in_place=in_place)
    return Path(path)


def _kind(mode: int) -> str:
    """What a non-regular file is, in words for an error message."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | os.PathLike[str], what: str = "file") -> bytes:
    """A regular file's bytes (or stdin's for `-`), or a FormatError naming the file.

    FIFOs, devices, sockets and directories are refused before reading, also when a symlink points
    at them or when the file is swapped for one between the check and the open."""
    if str(path) == STDIN:
        return sys.stdin.buffer.read()
    with open_regular(path, what) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise FormatError(f"cannot read the {what}: {exc.strerror or exc}", path=str(path)) from None


def open_regular(path: str | os.PathLike[str], what: str = "file") -> BinaryIO:
    """A regular file opened for binary reading, refused as `read_bytes` refuses it (not for `-`)."""
    name = str(path)
    try:
        st = os.stat(name)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"is {_kind(st.st_mode)}, not a {what}: only regular files, or - for "
                              "standard input, are read", path=name)
        fd = os.open(name, _OPEN_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise FormatError(f"no such {what}", path=name) from None
    except PermissionError:
        raise FormatError(f"cannot read the {what}: permission denied", path=name) from None
    except ValueError:                  # an embedded NUL byte in the path
        raise FormatError("the path contains a NUL byte", path=name.replace("\0", "\\0")) from None
    except OSError as exc:
        raise FormatError(f"cannot read the {what}: {exc.strerror or exc}", path=name) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):        # swapped after the stat above
        os.close(fd)
        raise FormatError(f"became {_kind(st.st_mode)} while being opened; not read", path=name)
    return os.fdopen(fd, "rb")


# `text_lines` reads a file in chunks of this many bytes: a line is joined from its chunks once, so a
# 200 MB line costs twice its size at most while it is decoded (a buffered readline costs several times).
LINE_CHUNK_BYTES = 1 << 20


def text_lines(path: str | os.PathLike[str], what: str = "file") -> Iterator[tuple[int, str, bool]]:
    """A UTF-8 text file read line by line (split on "\\n" only, as `read_text(...).split("\\n")`):
    (number, line without its newline, whether it is an unterminated last line) for every line, a
    leading byte order mark dropped. Only one line is in memory at a time; bytes that are not UTF-8
    raise the FormatError `read_text` raises (same byte offset, same line)."""
    name = display_name(path)
    with open_regular(path, what) as fh:
        number = offset = 0
        pieces: list[bytes] = []
        while True:
            chunk = fh.read(LINE_CHUNK_BYTES)
            start = 0
            while chunk:
                end = chunk.find(b"\n", start)
                if end < 0:
                    pieces.append(chunk[start:] if start else chunk)
                    break
                pieces.append(chunk[start:end])
                start = end + 1
                number += 1
                line, offset = _decoded(pieces, number, offset, name)
                yield number, line, False
                del line
            if not chunk:
                break
        if pieces and any(pieces):
            line, offset = _decoded(pieces, number + 1, offset, name)
            yield number + 1, line, True


def _decoded(pieces: list[bytes], number: int, offset: int, name: str) -> tuple[str, int]:
    """The line whose bytes are `pieces` (emptied), decoded, and the byte offset of the next line."""
    data = b"".join(pieces) if len(pieces) != 1 else pieces[0]
    pieces.clear()
    try:
        line = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text (byte {offset + exc.start})", path=name, line=number) from None
    offset += len(data) + 1
    del data
    return (line.removeprefix(BOM) if number == 1 else line), offset


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """A UTF-8 text file's content (stdin for `-`), or a FormatError naming the file (`what` says
    what was expected)."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        name = STDIN_NAME if str(path) == STDIN else str(path)
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError(f"not UTF-8 text (byte {exc.start})", path=name, line=line) from None


def read_small_text(path: str | os.PathLike[str], max_bytes: int, what: str = "file") -> str:
    """A regular file's UTF-8 text when it is at most `max_bytes` long (a snippet a user points at,
    such as `--pin @PATH`), else a FormatError naming the file: refused as `read_bytes` refuses it,
    and refused when larger or binary (a NUL byte, or bytes that are not UTF-8), never read whole."""
    name = str(path)
    with open_regular(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise FormatError(f"cannot read the {what}: {exc.strerror or exc}", path=name) from None
    if size > max_bytes or len(data) > max_bytes:     # st_size, or a file growing while read
        raise FormatError(f"is over {max_bytes:,} bytes ({max(size, len(data)):,} or more), the most a {what} "
                          "may hold", path=name)
    nul = data.find(b"\0")
    if nul >= 0:
        raise FormatError(f"is binary (a NUL byte at byte {nul}), not a text {what}", path=name)
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError(f"is binary or not UTF-8 text (byte {exc.start}), not a text {what}", path=name,
                          line=line) from None


def display_name(path: str | os.PathLike[str]) -> str:
    """How a path given on the command line is named in messages (`-` is standard input)."""
    return STDIN_NAME if str(path) == STDIN else str(path)


def check_output_path(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = (),
                      in_place: bool = False) -> None:
    """Refuse, before any work, an output path that cannot or must not be written.

    Refused: a directory; a FIFO, device or socket (writing would block or go somewhere else); a
    symbolic link (the atomic rename would replace the link, not write where it points); one of
    `inputs` unless `in_place`; a parent that is a file; a folder where no file can be created.
    """
    name = str(path)
    if "\0" in name:
        raise OutputPathError("the path contains a NUL byte", path=name.replace("\0", "\\0"))
    if name == STDOUT:
        raise OutputPathError("`-` names standard output, never a file: give a file name", path=name)
    target = Path(name)
    try:
        st: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None                       # reported below, naming the parent that is a file
    except OSError as exc:
        raise OutputPathError(f"cannot write here: {exc.strerror or exc}", path=name) from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputPathError("is a symbolic link: refusing to replace it (give the path it points "
                                  "to, or remove the link)", path=name)
        if stat.S_ISDIR(st.st_mode):
            raise OutputPathError("is a directory: give a file name for the output", path=name)
        if not stat.S_ISREG(st.st_mode):
            raise OutputPathError(f"is {_kind(st.st_mode)}, not a regular file: refusing to write to it",
                                  path=name)
        if not in_place and any(_same_file(i, target) for i in inputs):
            raise OutputPathError("is the input file: refusing to overwrite it (pass --in-place to "
                                  "replace the input)", path=name)
    parent = target.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"cannot create it: {parent} is not a directory", path=name)
    if os.path.lexists(target.parent):
        _probe_writable(target.parent, name)


def _same_file(a: str | os.PathLike[str], b: Path) -> bool:
    if str(a) == STDIN:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _probe_writable(folder: Path, name: str) -> None:
    """Create and remove a temp file where the output will go: the only check that catches
    read-only mounts, /proc and full disks' quota before any work is done."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise OutputPathError(f"cannot create files in {folder}: {exc.strerror or exc}", path=name) from None


def read_confined(root: str | os.PathLike[str], path: str, max_bytes: int) -> bytes:
    """The bytes of `path` (relative to `root`, or absolute) only if it is a regular file inside
    `root`, at most `max_bytes` long; else WorkspaceReadError with the reason.

    The path is resolved (symlinks followed) and checked against the root, then opened again one
    component at a time from the root with O_NOFOLLOW: a component swapped for a symlink between the
    check and the open is refused, so no content from outside the root is ever returned.
    """
    if "\0" in path or "\0" in str(root):
        raise WorkspaceReadError("the path contains a NUL byte: not read", path=path.replace("\0", "\\0"))
    base = Path(root).resolve()
    candidate = Path(path) if Path(path).is_absolute() else base / path
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise WorkspaceReadError("not found in the workspace", path=path) from None
    if not resolved.is_relative_to(base):
        raise WorkspaceReadError("outside workspace_root: not read", path=path)
    parts = resolved.relative_to(base).parts
    if not parts:
        raise WorkspaceReadError("not a regular file", path=path)
    fd = _open_components(base, parts, path)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise WorkspaceReadError("not a regular file", path=path)
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > max_bytes:
            raise WorkspaceReadError(f"too large to reinject ({st.st_size} bytes)", path=path)
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:           # grew after the fstat
        raise WorkspaceReadError(f"too large to reinject (over {max_bytes} bytes)", path=path)
    return data


def _open_components(base: Path, parts: tuple[str, ...], path: str) -> int:
    """A descriptor for base/parts, opened without following any symlink on the way."""
    try:
        dir_fd = os.open(base, FOLDER_FLAGS)
    except OSError:
        raise WorkspaceReadError("workspace_root cannot be opened", path=path) from None
    try:
        return open_parts_below(dir_fd, parts)
    except PartOpenError as exc:
        why = ("changed while being opened (a symlink or non-folder on the way): not read"
               if exc.error.errno in (errno.ELOOP, errno.ENOTDIR) else f"cannot be read: {exc.error.strerror}")
        raise WorkspaceReadError(why, path=path) from None


class PartOpenError(Exception):
    """A part of a path that could not be opened without following a link: which one and why."""

    def __init__(self, index: int, error: OSError) -> None:
        super().__init__(error)
        self.index = index
        self.error = error


def open_parts_below(folder: int, parts: Sequence[str]) -> int:
    """A descriptor for folder/parts, each part opened with O_NOFOLLOW from the folder before it (the
    last as a file: a FIFO in its place opens at once, for the caller to refuse). Takes `folder`: it and
    every folder on the way are closed here, whatever happens."""
    try:
        for i, part in enumerate(parts):
            flags = (_OPEN_FLAGS if i == len(parts) - 1 else FOLDER_FLAGS) | _NOFOLLOW
            try:
                fd = os.open(part, flags, dir_fd=folder)
            except OSError as exc:
                raise PartOpenError(i, exc) from None
            os.close(folder)
            folder = fd
        fd, folder = folder, -1
        return fd
    finally:
        if folder >= 0:
            os.close(folder)


def output_folder(path: str | os.PathLike[str]) -> Path:
    """The same policy for a command that writes a folder of results: never `-`, never a file, FIFO or
    symbolic link in its place, and a place where files can be created."""
    name = str(path)
    if name == STDOUT or "\0" in name:
        raise OutputPathError("a results folder cannot be standard output (`-`) or hold a NUL byte: give a "
                              "folder name", path=name.replace("\0", "\\0"))
    target = Path(name)
    if target.is_symlink():
        raise OutputPathError("is a symbolic link: refusing to write results through it (give the folder it "
                              "points to)", path=name)
    if target.exists() and not target.is_dir():
        raise OutputPathError("is not a folder: give a folder for the results", path=name)
    check_output_path(target / ".results-probe")  # the parent chain and that files can be made there
    return target
