"""Named exceptions: every failure a caller can act on has its own class."""

from __future__ import annotations


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


class ConfigError(WorksurfaceError):
    """A configuration value or file that cannot be used."""


class ContextOverflowError(WorksurfaceError):
    """Compaction could not bring the view under the threshold; carries the figures."""

    def __init__(self, message: str, *, tokens: int, threshold: int) -> None:
        self.tokens = tokens
        self.threshold = threshold
        super().__init__(f"{message} (view {tokens} tokens, threshold {threshold})")


class SessionError(WorksurfaceError):
    """A session directory that cannot be opened or is inconsistent."""


class SessionLockedError(SessionError):
    """Another process holds the session lock past the timeout."""


class SummarizerError(WorksurfaceError):
    """A summarizer failed to produce a usable summary."""


class ArtifactNotFoundError(WorksurfaceError, KeyError):
    """No artifact or stored original with that id exists in the session."""
