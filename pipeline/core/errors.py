"""Named exceptions: every failure a caller can act on has its own class."""

from __future__ import annotations

from typing import Any


class WorksurfaceError(Exception):
    """Base class for every error worksurface raises on purpose."""


class FormatError(WorksurfaceError):
    """Input that is not the format it claims to be; names the file, line or record, and the problem."""

    def __init__(self, problem: str, *, path: str | None = None, line: int | None = None,
                 record: str | None = None) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        self.record = record
        where = path or "<input>"
        if line is not None:
            where += f":{line}"
        if record is not None:
            where += f" (record {record})"
        super().__init__(f"{where}: {problem}")


class UnknownFormatError(FormatError):
    """`--format auto` could not recognise the input."""


class OutputPathError(WorksurfaceError):
    """An output path that cannot or must not be written (a directory, FIFO, symlink, the input itself,
    a parent that is a file); raised before any work is done, so nothing is half-written."""

    def __init__(self, problem: str, *, path: str) -> None:
        self.problem = problem
        self.path = path
        super().__init__(f"{path}: {problem}")


class SourceChangedError(OutputPathError):
    """The file to replace changed after it was read (a harness still appending to it): nothing of it
    is lost; `saved` names the file that holds what arrived during the write, when anything did."""

    def __init__(self, problem: str, *, path: str, saved: str | None = None) -> None:
        self.saved = saved
        super().__init__(problem, path=path)


class WorkspaceReadError(WorksurfaceError):
    """A workspace file that was not read: outside the root, not a regular file, swapped for a symlink
    while being opened, too large, ... `reason` says which, in words for a report."""

    def __init__(self, reason: str, *, path: str) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}")


class ConfigError(WorksurfaceError):
    """A configuration value or file that cannot be used."""


class UntrustedConfigError(ConfigError):
    """A project's configuration file (it came with the repository) sets a setting only the user's own
    configuration may set (code to import, where the transcript or a key is sent, which files are read),
    and the user has not trusted that file as it is: `keys` names them, `path` the file."""

    def __init__(self, message: str, *, keys: tuple[str, ...], path: str) -> None:
        self.keys = keys
        self.path = path
        super().__init__(message)


class PluginError(ConfigError):
    """A third-party stage, reinjector or summarizer that cannot be used: an entry point or a
    `module:OBJECT` reference that does not load, or loads something that is not what it must be.
    `source` names the entry point (`group:name = value`) or the config key; `problem` says what."""

    def __init__(self, problem: str, *, source: str) -> None:
        self.problem = problem
        self.source = source
        super().__init__(f"{source}: {problem}")


class ContextOverflowError(WorksurfaceError):
    """Compaction could not bring the view under the threshold; carries the figures."""

    def __init__(self, message: str, *, tokens: int, threshold: int, prepared: Any = None) -> None:
        self.tokens = tokens
        self.threshold = threshold
        # The view that was built (and committed) anyway, for a harness that decides to send it or
        # to measure it: a `worksurface.Prepared`, or None.
        self.prepared = prepared
        super().__init__(f"{message} (view {tokens} tokens, threshold {threshold})")


class SessionError(WorksurfaceError):
    """A session directory that cannot be opened or is inconsistent."""


class SessionLockedError(SessionError):
    """Another process holds the session lock past the timeout."""


class DatabaseUnreachableError(SessionError):
    """The session's database server cannot be reached (refused, timed out connecting, or every pooled
    connection dead); names `host:port`, so it never reads as another process holding the session."""

    def __init__(self, message: str, *, address: str) -> None:
        self.address = address
        super().__init__(message)


class DatabaseTimeoutError(SessionError):
    """A wait on the session's database passed its configured bound; `limit` names which one (the
    `StoreConfig` field: `reply_timeout_seconds`, `statement_timeout_seconds`, `lock_timeout_seconds`,
    ...) and `seconds` its value. What the call was writing may or may not have landed: the session
    reads the stored state again before it goes on."""

    def __init__(self, message: str, *, limit: str, seconds: float) -> None:
        self.limit = limit
        self.seconds = seconds
        super().__init__(message)


class CommitConflictError(SessionError):
    """A commit refused because the session moved on from the version it was based on (another writer
    committed meanwhile): nothing of it was written; the session reads the stored state again."""


class SessionNotFoundError(SessionError):
    """No session by that id (or at that location) exists, where one was asked to exist."""


class InvalidSessionIdError(SessionError):
    """A session id that cannot name a session where it is asked to (missing for a database, or not a
    safe directory name)."""


class StoreDamagedError(SessionError):
    """A session store whose stored values do not hold together: a garbage record, a missing entry, a
    length past the end, an emptied database. Names the store, the value and the problem; the store
    is left as it is (never silently started over)."""

    def __init__(self, problem: str, *, store: str, key: str | None = None) -> None:
        self.problem = problem
        self.store = store
        self.key = key
        where = store if key is None else f"{store}: stored value {key!r}"
        super().__init__(f"{where}: {problem}")


class ArtifactDamagedError(StoreDamagedError):
    """An artifact that cannot be served as what its id names: its content's digest is not its id (or
    its record's digest), or its file is not a regular file of the session (a symbolic link, a device,
    a folder on the way that is a link). It is never served."""


class StoreSchemaError(SessionError):
    """A database whose worksurface schema this version cannot use (newer than it knows, or not
    worksurface's)."""


class MissingExtraError(WorksurfaceError):
    """A feature needs an optional dependency that is not installed; says which extra brings it."""

    def __init__(self, feature: str, extra: str, missing: str) -> None:
        self.feature = feature
        self.extra = extra
        self.missing = missing
        super().__init__(f"{feature} needs {missing}, which is not installed: "
                         f"pip install 'worksurface[{extra}]'")


class SummarizerError(WorksurfaceError):
    """A summarizer failed to produce a usable summary."""


class ArtifactNotFoundError(WorksurfaceError, KeyError):
    """No artifact or stored original with that id exists in the session."""


class HookError(WorksurfaceError):
    """A harness hook call worksurface cannot answer: its JSON input is malformed or names a
    transcript that cannot be read, or a hook's settings file cannot be updated."""
