"""A LangChain agent whose LangGraph checkpoints and worksurface sessions share one PostgreSQL database,
so any worker continues any thread with the same compacted view. Pass a database URL (or set WORKSURFACE_POSTGRES),
or nothing for a throwaway cluster (PostgreSQL's server binaries). A scripted fake model stands in for a real one."""

import sys
import uuid
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from worksurface.integrations.middleware import WorksurfaceMiddleware
from worksurface.integrations.postgres import PostgresSessions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's pgcluster, for the fallback
from pgcluster import database_for_example  # noqa: E402
DB_URI = database_for_example(sys.argv)


class ScriptedModel(FakeMessagesListChatModel):
    """Replies from a script; prints how much of the tool result it was sent."""
    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        for m in messages:
            if isinstance(m, ToolMessage):
                print(f"model sees the run_tests result as {len(m.content)} characters")
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def run_tests(path: str) -> str:
    """Run the test suite under a path."""
    return "\n".join(f"{path}/test_{i}.py::test_case PASSED" for i in range(400)) + "\n400 passed"


model = ScriptedModel(responses=[AIMessage("", tool_calls=[{"name": "run_tests", "args": {"path": "tests"},
                                                           "id": "call_1"}]), AIMessage("All 400 tests pass.")])
# The pool LangGraph's docs use for PostgresSaver; worksurface shares it (its own worksurface_* tables).
with ConnectionPool(DB_URI, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}) as pool:
    checkpointer = PostgresSaver(pool)
    checkpointer.setup()
    sessions = PostgresSessions.beside(checkpointer, budget={"max_result_tokens": 200})
    agent = create_agent(model, [run_tests], checkpointer=checkpointer, middleware=[WorksurfaceMiddleware(sessions)])
    thread = f"demo-{uuid.uuid4().hex[:8]}"
    state = agent.invoke({"messages": [HumanMessage("Run the tests.")]}, {"configurable": {"thread_id": thread}})
    full = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    print(f"graph state keeps the full result: {len(full.content)} characters")
    with sessions.session(thread) as session:  # what any other worker opens for this thread
        print(f"the thread's worksurface session, read back from the database: {len(session.view())} messages")
    print("answer:", state["messages"][-1].content)
    sessions.delete_thread(thread)
    checkpointer.delete_thread(thread)
