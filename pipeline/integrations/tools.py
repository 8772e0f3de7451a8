"""The `fetch_artifact` tool as a LangChain tool, so an agent whose view worksurface compacts can open
what a marker replaced (the same definition every other surface offers: `core.artifacts`).

The tool answers from the session of the graph run that calls it: the thread id and agent of its
run config, as the middleware and the pre-model hook key their sessions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.artifacts import FETCH_TOOL_DESCRIPTION, FETCH_TOOL_NAME, fetch, fetch_schema
from .sessions import SessionPool, agent_id_of, thread_id_of

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


def fetch_artifact_tool(pool: SessionPool) -> "BaseTool":
    """A LangChain tool answering `fetch_artifact` calls from `pool`'s session for the running thread."""
    from langchain_core.tools import StructuredTool

    def fetch_artifact(**arguments: Any) -> str:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # called outside a graph run: the pool's default thread
            config = {}
        return fetch(pool.get(thread_id_of(config), agent_id_of(config)), arguments)

    return StructuredTool.from_function(fetch_artifact, name=FETCH_TOOL_NAME, description=FETCH_TOOL_DESCRIPTION,
                                        args_schema=fetch_schema())
