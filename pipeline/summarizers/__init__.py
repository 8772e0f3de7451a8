"""Summarizers: turn the messages before autocompact's kept tail into summary text.

`structured` (deterministic, no model) is the default; `llm` is a LangChain chat model writing the
narrative beside the structured sections (chat_model.py); other summarizers live in a module of this
package named after them and are loaded only when asked for. Third parties add one without editing
the package: an installed distribution's entry point in the group `worksurface.summarizers` (its name
is the summarizer's name in config), or a `module:Class` reference as `autocompact.summarizer`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.errors import ConfigError, PluginError
from ..core.plugins import SUMMARIZERS_GROUP, Found, installed, is_reference, load_entry_point, load_reference
from .base import Summarizer, Summary, SummaryRequest
from .structured import StructuredSummarizer

_BUILTIN: dict[str, type] = {StructuredSummarizer.name: StructuredSummarizer}
# The chat-model summarizer's name in configuration (`summarizer = "llm"`).
LLM = "llm"
# Old `llm` options, named as init_chat_model names them.
_RENAMED_OPTIONS = {"provider": "model_provider"}


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """A summarizer by name (`structured`, `llm`, ...), built with `options`.

    `llm` takes `model` (a "provider:model" string for LangChain's init_chat_model) and passes the
    other options to it (base_url, timeout, api_key_env, temperature, ...). A name other than the
    built-in ones is a `module:Class` reference, or the name of an entry point in the group
    `worksurface.summarizers`, or else module `worksurface.summarizers.<name>`, in which the class
    whose `name` attribute equals it is used."""
    if name == LLM:
        from .chat_model import chat_model_summarizer

        options = {_RENAMED_OPTIONS.get(k, k): v for k, v in options.items()}
        model = options.pop("model", None)
        if not isinstance(model, str) or not model:
            raise ConfigError('summarizer "llm" needs summarizer_options.model, e.g. "openai:gpt-5-mini"')
        return chat_model_summarizer(model, **options)
    cls = _BUILTIN.get(name)
    if cls is None:
        if is_reference(name):
            try:
                found = load_reference(name, "autocompact.summarizer")
            except PluginError as exc:
                raise PluginError(f"{exc.problem}; a chat model is summarizer = \"llm\" with "
                                  f"summarizer_options.model = {name!r}", source=exc.source) from None
            return _third_party(found, options)
        ep = next((ep for ep in installed(SUMMARIZERS_GROUP) if ep.name == name), None)
        if ep is not None:
            return _third_party(load_entry_point(SUMMARIZERS_GROUP, ep), options)
        cls = _load(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"summarizer {name!r}: {exc}") from None


def resolve_summarizer(value: Any) -> Summarizer | None:
    """What `summarizer=` may be, as a Summarizer (None stays None: the configured one is used): a
    Summarizer, a LangChain chat model, a "provider:model" string for init_chat_model (as LangChain's
    SummarizationMiddleware takes them), or a summarizer's name."""
    if value is None:
        return None
    if isinstance(value, str):
        if value in _BUILTIN or (value.isidentifier() and value != LLM):
            return get_summarizer(value)
        from .chat_model import chat_model_summarizer

        return chat_model_summarizer(value)
    if callable(getattr(value, "summarize", None)):
        summarizer: Summarizer = value
        return summarizer
    if callable(getattr(value, "invoke", None)):
        from .chat_model import ChatModelSummarizer

        return ChatModelSummarizer(value)
    raise ConfigError(f"summarizer= takes a Summarizer, a LangChain chat model or a 'provider:model' string, "
                      f"not {type(value).__name__}")


def _third_party(found: Found, options: dict[str, Any]) -> Summarizer:
    """A loaded summarizer: a class or function built with `options`, or a ready instance (which
    takes none)."""
    value = found.value
    if isinstance(value, type) or (not isinstance(value, Summarizer) and callable(value)):
        try:
            value = value(**options)
        except Exception as exc:
            raise PluginError(f"building it with summarizer_options {sorted(options)} failed "
                              f"({type(exc).__name__}: {exc})", source=found.source) from exc
    elif options:
        raise PluginError("names a summarizer instance, which takes no summarizer_options", source=found.source)
    if not isinstance(value, Summarizer):
        raise PluginError(f"names {type(value).__name__}, not a summarizer (a `name` and a summarize(request, "
                          "counter) method: worksurface.summarizers.base.Summarizer)", source=found.source)
    return value


def _load(name: str) -> type:
    known = ", ".join(sorted([*_BUILTIN, LLM, *(ep.name for ep in installed(SUMMARIZERS_GROUP))]))
    if not name.isidentifier():
        raise ConfigError(f"unknown summarizer {name!r} (known: {known})")
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        raise ConfigError(f"unknown summarizer {name!r} (known: {known})") from None
    for attr in sorted(vars(module)):
        value = getattr(module, attr)
        if isinstance(value, type) and getattr(value, "name", None) == name and hasattr(value, "summarize"):
            return value
    raise ConfigError(f"module {module.__name__} defines no summarizer named {name!r}")


__all__ = ["StructuredSummarizer", "Summarizer", "Summary", "SummaryRequest", "get_summarizer", "resolve_summarizer"]
