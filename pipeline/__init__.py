"""worksurface: keeps an LLM agent's context healthy over long tasks.

A harness calls `Session.prepare(transcript)` before every model call; `compact(messages)` is the
one-shot form. See DESIGN.md for the stages, reinjectors and invariants.
"""

from .config import Config
from .errors import (ArtifactNotFoundError, ConfigError, ContextOverflowError, FormatError,
                     SessionError, SessionLockedError, SummarizerError, UnknownFormatError,
                     WorksurfaceError)
from .model import Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from .session import InvariantError, Prepared, PrepareReport, Session, compact
from .tokens import TokenCounter

__version__ = "0.1.0"

__all__ = [
    "ArtifactNotFoundError", "Config", "InvariantError", "Prepared", "PrepareReport", "Session", "compact", "ConfigError", "ContextOverflowError", "FormatError", "Image",
    "Message", "Opaque", "Origin", "SessionError", "SessionLockedError", "SummarizerError", "Text",
    "Thinking", "TokenCounter", "ToolCall", "ToolResult", "UnknownFormatError", "WorksurfaceError",
]
