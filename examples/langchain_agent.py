"""A LangChain v1 agent (`create_agent`) whose model sees worksurface's view while the graph state keeps
everything; the model opens what a marker replaced with the middleware's fetch_artifact tool.

Runs offline: a scripted fake chat model stands in for a real one (swap in ChatOpenAI / ChatAnthropic).
"""

import re

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from worksurface.integrations.middleware import WorksurfaceMiddleware


class ScriptedModel(FakeMessagesListChatModel):
    """Runs the tests, then fetches the end of the log the view replaced, then answers."""

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        results = [m for m in messages if isinstance(m, ToolMessage)]  # the view ends with the status bar
        last = results[-1] if results else None
        if last is None:
            reply = AIMessage("", tool_calls=[{"name": "run_tests", "args": {"path": "tests"}, "id": "c1"}])
        elif last.name == "run_tests":
            print(f"model sees the run_tests result as {len(last.content)} characters")
            artifact = re.search(r"artifact ([0-9a-f]{16})", last.content).group(1)
            reply = AIMessage("", tool_calls=[{"name": "fetch_artifact", "id": "c2",
                                               "args": {"id": artifact, "start_line": 401}}])
        else:
            print(f"fetch_artifact returns: {last.content}")
            reply = AIMessage("All 400 tests pass.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def run_tests(path: str) -> str:
    """Run the test suite under a path."""
    return "\n".join(f"{path}/test_{i}.py::test_case PASSED" for i in range(400)) + "\n400 passed"


# One worksurface session per thread id (memory-only here; pass a directory to persist them). A
# small result budget so this short run shows a result being stored and previewed.
# `summarizer=` also takes a chat model or a "provider:model" string, as SummarizationMiddleware does.
middleware = WorksurfaceMiddleware(None, budget={"max_result_tokens": 200, "preview_head_tokens": 40,
                                                 "preview_tail_tokens": 40})
agent = create_agent(ScriptedModel(responses=[]), [run_tests], middleware=[middleware], checkpointer=InMemorySaver())
state = agent.invoke({"messages": [HumanMessage("Run the tests.")]}, {"configurable": {"thread_id": "demo"}})
full = next(m for m in state["messages"] if isinstance(m, ToolMessage))
print(f"graph state keeps the full result: {len(full.content)} characters")
print("answer:", state["messages"][-1].content)
