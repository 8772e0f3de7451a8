"""A LangGraph ReAct agent whose model sees worksurface's view while the graph state keeps everything.

Runs offline: a scripted fake chat model stands in for a real one (swap in ChatOpenAI / ChatAnthropic).
"""

import warnings

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from worksurface.integrations.langgraph import make_pre_model_hook


class ScriptedModel(FakeMessagesListChatModel):
    """Replies from a script; prints how much of each tool result it was sent."""

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        for m in messages:
            if isinstance(m, ToolMessage):
                print(f"model sees the {m.name} result as {len(m.content)} characters")
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def run_tests(path: str) -> str:
    """Run the test suite under a path."""
    return "\n".join(f"{path}/test_{i}.py::test_case PASSED" for i in range(400)) + "\n400 passed"


model = ScriptedModel(responses=[
    AIMessage("", tool_calls=[{"name": "run_tests", "args": {"path": "tests"}, "id": "call_1"}]),
    AIMessage("All 400 tests pass."),
])
# One worksurface session per thread id (memory-only here; pass a directory to persist them).
# A small result budget so this short run shows a result being stored and previewed.
hook = make_pre_model_hook(None, budget={"max_result_tokens": 200, "preview_head_tokens": 40,
                                         "preview_tail_tokens": 40})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's create_agent
    from langgraph.prebuilt import create_react_agent
    agent = create_react_agent(model, [run_tests], pre_model_hook=hook, checkpointer=InMemorySaver())

state = agent.invoke({"messages": [HumanMessage("Run the tests.")]}, {"configurable": {"thread_id": "demo"}})
full = next(m for m in state["messages"] if isinstance(m, ToolMessage))
print(f"graph state keeps the full result: {len(full.content)} characters")
print("answer:", state["messages"][-1].content)
