"""LangGraph integration: worksurface as a pre-model hook or as a subgraph.

The hook returns the view as `llm_input_messages`, which `create_react_agent` sends to the model
instead of `messages`: the `messages` channel keeps the full history (nothing is lost, the history
stays append-only; LangGraph does keep the latest view in its own `llm_input_messages` channel)
while the model sees the compacted view, whose prefix worksurface keeps byte-stable between calls
so the provider's prompt cache keeps hitting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from .sessions import SessionPool, SessionSource, agent_id_of, prepare_view, thread_id_of
from .tools import fetch_artifact_tool

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph.state import CompiledStateGraph


class PreModelHook(Protocol):
    """A LangGraph node: (state, config) -> {"llm_input_messages": view}. A Protocol rather than a
    Callable so LangGraph's `add_node` sees the parameter names it dispatches on."""

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]: ...


def make_pre_model_hook(sessions: SessionSource = None, **config: Any) -> PreModelHook:
    """A node for `create_react_agent(pre_model_hook=...)`: (state, config) ->
    {"llm_input_messages": view}, one session per `config["configurable"]["thread_id"]` and agent
    (`configurable.agent_id`, or the `lc_agent_name` a named agent's config carries).
    `sessions`: a base directory, None for memory-only sessions, or a callable thread_id -> Session;
    `config` goes to `Session.open`. The pool is reachable as `hook.sessions` (to close it), and
    `hook.tools` holds the `fetch_artifact` tool to give the agent, so the model can open what a
    marker in its view replaced."""
    pool = SessionPool(sessions, **config)

    def worksurface_pre_model_hook(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"] if isinstance(state, dict) else state.messages
        return {"llm_input_messages": prepare_view(pool, messages, thread_id_of(config), agent_id_of(config))}

    worksurface_pre_model_hook.sessions = pool  # type: ignore[attr-defined]
    worksurface_pre_model_hook.tools = [fetch_artifact_tool(pool)]  # type: ignore[attr-defined]
    return worksurface_pre_model_hook


class _Input(TypedDict):
    messages: list[Any]


class _Output(TypedDict):
    llm_input_messages: list[Any]


class _State(_Input, _Output):
    pass


def make_compaction_subgraph(sessions: SessionSource = None, **config: Any) -> "CompiledStateGraph":
    """The same step as a compiled graph for custom graphs: {"messages"} in, {"llm_input_messages"}
    out. Add it as a node (the parent state needs an `llm_input_messages` key for the model node to
    read) or invoke it from a node with the node's config, so the thread id comes along."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(_State, input_schema=_Input, output_schema=_Output)
    graph.add_node("worksurface", make_pre_model_hook(sessions, **config))
    graph.add_edge(START, "worksurface")
    graph.add_edge("worksurface", END)
    return graph.compile()
