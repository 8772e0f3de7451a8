"""worksurface: keeps an LLM agent's context healthy over long tasks.

A harness calls `Session.prepare(transcript)` before every model call; `compact(messages)` is the
one-shot form. See DESIGN.md for the stages, reinjectors and invariants.
"""

from .config import Config
from .errors import (ArtifactNotFoundError, ConfigError, ContextOverflowError, FormatError,
                     SessionError, SessionLockedError, SummarizerError, UnknownFormatError,
                     WorksurfaceError)
from .model import Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from .tokens import TokenCounter

# The session pulls in LangGraph (seconds to import); load it on first use so `import worksurface`
# and the commands that don't compact stay quick.
_LAZY = {"InvariantError", "Prepared", "PrepareReport", "Session", "compact"}


def __getattr__(name: str):
    if name in _LAZY:
        from . import session
        return getattr(session, name)
    raise AttributeError(f"module 'worksurface' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "ArtifactNotFoundError", "Config", "InvariantError", "Prepared", "PrepareReport", "Session", "compact", "ConfigError", "ContextOverflowError", "FormatError", "Image",
    "Message", "Opaque", "Origin", "SessionError", "SessionLockedError", "SummarizerError", "Text",
    "Thinking", "TokenCounter", "ToolCall", "ToolResult", "UnknownFormatError", "WorksurfaceError",
]
