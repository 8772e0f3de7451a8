"""LangChain v1 agent middleware: the model gets worksurface's view, the agent state keeps everything.

Middleware that summarizes by rewriting `state["messages"]` changes the history on every turn, so
the provider's prompt cache misses; this one only swaps the messages of the model request, and
worksurface's sticky decisions keep that view's prefix stable from call to call.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence, cast

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
except ImportError as exc:  # langchain is an optional extra
    raise ImportError("WorksurfaceMiddleware needs LangChain v1: "
                      "pip install 'worksurface[langchain]'") from exc

from .sessions import SessionPool, SessionSource, agent_id_of, prepare_view, thread_id_of
from .tools import fetch_artifact_tool

if TYPE_CHECKING:
    from langchain_core.messages import AnyMessage, BaseMessage


class WorksurfaceMiddleware(AgentMiddleware):
    """For `create_agent(middleware=[WorksurfaceMiddleware(...)])`. Sessions as in
    `make_pre_model_hook`: a base directory, a `postgresql://` URL (sessions shared by every machine
    running the agent), None (memory-only) or a callable key -> Session,
    one per LangGraph thread id and named agent (`create_agent(name=...)`); `config` goes to
    `Session.open` (`summarizer=` takes a LangChain chat model or a "provider:model" string, as
    SummarizationMiddleware does). The agent gets the `fetch_artifact` tool (`self.tools`), so the
    model can open what a marker in its view replaced."""

    def __init__(self, sessions: SessionSource = None, **config: Any) -> None:
        super().__init__()
        self.sessions = SessionPool(sessions, **config)
        self.tools = [fetch_artifact_tool(self.sessions)]

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        view = prepare_view(self.sessions, request.messages, *_session_of(request))
        return handler(request.override(messages=_as_any(view)))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse:
        # prepare may summarize (an HTTP call) or touch disk: keep it off the event loop.
        view = await asyncio.to_thread(prepare_view, self.sessions, request.messages, *_session_of(request))
        return await handler(request.override(messages=_as_any(view)))


def _as_any(view: Sequence[BaseMessage]) -> list[AnyMessage]:
    """The view as the request's message type: `from_worksurface` builds only the concrete LangChain
    classes (or returns the agent's own messages), all members of `AnyMessage`."""
    return cast("list[AnyMessage]", list(view))


def _session_of(request: ModelRequest) -> tuple[str, str | None]:
    """(thread id, agent id) of the running graph: from its config (a named agent's config carries
    its name), else the thread from the runtime's execution info."""
    from langgraph.config import get_config

    try:
        config = get_config()
        return thread_id_of(config), agent_id_of(config)
    except RuntimeError:  # called outside a graph run
        info = getattr(request.runtime, "execution_info", None)
        return thread_id_of({"configurable": {"thread_id": getattr(info, "thread_id", None)}}), None
