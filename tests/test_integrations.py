"""LangChain / LangGraph integrations and SDK helpers, in real agent runs with fake chat models."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (AIMessage, BaseMessage, ChatMessage, FunctionMessage, HumanMessage,
                                     SystemMessage, ToolMessage)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from worksurface.core.errors import FormatError
from worksurface.integrations.langchain_messages import ConversionCache, from_worksurface, to_worksurface
from worksurface.integrations.langgraph import make_compaction_subgraph, make_pre_model_hook
from worksurface.integrations.sessions import SessionPool, thread_dirname
from worksurface.core.model import Image, Message, Origin, Text, Thinking, ToolCall, ToolResult, orphans
from worksurface.core.serial import message_from_json, message_to_json

# Results over this many tokens are replaced in the view (the budget stage's smallest cap), with
# short previews, so a single tool call makes the view differ from the state.
SMALL_BUDGET = {"budget": {"max_result_tokens": 100, "preview_head_tokens": 20, "preview_tail_tokens": 20}}
BIG_OUTPUT = "\n".join(f"line {i} of build.log: compiling module_{i}" for i in range(300))


class RecordingModel(FakeMessagesListChatModel):
    """Answers from a script and records the messages of every call; tools binding is a no-op."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> "RecordingModel":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def run_build(target: str) -> str:
    """Run the build for a target."""
    return BIG_OUTPUT


def script() -> list[AIMessage]:
    return [AIMessage(content="", tool_calls=[{"name": "run_build", "args": {"target": "all"}, "id": "call_1"}]),
            AIMessage(content="The build printed 300 lines.")]


def open_session(path: Path | None = None) -> Any:
    from worksurface import Session
    return Session.open(path, **SMALL_BUDGET)


def assert_paired(messages: list[BaseMessage]) -> None:
    """Every tool call answered right after its AI message, every ToolMessage preceded by its call."""
    pending: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending, f"tool message {m.tool_call_id} without a call"
            pending.discard(m.tool_call_id)
        else:
            assert not pending, f"calls {pending} not answered before {type(m).__name__}"
            pending = {c["id"] for c in getattr(m, "tool_calls", None) or []}
    assert not pending


def check_run(model: RecordingModel, state: list[BaseMessage]) -> None:
    """The model got the view (big result replaced), the state kept the full history."""
    state_result = next(m for m in state if isinstance(m, ToolMessage))
    assert state_result.content == BIG_OUTPUT
    assert [type(m).__name__ for m in state] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    second_call = model.seen[-1]
    assert_paired(second_call)
    sent_result = next(m for m in second_call if isinstance(m, ToolMessage))
    assert sent_result.tool_call_id == "call_1" and sent_result.id == state_result.id
    assert len(sent_result.content) < len(BIG_OUTPUT) // 2
    assert "line 0 of build.log" in sent_result.content  # the head preview
    assert any(isinstance(m, HumanMessage) and m.content == "build it" for m in second_call)


# --- LangGraph create_react_agent with the pre-model hook --------------------------------------------

def react_agent(model: RecordingModel, hook: Any) -> Any:
    with warnings.catch_warnings():  # create_react_agent is deprecated in favour of create_agent
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent
        return create_react_agent(model, [run_build], pre_model_hook=hook, checkpointer=InMemorySaver())


def test_react_agent_model_gets_view_state_keeps_history(tmp_path: Path) -> None:
    model = RecordingModel(responses=script())
    hook = make_pre_model_hook(tmp_path, **SMALL_BUDGET)
    agent = react_agent(model, hook)
    out = agent.invoke({"messages": [HumanMessage("build it")]}, {"configurable": {"thread_id": "t-1"}})
    check_run(model, out["messages"])
    saved = agent.get_state({"configurable": {"thread_id": "t-1"}}).values
    assert saved["messages"] == out["messages"]  # the checkpoint holds the full history
    assert (tmp_path / "t-1").is_dir()
    hook.sessions.close()


def test_hook_keys_sessions_by_thread_id() -> None:
    opened: list[str] = []

    def factory(thread_id: str) -> Any:
        opened.append(thread_id)
        return open_session()

    hook = make_pre_model_hook(factory)
    for thread in ("a", "b", "a"):
        agent = react_agent(RecordingModel(responses=script()), hook)
        agent.invoke({"messages": [HumanMessage("build it")]}, {"configurable": {"thread_id": thread}})
    assert opened == ["a", "b"]


def test_compaction_subgraph_returns_view(tmp_path: Path) -> None:
    graph = make_compaction_subgraph(None, **SMALL_BUDGET)
    history = [HumanMessage("build it", id="h"), *script()[:1],
               ToolMessage(BIG_OUTPUT, tool_call_id="call_1", id="t")]
    history[1].id = "a"
    out = graph.invoke({"messages": history}, {"configurable": {"thread_id": "sub"}})
    assert set(out) == {"llm_input_messages"}
    view = out["llm_input_messages"]
    assert view[0] is history[0] and view[1] is history[1]  # unchanged: the very objects
    assert view[2].tool_call_id == "call_1" and len(view[2].content) < len(BIG_OUTPUT)
    assert history[2].content == BIG_OUTPUT


# --- LangChain v1 create_agent with the middleware ---------------------------------------------------

def test_create_agent_middleware_sends_view_keeps_state() -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent

    from worksurface.integrations.middleware import WorksurfaceMiddleware

    model = RecordingModel(responses=script())
    middleware = WorksurfaceMiddleware(None, **SMALL_BUDGET)
    agent = create_agent(model, [run_build], middleware=[middleware], checkpointer=InMemorySaver(),
                         system_prompt="You build things.")
    config = {"configurable": {"thread_id": "mw"}}
    out = agent.invoke({"messages": [HumanMessage("build it")]}, config)
    check_run(model, out["messages"])
    assert isinstance(model.seen[-1][0], SystemMessage)  # the agent's system prompt still first
    # async path: same view, state still complete
    model.seen.clear()
    model.responses = [AIMessage(content="done")]
    model.i = 0
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("again")]}, config))
    assert next(m for m in out["messages"] if isinstance(m, ToolMessage)).content == BIG_OUTPUT
    sent = next(m for m in model.seen[-1] if isinstance(m, ToolMessage))
    assert len(sent.content) < len(BIG_OUTPUT) // 2
    middleware.sessions.close()


class FetchingModel(RecordingModel):
    """Runs the build, then fetches lines of the result the view replaced (the id its marker names)."""

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        self.seen.append(list(messages))
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            reply = script()[0]
        elif results[-1].name == "run_build":
            artifact = re.search(r"artifact ([0-9a-f]{16})", str(results[-1].content))
            assert artifact, results[-1].content
            reply = AIMessage(content="", tool_calls=[{"name": "fetch_artifact", "id": "call_2", "args": {
                "id": artifact.group(1), "start_line": 11, "end_line": 12}}])
        else:
            reply = AIMessage(content="fetched")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.mark.parametrize("persisted", [False, True])
def test_middleware_offers_fetch_artifact_and_it_answers_from_the_threads_session(tmp_path: Path,
                                                                                 persisted: bool) -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent

    from worksurface.core.artifacts import FETCH_TOOL_NAME
    from worksurface.integrations.middleware import WorksurfaceMiddleware

    middleware = WorksurfaceMiddleware(tmp_path if persisted else None, **SMALL_BUDGET)
    assert [t.name for t in middleware.tools] == [FETCH_TOOL_NAME]
    agent = create_agent(FetchingModel(responses=[]), [run_build], middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("build it")]}, {"configurable": {"thread_id": "fetch"}})
    fetched = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == FETCH_TOOL_NAME]
    assert fetched and fetched[0].content == "\n".join(BIG_OUTPUT.splitlines()[10:12])
    assert out["messages"][-1].content == "fetched"
    middleware.sessions.close()


def test_pre_model_hook_offers_the_tool_too() -> None:
    from worksurface.core.artifacts import FETCH_TOOL_NAME

    hook = make_pre_model_hook(None)
    assert [t.name for t in hook.tools] == [FETCH_TOOL_NAME]  # type: ignore[attr-defined]


# --- lossless conversion -----------------------------------------------------------------------------

class Artifact:
    """A tool artifact that is not JSON (it only survives through the original object)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Artifact)


def history() -> list[BaseMessage]:
    return [
        SystemMessage("be careful", id="s"),
        HumanMessage(content=[{"type": "text", "text": "look"},
                              {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}], id="h"),
        AIMessage(content=[{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                           {"type": "text", "text": "reading"},
                           {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}}],
                  tool_calls=[{"name": "read", "args": {"path": "a.py"}, "id": "c1"}],
                  additional_kwargs={"provider_field": 1}, response_metadata={"model_name": "m"},
                  usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}, id="a"),
        ToolMessage("no such file", tool_call_id="c1", status="error", name="read", id="t"),
        AIMessage(content="", tool_calls=[{"name": "shell", "args": {"cmd": "ls"}, "id": "c2"}], id="a2"),
        ToolMessage("a.py\nb.py", tool_call_id="c2", artifact=Artifact(), name="shell", id="t2"),
        HumanMessage("thanks"),  # no id: one is derived from the position
    ]


def test_conversion_blocks_and_ids() -> None:
    ws = to_worksurface(history())
    assert [m.id for m in ws] == ["s", "h", "a", "t", "a2", "t2", "lc-6"]
    assert [m.role for m in ws] == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    assert ws[1].blocks == (Text("look"), Image("image/png", "AAAA"))
    assert ws[2].blocks == (Thinking("hmm", "sig"), Text("reading"), ToolCall("c1", "read", {"path": "a.py"}))
    assert ws[2].blocks[2].input == {"path": "a.py"}
    assert ws[3].blocks == (ToolResult("c1", "no such file", is_error=True),)
    assert orphans(ws) == (set(), set())


def test_round_trip_returns_the_original_objects() -> None:
    lc = history()
    back = from_worksurface(to_worksurface(lc), lc)
    assert all(a is b for a, b in zip(back, lc)) and len(back) == len(lc)


def test_round_trip_through_json_gives_equal_objects() -> None:
    lc = history()
    stored = [message_from_json(json.loads(json.dumps(message_to_json(m)))) for m in to_worksurface(lc)]
    back = from_worksurface(stored)
    assert back[:5] == lc[:5] and back[6] == lc[6]
    assert back[5].content == lc[5].content and back[5].artifact is None  # a non-JSON artifact needs the original
    assert from_worksurface(stored, lc)[5].artifact == Artifact()


def test_changed_messages_are_rebuilt_with_their_fields() -> None:
    lc = history()
    ws = to_worksurface(lc)
    cleared = ws[5].with_blocks([ToolResult("c2", "[cleared: 2 lines]")])
    recalled = ws[2].with_blocks([Text("reading"), ToolCall("c1", "read", {"path": "a.py"})])
    back = from_worksurface([ws[0], ws[1], recalled, ws[3], ws[4], cleared], lc)
    tool = back[5]
    assert isinstance(tool, ToolMessage) and tool.content == "[cleared: 2 lines]"
    assert (tool.tool_call_id, tool.id, tool.name, tool.status) == ("c2", "t2", "shell", "success")
    assert tool.artifact == Artifact()
    ai = back[2]
    assert ai.content == "reading" and ai.tool_calls == lc[2].tool_calls
    assert ai.additional_kwargs == {"provider_field": 1} and ai.usage_metadata == lc[2].usage_metadata
    assert_paired(back[2:6])


def test_worksurface_messages_convert_and_keep_origin() -> None:
    summary = Message("ws-summary-1", "user", (Text("## Active request\nbuild"),), Origin.SUMMARY)
    status = Message("ws-status-1", "system", (Text("<agent-status>ok</agent-status>"),), Origin.STATUS)
    back = from_worksurface([summary, status])
    assert isinstance(back[0], HumanMessage) and isinstance(back[1], SystemMessage)
    assert back[0].id == "ws-summary-1" and back[0].content == "## Active request\nbuild"
    again = to_worksurface(back)
    assert [(m.id, m.origin, m.blocks) for m in again] == [(m.id, m.origin, m.blocks) for m in (summary, status)]


def test_conversion_cache_reuses_equal_messages_only() -> None:
    cache = ConversionCache()
    first = cache.to_worksurface(history())
    copies = copy.deepcopy(history())  # what a checkpoint hands back on the next run
    copies[3].content = "file found after all"
    second = cache.to_worksurface(copies)
    assert [a is b for a, b in zip(first, second)] == [True, True, True, False, True, True, True]
    assert second[3].blocks == (ToolResult("c1", "file found after all", is_error=True),)
    assert second == to_worksurface(copies)


def test_unknown_message_type_names_its_index() -> None:
    with pytest.raises(FormatError, match=r"record 1.*'function'"):
        to_worksurface([HumanMessage("hi"), FunctionMessage(content="x", name="f")])


def test_a_chat_message_in_the_tool_role_without_a_call_id_is_a_format_error() -> None:
    # A ChatMessage may claim the "tool" role but has no tool_call_id to pair its result with.
    with pytest.raises(FormatError, match=r"record 1.*tool_call_id"):
        to_worksurface([HumanMessage("hi"), ChatMessage(content="done", role="tool")])


# --- session pool -----------------------------------------------------------------------------------

def test_thread_dirname_is_safe_and_distinct() -> None:
    assert thread_dirname("thread-1") == "thread-1"
    odd = [thread_dirname(t) for t in ("..", "a/b", "a_b", "a b", "x" * 100)]
    assert len(set(odd)) == len(odd)
    assert all("/" not in d and d not in (".", "..") and len(d) <= 64 for d in odd)


def test_pool_opens_one_session_per_thread(tmp_path: Path) -> None:
    pool = SessionPool(tmp_path, **SMALL_BUDGET)
    assert pool.get("x") is pool.get("x") and pool.get("x") is not pool.get("y")
    pool.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x", "y"]


# --- SDK helpers -------------------------------------------------------------------------------------

def openai_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "run_build", "arguments": "{\"target\": \"all\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": BIG_OUTPUT},
    ]


def test_prepare_openai_round_trip_and_view() -> None:
    from worksurface.integrations.sdk import prepare_openai

    small = openai_history()[:2]
    view, edits = prepare_openai(small, open_session())
    assert view[:2] == small and edits == []
    assert all(m["content"].startswith("<agent-status") for m in view[2:])  # the status bar, appended
    msgs = openai_history()
    view, edits = prepare_openai(msgs, open_session())
    assert view[:3] == msgs[:3] and msgs[3]["content"] == BIG_OUTPUT
    assert view[3]["tool_call_id"] == "call_1" and len(view[3]["content"]) < len(BIG_OUTPUT) // 2
    assert isinstance(edits, list)


def test_prepare_anthropic_keeps_request_fields() -> None:
    from worksurface.integrations.sdk import prepare_anthropic

    request = {"model": "claude-x", "max_tokens": 100, "system": "be brief",
               "tools": [{"name": "run_build", "input_schema": {"type": "object"}}],
               "messages": [{"role": "user", "content": "build it"},
                            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1",
                                                               "name": "run_build", "input": {"target": "all"}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                                          "content": BIG_OUTPUT}]}]}
    view, edits = prepare_anthropic(request, open_session())
    assert {k: view[k] for k in ("model", "max_tokens", "system", "tools")} == \
        {k: request[k] for k in ("model", "max_tokens", "system", "tools")}
    assert view["messages"][:2] == request["messages"][:2]
    result = view["messages"][2]["content"][0]
    assert result["tool_use_id"] == "tu1" and "line 0 of build.log" in json.dumps(result)
    assert len(json.dumps(result)) < len(BIG_OUTPUT) // 2
    assert request["messages"][2]["content"][0]["content"] == BIG_OUTPUT  # the caller's request untouched
    bare, edits = prepare_anthropic(request["messages"][:1], open_session())  # a bare message list
    assert isinstance(bare, list) and edits == []
    assert bare[0]["role"] == "user" and "build it" in json.dumps(bare[0])
