"""OpenAI Responses (`/v1/responses`): requests with the full input, tools and usage.

A request that continues a conversation kept server-side (`previous_response_id`, or a
`conversation`) carries only what is new: worksurface cannot see, so cannot manage, the rest; it
is passed through untouched and the response says so (`X-Worksurface: passthrough`).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Mapping

from ..formats import openai_responses
from .apis import FETCH_DESCRIPTION, FETCH_SCHEMA, FETCH_TOOL, Api, Usage, Watch, int_field
from . import fetch
from .fetch import Answered, Round
from .relay import Rewrite
from .sse import Event
from .upstream import UpstreamResponse


class OpenAIResponses(Api):
    NAME = "openai-responses"
    adapter = openai_responses
    LIST_KEY = "input"

    def is_user(self, item: Any) -> bool:
        return isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"

    def passthrough_reason(self, body: Mapping[str, Any]) -> str | None:
        if body.get("previous_response_id"):
            return "previous_response_id"
        if body.get("conversation"):
            return "conversation"
        return None

    def add_fetch_tool(self, doc: dict[str, Any]) -> None:
        tools = list(doc.get("tools") or [])
        if not any(isinstance(t, dict) and t.get("name") == FETCH_TOOL for t in tools):
            tools.append({"type": "function", "name": FETCH_TOOL, "description": FETCH_DESCRIPTION,
                          "parameters": FETCH_SCHEMA, "strict": False})
        doc["tools"] = tools

    def fetch_round(self, doc: Any) -> Round | None:
        return fetch.responses_round(doc)

    def follow_up(self, doc: dict[str, Any], answered: Answered) -> bytes:
        return fetch.responses_follow_up(doc, answered)

    def rewrite_body(self, doc: Any, rewrite: Rewrite) -> Any:
        return fetch.responses_body(doc) if rewrite.fetch is not None else doc

    def rewrite_stream(self, response: UpstreamResponse, rewrite: Rewrite,
                       on_usage: Watch) -> AsyncIterator[bytes]:
        assert rewrite.fetch is not None        # the only rewrite of an OpenAI response
        return fetch.responses_stream(self, response, rewrite.fetch, on_usage)

    def usage_of(self, doc: Any) -> Usage | None:
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if not isinstance(usage, dict):
            return None
        return Usage(int_field(usage, "input_tokens"), int_field(usage, "input_tokens_details", "cached_tokens"))

    def usage_of_event(self, event: Event) -> Usage | None:
        if event.name != "response.completed" and '"response.completed"' not in event.data_text[:60]:
            return None
        data = event.data()
        return self.usage_of(data.get("response")) if isinstance(data, dict) else None
