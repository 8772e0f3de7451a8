"""OpenAI Chat Completions (`/v1/chat/completions`): requests, tools and usage."""

from __future__ import annotations

from typing import Any, AsyncIterator

from ..formats import openai_chat
from .apis import FETCH_DESCRIPTION, FETCH_SCHEMA, FETCH_TOOL, Api, Usage, Watch, int_field
from . import fetch
from .fetch import Answered, Round
from .relay import Rewrite
from .sse import Event
from .upstream import UpstreamResponse


class OpenAIChat(Api):
    NAME = "openai-chat"
    adapter = openai_chat

    def add_fetch_tool(self, doc: dict[str, Any]) -> None:
        tools = list(doc.get("tools") or [])
        if not any(isinstance(t, dict) and (t.get("function") or {}).get("name") == FETCH_TOOL for t in tools):
            tools.append({"type": "function", "function": {"name": FETCH_TOOL, "description": FETCH_DESCRIPTION,
                                                           "parameters": FETCH_SCHEMA}})
        doc["tools"] = tools

    def fetch_round(self, doc: Any) -> Round | None:
        return fetch.chat_round(doc)

    def follow_up(self, doc: dict[str, Any], answered: Answered) -> bytes:
        return fetch.chat_follow_up(doc, answered)

    def rewrite_body(self, doc: Any, rewrite: Rewrite) -> Any:
        return fetch.chat_body(doc) if rewrite.fetch is not None else doc

    def rewrite_stream(self, response: UpstreamResponse, rewrite: Rewrite,
                       on_usage: Watch) -> AsyncIterator[bytes]:
        assert rewrite.fetch is not None        # the only rewrite of an OpenAI response
        return fetch.chat_stream(self, response, rewrite.fetch, on_usage)

    def usage_of(self, doc: Any) -> Usage | None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if not isinstance(usage, dict):
            return None
        return Usage(int_field(usage, "prompt_tokens"), int_field(usage, "prompt_tokens_details", "cached_tokens"))

    def usage_of_event(self, event: Event) -> Usage | None:
        # Only the last chunk carries usage (when the client asked for it: stream_options.include_usage).
        if '"usage"' not in event.data_text:
            return None
        return self.usage_of(event.data())
