"""worksurface: keeps an LLM agent's context healthy over long tasks.

A harness calls `Session.prepare(transcript)` before every model call; `compact(messages)` is the
one-shot form. The stages (`worksurface.stages`) reduce the view in a fixed order; after a
compaction the reinjectors (`worksurface.reinjectors`) restore the working surface.
"""

import logging
from typing import TYPE_CHECKING

from .core.lazy import lazy_getattr

from .core.errors import (ArtifactDamagedError, ArtifactNotFoundError, ConfigError, ContextOverflowError, FormatError,
                     InvalidSessionIdError, MissingExtraError, SessionError, SessionLockedError,
                     SessionNotFoundError, StoreDamagedError, StoreSchemaError, SummarizerError,
                     UnknownFormatError, WorksurfaceError)

if TYPE_CHECKING:
    from .core.config import Config
    from .core.model import Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
    from .session.locations import delete_session, list_sessions
    from .session.session import InvariantError, Prepared, PrepareReport, Session, compact
    from .core.tokens import TokenCounter

# Imported on first use (PEP 562): the session pulls in LangGraph (seconds), config pydantic and tokens
# tiktoken; `import worksurface.x` (the pytest plugin pytest loads in every run, the CLI's help) must
# not pay for them before anything is asked of them.
_LAZY = {
    "Config": "core.config",
    **dict.fromkeys(("Image", "Message", "Opaque", "Origin", "Text", "Thinking", "ToolCall", "ToolResult"),
                    "core.model"),
    "TokenCounter": "core.tokens",
    **dict.fromkeys(("InvariantError", "Prepared", "PrepareReport", "Session", "compact"), "session.session"),
    **dict.fromkeys(("delete_session", "list_sessions"), "session.locations"),
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())

# A library logs and leaves the handling to its user: notices (damaged lines read around, a
# compaction over its target, ...) go to the `worksurface` logger; the CLI prints them to stderr.
logging.getLogger("worksurface").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "ArtifactDamagedError", "ArtifactNotFoundError", "Config", "InvariantError", "Prepared", "PrepareReport", "Session", "compact", "ConfigError", "ContextOverflowError", "FormatError", "Image",
    "Message", "Opaque", "Origin", "SessionError", "SessionLockedError", "SummarizerError", "Text",
    "Thinking", "TokenCounter", "ToolCall", "ToolResult", "UnknownFormatError", "WorksurfaceError",
    "InvalidSessionIdError", "MissingExtraError", "SessionNotFoundError", "StoreDamagedError", "StoreSchemaError",
    "delete_session", "list_sessions",
]
