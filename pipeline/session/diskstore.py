"""The embedded backend: a session kept in a directory (diskcache over SQLite), so a harness process
can crash, restart and reproduce the same view byte for byte.

Directory layout: `db/` (the diskcache), `artifacts/<id>.txt` (artifact files a model can open),
`lock` (the inter-process lock file, held with `filelock`: flock on POSIX, msvcrt on Windows; the OS
releases it when the holder dies). A directory may also hold sessions by id in subdirectories
(`Session.open(DIR, session_id=ID)`), as a gateway's `--store DIR` does. A session holds what the
transcript held, secrets included: the directories it creates are private (0700) and its artifact and
lock files 0600.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import shutil
import sqlite3
import stat
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import diskcache
import filelock

from ..core.errors import (ArtifactDamagedError, ArtifactNotFoundError, SessionError, SessionLockedError,
                           SessionNotFoundError, StoreDamagedError)
from ..core.fileio import FOLDER_FLAGS, PRIVATE_FILE_MODE, PartOpenError, atomic_write, open_parts_below
from ..core.tokens import TokenCounter
from . import integrity
from .homes import ARTIFACTS_FOLDER, DB_FOLDER, is_session_dir
from .store import ReentrantLock, Store, content_digest

# How often a waiting `lock()` retries; short enough to feel instant, long enough not to spin.
LOCK_POLL_SECONDS = 0.05
# diskcache defaults to evicting old entries past 1 GB; a session must never lose data silently.
# diskcache keeps values of `disk_min_file_size` bytes or more in separate files and deletes those
# files at once inside a transaction, before the SQL commit: a crash then leaves rows pointing at
# missing files, which no rollback brings back. Every value stays inside SQLite (its limit is 1 GB a
# value), so a transaction is all or nothing.
INLINE_VALUE_LIMIT = 2**30 - 1
DISKCACHE_SETTINGS: dict[str, Any] = {"eviction_policy": "none", "statistics": 0, "tag_index": 0,
                                      "disk_min_file_size": INLINE_VALUE_LIMIT}
DB_DIR, ARTIFACTS_DIR = DB_FOLDER, ARTIFACTS_FOLDER
DB_FILE, LOCK_FILE = "cache.db", "lock"
# Session directories (the session, its db and artifacts) are created readable by their owner only.
PRIVATE_DIR_MODE = 0o700
# An artifact file is opened one component at a time below its root, none of them followed if it is a
# symbolic link: a link planted by a repository or a session (or swapped in after a listing) is refused.
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_OPEN_FILE = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC  # a FIFO in the file's place opens at once (then refused)
# atomic_write keeps a lone surrogate of an artifact's content as the text `\udXXX` in its file.
_ESCAPED_SURROGATE = re.compile(r"\\u(d[89a-f][0-9a-f]{2})")


class DiskStore(Store):
    """A session kept in a directory; see the module docstring for the layout."""

    def __init__(self, path: str | os.PathLike[str], counter: TokenCounter | None = None, *,
                 create: bool = True) -> None:
        super().__init__(counter)
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise SessionError(f"{self.path}: not a directory")
        if not create and not is_session_dir(self.path):
            raise SessionNotFoundError(f"{self.path}: not a session directory")
        try:
            self.path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionError(f"{self.path}: cannot open session directory ({exc})") from None
        self._file_lock = filelock.FileLock(str(self.path / LOCK_FILE), mode=PRIVATE_FILE_MODE, thread_local=False)
        self._locking = ReentrantLock(str(self.path), self._lock_file, self._file_lock.release)
        db = self.path / DB_DIR / DB_FILE
        # SQLite creates the database file empty and writes its header after: a file found empty is
        # damage only when no one is creating it, so a new session is checked and created under the lock.
        with nullcontext() if db.is_file() and db.stat().st_size > 0 else self.lock():
            self._check_files()
            self._cache = self._open_cache()
        try:
            self._open_checked()
        except BaseException:
            self._cache.close()
            raise

    def _open_cache(self) -> diskcache.Cache:
        """The session's diskcache (creating its folders), with SQLite's refusals named."""
        try:
            for folder in (self.path / ARTIFACTS_DIR, self.path / DB_DIR):
                folder.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
            return diskcache.Cache(str(self.path / DB_DIR), **DISKCACHE_SETTINGS)
        except sqlite3.DatabaseError as exc:
            raise StoreDamagedError(f"the session database cannot be opened ({exc})", store=str(self.path)) from None
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            raise SessionError(f"{self.path}: cannot open session directory ({exc})") from None

    def _check_files(self) -> None:
        """Damage that opening would hide: SQLite takes an empty database file for a new database, and
        a missing database beside artifact files would start a new session over the old one's files."""
        db = self.path / DB_DIR / DB_FILE
        if db.exists() and db.stat().st_size == 0:
            raise StoreDamagedError(f"{DB_DIR}/{DB_FILE} is empty (0 bytes): the session's database was lost or "
                                    "truncated; nothing was changed (move the directory away to start a new session)",
                                    store=str(self.path))
        artifacts = self.path / ARTIFACTS_DIR
        if not db.exists() and artifacts.is_dir() and any(artifacts.iterdir()):
            raise StoreDamagedError(f"{DB_DIR}/{DB_FILE} is missing but {ARTIFACTS_DIR}/ holds files: the session's "
                                    "database was lost; nothing was changed (move the directory away to start a "
                                    "new session)", store=str(self.path))

    @classmethod
    def open(cls, path: str | os.PathLike[str], counter: TokenCounter | None = None, *,
             create: bool = True) -> "DiskStore":
        """Open (creating if needed, unless `create` is False) the session directory at `path`."""
        return cls(path, counter, create=create)

    @property
    def location(self) -> str:
        return str(self.path)

    def close(self) -> None:
        self._cache.close()

    def _get(self, key: str) -> str | None:
        try:
            value = self._cache.get(key)
        except sqlite3.DatabaseError as exc:
            raise StoreDamagedError(f"cannot be read ({exc})", store=self.location, key=key) from None
        if value is not None and not isinstance(value, str):
            raise StoreDamagedError(f"holds a {type(value).__name__}, not JSON text", store=self.location, key=key)
        return value

    def _put(self, key: str, text: str) -> None:
        with self._writing():
            self._cache.set(key, text)

    def _delete(self, key: str) -> None:
        with self._writing():
            self._cache.delete(key)

    def _keys(self) -> list[str]:
        return [str(k) for k in self._cache.iterkeys()]

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        with self._writing(), self._cache.transact():
            yield

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write SQLite refuses (disk full, read-only, I/O error) as a `SessionError` naming the
        session: the transaction it was part of rolls back, so the store keeps its last commit."""
        try:
            yield
        except (sqlite3.OperationalError, diskcache.Timeout) as exc:
            raise SessionError(f"{self.path}: cannot write the session ({exc}); this call's changes were "
                               "rolled back, the last committed state is kept") from None

    def _artifact_file(self, artifact_id: str) -> Path:
        return self.path / ARTIFACTS_DIR / f"{artifact_id}.txt"

    def _materialize_later(self, artifact_id: str, content: str) -> tuple[str, Callable[[], object]]:
        return os.path.abspath(self._artifact_file(artifact_id)), functools.partial(self._materialize, artifact_id, content)

    def _materialize(self, artifact_id: str, content: str) -> str:
        path = self._artifact_file(artifact_id)
        # A link planted in the file's place would send the model that opens the path elsewhere: the
        # atomic rename replaces the link itself (never what it points to) with the artifact.
        if not path.exists() or path.is_symlink():
            atomic_write(path, content, PRIVATE_FILE_MODE)
        return os.path.abspath(path)  # a marker names a path the model can open from any directory

    def lock(self, timeout: float = 30.0) -> Any:
        """Hold the session's inter-process lock (`<dir>/lock`; the OS releases it when the holder
        dies). Re-entrant within this object. Raises `SessionLockedError` after `timeout`."""
        return self._locking.hold(timeout)

    def _lock_file(self, deadline: float, timeout: float) -> None:
        try:
            self._file_lock.acquire(timeout=max(0.0, deadline - time.monotonic()), poll_interval=LOCK_POLL_SECONDS)
        except filelock.Timeout:
            raise SessionLockedError(f"{self.path}: session is locked by another process "
                                     f"(waited {timeout:g} s)") from None

    # --- sessions by id under a base directory -----------------------------------------------------

    @staticmethod
    def list_sessions(base: str | os.PathLike[str]) -> list[str]:
        """The ids of the sessions kept in subdirectories of `base` (none if it does not exist)."""
        root = Path(base)
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if p.is_dir() and is_session_dir(p))

    @classmethod
    def delete_session(cls, base: str | os.PathLike[str], session_id: str, timeout: float = 30.0) -> None:
        """Remove the session `session_id` under `base`, once no one holds its lock."""
        path = Path(base) / session_id
        if not is_session_dir(path):
            raise SessionNotFoundError(f"{base}: no session {session_id!r}")
        store = cls(path, create=False)
        try:
            with store.lock(timeout):
                store._cache.close()
                # The lock file goes last, while still held, so a waiter never takes a half-removed session.
                for entry in path.iterdir():
                    if entry.name != LOCK_FILE:
                        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            (path / LOCK_FILE).unlink(missing_ok=True)
            path.rmdir()
        finally:
            store.close()


def read_artifact_file(root: Path, parts: Sequence[str], artifact_id: str) -> str:
    """The content of the artifact file `root/parts...` (a session's `artifacts/<id>.txt`), opened without
    following a symbolic link anywhere below `root` and checked against its id before it is returned.

    ArtifactNotFoundError when there is no such file; ArtifactDamagedError for a link or a non-folder on
    the way, a file that is not a regular file, bytes that are not UTF-8, or content whose digest is not
    the id (a file changed after it was written is never served as the original)."""
    where = os.path.join(root, *parts)
    fd = _open_below(root, parts, where)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactDamagedError("is not a regular file: not read", store=where)
        data = fh.read()
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactDamagedError(f"is not UTF-8 text (byte {exc.start}): not served", store=where) from None
    try:
        integrity.check_artifact(where, artifact_id, content, None, content_digest)
        return content
    except ArtifactDamagedError:
        restored = _ESCAPED_SURROGATE.sub(lambda m: chr(int(m.group(1), 16)), content)
        if restored == content:
            raise
        integrity.check_artifact(where, artifact_id, restored, None, content_digest)
        return restored


def _open_below(root: Path, parts: Sequence[str], where: str) -> int:
    """A descriptor for root/parts, each part opened with O_NOFOLLOW from the folder before it."""
    if os.open not in os.supports_dir_fd:  # no openat (Windows): check each part, then open the path
        for i in range(1, len(parts) + 1):
            if os.path.islink(os.path.join(root, *parts[:i])):
                raise ArtifactDamagedError(f"{os.path.join(*parts[:i])} is a symbolic link: not followed", store=where)
        try:
            return os.open(where, _OPEN_FILE)
        except FileNotFoundError:
            raise ArtifactNotFoundError(f"{where}: no such artifact file") from None
        except OSError as exc:
            raise ArtifactDamagedError(f"cannot be opened ({exc.strerror or exc})", store=where) from None
    try:
        folder = os.open(root, FOLDER_FLAGS)
    except OSError:
        raise ArtifactNotFoundError(f"{root}: no such session folder") from None
    try:
        return open_parts_below(folder, parts)
    except PartOpenError as exc:
        if isinstance(exc.error, FileNotFoundError):
            raise ArtifactNotFoundError(f"{where}: no such artifact file") from None
        if exc.error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise ArtifactDamagedError(f"{os.path.join(*parts[:exc.index + 1])} is a symbolic link or not a folder: "
                                       "not followed", store=where) from None
        raise ArtifactDamagedError(f"cannot be opened ({exc.error.strerror or exc.error})", store=where) from None


# The name this backend had before there were two.
SessionStore = DiskStore

__all__ = ["DiskStore", "SessionStore", "is_session_dir", "read_artifact_file"]
