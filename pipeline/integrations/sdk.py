"""Helpers for loops written directly against the OpenAI or Anthropic SDK.

Keep the full history in your own list and pass it before every call; you get back the same shape
(a message list, or a whole request dict with its model, tools and system kept) holding the view,
plus `cache_edits`: the tool-call ids whose results worksurface cleared, for providers that can
clear them server-side instead of resending the prefix.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..formats import anthropic_messages, openai_chat

if TYPE_CHECKING:
    from ..session.session import Session

Shape = list[Any] | dict[str, Any]


def prepare_openai(messages: Shape, session: "Session", **prepare_kw: Any) -> tuple[Shape, list[str]]:
    """Chat Completions `messages` (or a whole request dict) -> (the view in the same shape,
    cache_edits). SDK message objects in the list (an appended `response.choices[0].message`) are
    accepted. `prepare_kw` (usage=, now=) goes to `session.prepare`."""
    return _prepare(openai_chat, messages, session, prepare_kw)


def prepare_anthropic(request_or_messages: Shape, session: "Session",
                      **prepare_kw: Any) -> tuple[Shape, list[str]]:
    """A Messages API request dict (system, messages, tools, ...) or bare message list -> (the view
    in the same shape, cache_edits)."""
    return _prepare(anthropic_messages, request_or_messages, session, prepare_kw)


def _prepare(adapter: Any, payload: Shape, session: "Session",
             prepare_kw: dict[str, Any]) -> tuple[Shape, list[str]]:
    transcript = adapter.read(json.dumps(payload, default=_sdk_object, ensure_ascii=False))
    prepared = session.prepare(transcript, **prepare_kw)
    return json.loads(adapter.write(transcript, prepared.messages)), list(prepared.cache_edits)


def _sdk_object(value: Any) -> Any:
    """JSON for an SDK (pydantic) object, the way the SDKs serialize request params themselves."""
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(f"{type(value).__name__} is not JSON-serializable and not an SDK model")
    return dump(mode="json", exclude_unset=True)
