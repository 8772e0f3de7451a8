"""What differs between the APIs the gateway speaks: how a request is read into a transcript and
written back from the view, where the usage is in a response, how a tool is declared. One subclass
per API (anthropic.py, openai_chat.py, responses.py); the call itself is the same for all (app.py)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Mapping, Sequence

from ..core.artifacts import FETCH_TOOL_DESCRIPTION, FETCH_TOOL_NAME, fetch_schema
from ..core.model import Message
from ..formats.base import Transcript
from ..formats.reuse import Memo, Reuse
from .logs import event
from .sse import Event

if TYPE_CHECKING:
    from .fetch import Answered, Round
    from .relay import Rewrite
    from .upstream import UpstreamResponse

# The one fetch_artifact definition every surface offers (the MCP server, the LangChain tool, the gateway).
FETCH_TOOL = FETCH_TOOL_NAME
FETCH_DESCRIPTION = FETCH_TOOL_DESCRIPTION
FETCH_SCHEMA: dict[str, Any] = fetch_schema()


@dataclass(frozen=True)
class Usage:
    """Input tokens the upstream reported for one call: all of them, and those read from its cache."""

    input_tokens: int
    cached_tokens: int = 0

    @property
    def share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


class Api:
    """One API's request and response shapes."""

    NAME = ""
    # The format adapter that reads and writes this API's requests.
    adapter: ModuleType
    # The request field holding the conversation.
    LIST_KEY = "messages"

    def read_doc(self, doc: Any, reuse: Reuse | None = None) -> Transcript:
        """The transcript of a parsed request (with `reuse`: only what is new is read)."""
        transcript: Transcript = self.adapter.read_doc(doc, reuse=reuse)
        return transcript

    def stable_prefix(self, doc: Any) -> list[Message]:
        """The messages up to and including the first user message, read alone: a conversation is
        recognised without reading its whole history."""
        items = doc.get(self.LIST_KEY) if isinstance(doc, dict) else None
        if not isinstance(items, list):
            return self.read_doc(doc).messages
        end = next((i + 1 for i, item in enumerate(items) if self.is_user(item)), len(items))
        return self.read_doc({**doc, self.LIST_KEY: items[:end]}).messages

    def is_user(self, item: Any) -> bool:
        return isinstance(item, dict) and item.get("role") == "user"

    def passthrough_reason(self, body: Mapping[str, Any]) -> str | None:
        """Why a request must go to the upstream untouched (its conversation lives server-side)."""
        return None

    def build(self, transcript: Transcript, view: Sequence[Message], body: Mapping[str, Any],
              offer_fetch: bool, memo: Memo | None = None) -> dict[str, Any]:
        """The request to forward: the client's, with worksurface's view as its conversation (`memo`:
        what the conversation's previous call wrote of each message, reused where it is the same)."""
        doc = self.adapter.document(transcript, view, memo)
        if memo is not None:
            memo.rotate()
        assert isinstance(doc, dict)
        doc.pop("context_management", None)     # honoured by the gateway (context_management.py)
        if offer_fetch:
            self.add_fetch_tool(doc)
        return doc

    def add_fetch_tool(self, doc: dict[str, Any]) -> None:
        """Declare fetch_artifact last among the tools (always last: the tools prefix stays stable)."""

    def declares_fetch(self, body: Mapping[str, Any]) -> bool:
        """The client has a tool of its own named fetch_artifact: the model's calls to it are the
        client's to answer, so the gateway offers (and answers) none in this request."""
        tools = body.get("tools")
        return isinstance(tools, list) and any(_tool_name(t) == FETCH_TOOL for t in tools)

    def usage_of(self, doc: Any) -> Usage | None:
        """The usage in a whole (non-streamed) response body."""
        return None

    # fetch_artifact answered by the gateway (fetch.py; relay.py for Anthropic)
    def fetch_round(self, doc: Any) -> Round | None:
        """A whole response whose model called fetch_artifact and no tool of the client's."""
        raise NotImplementedError

    def follow_up(self, doc: dict[str, Any], answered: Answered) -> bytes:
        """The forwarded request `doc` again, with the answered rounds after its conversation."""
        raise NotImplementedError

    def rewrite_body(self, doc: Any, rewrite: Rewrite) -> Any:
        """A whole response as the client gets it (fetch calls taken out, ...)."""
        raise NotImplementedError

    def rewrite_stream(self, response: UpstreamResponse, rewrite: Rewrite,
                       on_usage: Watch) -> AsyncIterator[bytes]:
        """A streamed response as the client gets it."""
        raise NotImplementedError

    def usage_of_event(self, event: Event) -> Usage | None:
        """The usage an event of a streamed response carries, if any."""
        return None


def _tool_name(tool: Any) -> Any:
    """A declared tool's name, in any of the three APIs' shapes (Chat nests it under `function`)."""
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    return function.get("name") if isinstance(function, dict) else tool.get("name")


def dumps(doc: Any) -> bytes:
    """The forwarded body: compact and deterministic, so an unchanged view is byte-identical. A lone
    surrogate (valid JSON as an escape, never as UTF-8) is written as the `\\udXXX` escape it came as."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")


# More input tokens than any model reads: a count beyond it (or below 0) is not a count.
MAX_REPORTED_TOKENS = 10**12


class OddAnswer(ValueError):
    """An upstream answer worksurface reads but does not understand: it is forwarded as it came."""


def int_field(doc: Any, *path: str) -> int:
    """A token count of a usage object (0 when absent); OddAnswer when it is there but no count."""
    for key in path:
        if not isinstance(doc, dict):
            return 0
        doc = doc.get(key)
    if doc is None:
        return 0
    if isinstance(doc, bool) or not isinstance(doc, int) or not 0 <= doc <= MAX_REPORTED_TOKENS:
        shown = repr(doc) if not isinstance(doc, int) else (str(doc) if abs(doc) < 10**20 else f"a {len(str(doc))}-digit number")
        raise OddAnswer(f"usage {'.'.join(path)} is {shown[:60]}, not a token count")
    return doc


class Watch:
    """What a response tells the gateway on its way back: its usage (`watch(usage)`), and what in it
    worksurface did not understand (`odd`: logged once per response, one line, and the answer goes
    on as it came)."""

    def __init__(self, on_usage: Callable[[Usage], None], api: str, session: str | None) -> None:
        self._on_usage = on_usage
        self.api, self.session = api, session
        self.logged = False

    def __call__(self, usage: Usage) -> None:
        self._on_usage(usage)

    def odd(self, problem: str) -> None:
        if not self.logged:
            self.logged = True
            event(logging.WARNING, "upstream answer not understood: passed on as it came", api=self.api,
                  session=self.session, problem=problem[:300])

    def follow_up_failed(self, problem: str) -> None:
        """The gateway's own follow-up (a fetch_artifact answer) found no upstream: the stream ends there."""
        event(logging.WARNING, "fetch_artifact follow-up failed: the answer ends here", api=self.api,
              session=self.session, error=problem[:300])

    def usage_of(self, read: Callable[[], Usage | None]) -> None:
        """Record the usage `read()` finds (an odd one is noted, never raised)."""
        try:
            usage = read()
        except Exception as exc:        # whatever the upstream sent, the answer goes on
            self.odd(f"{type(exc).__name__}: {exc}")
            return
        if usage is not None:
            self(usage)
