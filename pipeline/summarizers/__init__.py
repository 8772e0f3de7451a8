"""Summarizers: turn the messages before autocompact's kept tail into summary text.

`structured` (deterministic, no model) is the default; other summarizers live in a module of this
package named after them and are loaded only when asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.errors import ConfigError
from .base import Summarizer, Summary, SummaryRequest
from .structured import StructuredSummarizer

_BUILTIN: dict[str, type] = {StructuredSummarizer.name: StructuredSummarizer}


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """A summarizer by name (`structured`, `llm`, ...), built with `options`.

    A name other than the built-in ones is looked up as module `worksurface.summarizers.<name>`,
    in which the class whose `name` attribute equals it is used."""
    cls = _BUILTIN.get(name)
    if cls is None:
        cls = _load(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"summarizer {name!r}: {exc}") from None


def _load(name: str) -> type:
    if not name.isidentifier():
        raise ConfigError(f"unknown summarizer {name!r} (known: {', '.join(sorted(_BUILTIN))}, llm)")
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        raise ConfigError(f"unknown summarizer {name!r} (known: {', '.join(sorted(_BUILTIN))}, llm)") from None
    for attr in sorted(vars(module)):
        value = getattr(module, attr)
        if isinstance(value, type) and getattr(value, "name", None) == name and hasattr(value, "summarize"):
            return value
    raise ConfigError(f"module {module.__name__} defines no summarizer named {name!r}")


__all__ = ["StructuredSummarizer", "Summarizer", "Summary", "SummaryRequest", "get_summarizer"]
