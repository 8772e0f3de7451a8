"""Malformed input: every adapter raises FormatError naming the file, the line or record, and the problem."""

from __future__ import annotations

import json

import pytest

from worksurface.core.errors import FormatError, UnknownFormatError
from worksurface.formats import (aider, anthropic_messages, detect_format, loads, mini_swe_agent, openai_chat,
                                 openhands, swe_agent)
from worksurface.formats.validate import CallIds, check_pairing, mark_unanswered, INTERRUPTED
from worksurface.core.model import Message, Text, ToolCall, ToolResult

PATH = "/tmp/broken.json"
JSON_ADAPTERS = [openai_chat, anthropic_messages, swe_agent, openhands, mini_swe_agent]


@pytest.mark.parametrize("adapter", JSON_ADAPTERS, ids=lambda a: a.NAME)
def test_broken_json_names_file_and_decoder_line(adapter) -> None:
    text = '{"messages": [\n  {"role": "user",\n   "content": "hi"\n  oops]}'
    with pytest.raises(FormatError) as info:
        adapter.read(text, PATH)
    assert info.value.path == PATH and info.value.line == 4
    assert str(info.value).startswith(f"{PATH}:4: invalid JSON")


@pytest.mark.parametrize("adapter", JSON_ADAPTERS, ids=lambda a: a.NAME)
def test_wrong_top_level_shape_says_what_was_expected(adapter) -> None:
    with pytest.raises(FormatError, match="expected") as info:
        adapter.read('"just a string"', PATH)
    assert PATH in str(info.value)


@pytest.mark.parametrize(("doc", "record", "problem"), [
    ([{"role": "user", "content": "a"}, 7], "messages[1]", "message object"),
    ([{"role": "robot", "content": "a"}], "messages[0]", "role 'robot'"),
    ([{"role": "user", "content": 5}], "messages[0]", "content must be"),
    ([{"role": "user", "content": ["x"]}], "messages[0].content[0]", "content part"),
    ([{"role": "tool", "content": "out"}], "messages[0]", "tool_call_id"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}],
     "messages[0].tool_calls[0]", "tool call"),
    ([{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "ghost", "content": "x"}],
     "1 (message 1)", "'ghost' has no tool call"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}],
     "1 (message 1)", "used twice"),
])
def test_openai_bad_records_are_named(doc, record: str, problem: str) -> None:
    with pytest.raises(FormatError, match=problem) as info:
        openai_chat.read(json.dumps(doc), PATH)
    assert info.value.record == record and info.value.path == PATH


@pytest.mark.parametrize(("doc", "record", "problem"), [
    ({"system": 3, "messages": []}, "system", "system must be"),
    ([{"role": "tool", "content": "a"}], "messages[0]", "user, assistant or system"),
    ([{"role": "user", "content": None}], "messages[0]", "content must be"),
    ([{"role": "user", "content": [{"text": "no type"}]}], "messages[0].content[0]", '"type"'),
    ([{"role": "assistant", "content": [{"type": "tool_use", "name": "Read"}]}],
     "messages[0].content[0]", "tool_use"),
    ([{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
     "messages[0].content[0]", "tool_use_id"),
    ([{"role": "user", "content": "hi"},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "x"}]}],
     "1 (message 1)", "'ghost' has no tool call"),
])
def test_anthropic_bad_records_are_named(doc, record: str, problem: str) -> None:
    with pytest.raises(FormatError, match=problem) as info:
        anthropic_messages.read(json.dumps(doc), PATH)
    assert info.value.record == record and info.value.path == PATH


def test_swe_agent_bad_history() -> None:
    with pytest.raises(FormatError, match="history"):
        swe_agent.read(json.dumps({"trajectory": []}), PATH)
    bad_role = {"history": [{"role": "system", "content": "s"}, {"role": "narrator", "content": "x"}]}
    with pytest.raises(FormatError) as info:
        swe_agent.read(json.dumps(bad_role), PATH)
    assert info.value.record == "history[1]"
    stray_tool = {"history": [{"role": "user", "content": "go"}, {"role": "tool", "content": "out"}]}
    with pytest.raises(FormatError, match="tool_call_ids") as info:
        swe_agent.read(json.dumps(stray_tool), PATH)
    assert info.value.record == "history[1]"


def test_openhands_bad_events() -> None:
    with pytest.raises(FormatError) as info:
        openhands.read(json.dumps([{"id": 0, "source": "user", "action": "message"}, {"id": 1}]), PATH)
    assert info.value.record == "[1]"
    ghost = [{"id": 0, "source": "agent", "observation": "run", "content": "x",
              "tool_call_metadata": {"tool_call_id": "ghost", "function_name": "execute_bash"}}]
    with pytest.raises(FormatError, match="'ghost' has no tool call"):
        openhands.read(json.dumps(ghost), PATH)


def test_mini_swe_agent_bad_messages() -> None:
    with pytest.raises(FormatError) as info:
        mini_swe_agent.read(json.dumps([{"role": "user", "content": "a"}, {"content": "no role"}]), PATH)
    assert info.value.record == "messages[1]"


def test_aider_rejects_json_and_chatless_markdown() -> None:
    with pytest.raises(FormatError, match="JSON") as info:
        aider.read('{"messages": []}', "chat.md")
    assert info.value.line == 1
    with pytest.raises(FormatError, match="no aider chat"):
        aider.read("", "chat.md")


def test_unrecognised_input_and_missing_file() -> None:
    with pytest.raises(UnknownFormatError, match="unrecognised") as info:
        detect_format("just some words", "notes.txt")
    assert info.value.path == "notes.txt"
    with pytest.raises(UnknownFormatError):
        loads('{"neither": "format"}', path=PATH)


def test_check_pairing_and_unanswered_marking() -> None:
    call = Message("a", "assistant", (ToolCall("c1", "Read", {}),))
    result = Message("r", "user", (ToolResult("c1", "out"),))
    check_pairing([call, result])
    with pytest.raises(FormatError) as info:
        check_pairing([result, call], "x.json")
    assert info.value.record == "r (message 0)" and "x.json" in str(info.value)
    marked = mark_unanswered([Message("u", "user", (Text("go"),)), call])
    assert marked[1].meta[INTERRUPTED] == ["c1"] and INTERRUPTED not in marked[0].meta
    ids = CallIds()
    assert [ids.call("x"), ids.result("x"), ids.call("x"), ids.result("x")] == ["x", "x", "x~2", "x~2"]
