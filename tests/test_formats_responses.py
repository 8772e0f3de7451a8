"""OpenAI Responses requests (what Codex sends) and Anthropic requests with system messages in the list
(what newer Claude Code sends): lossless round trips and valid exports."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.core.errors import FormatError
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult, Thinking
from worksurface.formats import anthropic_messages, detect_format, loads
from worksurface.formats import openai_responses as responses
from worksurface.formats.validate import NO_RESULT

RESPONSES_REQUEST: dict[str, Any] = {
    "model": "gpt-5.5", "instructions": "You are Codex.", "store": False, "stream": True,
    "prompt_cache_key": "0199-abc", "tools": [{"type": "function", "name": "shell", "parameters": {}}],
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: none"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the test."}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look first."}],
         "content": None, "encrypted_content": "gAAA=="},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"ls\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "call_2",
         "status": "completed"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]},
        {"role": "user", "content": "Thanks, now run it."},
    ],
}


def test_responses_unmodified_round_trip_is_equal_json() -> None:
    text = json.dumps(RESPONSES_REQUEST)
    assert detect_format(text) == "openai-responses"
    t = responses.read(text)
    assert json.loads(responses.write(t)) == RESPONSES_REQUEST


def test_responses_read_models_items() -> None:
    t = responses.read(json.dumps(RESPONSES_REQUEST))
    roles = [m.role for m in t.messages]
    assert roles == ["system", "system", "system", "user", "assistant", "assistant", "tool", "assistant", "tool",
                     "assistant", "user"]
    assert t.messages[0].id == responses.INSTRUCTIONS_ID and t.messages[0].text == "You are Codex."
    assert isinstance(t.messages[4].blocks[0], Thinking)
    call = t.messages[5].blocks[0]
    assert isinstance(call, ToolCall) and call.input == {"command": ["ls"]}
    result = t.messages[6].blocks[0]
    assert isinstance(result, ToolResult) and result.content == "a.py\nb.py"
    assert t.messages[-1].text == "Thanks, now run it."
    assert t.meta["prompt_cache_key"] == "0199-abc"


def test_responses_edited_and_new_messages_are_written_as_items() -> None:
    t = responses.read(json.dumps(RESPONSES_REQUEST))
    view = list(t.messages)
    cleared = view[6].with_blocks([ToolResult("call_1", "[cleared]")])
    summary = Message("ws-summary", "user", (Text("Summary so far."),), origin=Origin.SUMMARY)
    note = Message("ws-boundary", "system", (Text("compacted"),), origin=Origin.BOUNDARY)
    view = view[:1] + [note, summary] + view[5:6] + [cleared] + view[7:]
    out = json.loads(responses.write(t, view))
    assert out["instructions"] == "You are Codex." and out["store"] is False
    items = out["input"]
    # worksurface's own messages start with their mark (formats.ownmark), tagged under the user's mark
    # key, which reading takes off again.
    assert items[0]["type"] == "message" and items[0]["role"] == "developer"
    assert re.fullmatch(r"\[worksurface:boundary system id=ws-boundary tag=[0-9a-f]{24}\]\ncompacted",
                        items[0]["content"][0]["text"])
    assert items[1]["role"] == "user" and re.fullmatch(
        r"\[worksurface:summary user id=ws-summary tag=[0-9a-f]{24}\]\nSummary so far.", items[1]["content"][0]["text"])
    assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": "[cleared]"}
    assert items[-1] == {"role": "user", "content": "Thanks, now run it."}  # the short form is kept
    again = responses.read(json.dumps(out))
    assert [m.blocks for m in again.messages[1:]] == [m.blocks for m in view[1:]]
    assert [(m.id, m.origin) for m in again.messages[1:3]] == [("ws-boundary", Origin.BOUNDARY),
                                                               ("ws-summary", Origin.SUMMARY)]


def test_responses_export_answers_an_unanswered_call_unless_it_is_last() -> None:
    t = responses.read(json.dumps(RESPONSES_REQUEST))
    view = [m for m in t.messages if m.id != "5"]        # drop call_1's output
    items = json.loads(responses.write(t, view))["input"]
    at = next(i for i, it in enumerate(items) if it.get("call_id") == "call_1")
    assert items[at + 1] == {"type": "function_call_output", "call_id": "call_1", "output": NO_RESULT}
    last = json.loads(responses.write(t, t.messages[:6]))["input"]
    assert last[-1]["type"] == "function_call"                # the client may still run it


def test_responses_string_input_and_bad_requests() -> None:
    plain = {"model": "gpt-5.5", "input": "hello"}
    t = responses.read(json.dumps(plain))
    assert [m.text for m in t.messages] == ["hello"]
    assert json.loads(responses.write(t)) == plain
    with pytest.raises(FormatError, match="input\\[0\\]"):
        responses.read(json.dumps({"input": [{"type": "function_call_output", "output": "x"}]}))
    with pytest.raises(FormatError, match="no tool call before it"):
        responses.read(json.dumps({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}))
    with pytest.raises(FormatError, match="instructions"):
        responses.read(json.dumps({"instructions": 3, "input": "x"}))


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "call", "developer"]), _texts), max_size=12))
def test_responses_write_read_write_is_stable(steps: list[tuple[str, str]]) -> None:
    items: list[dict[str, Any]] = []
    for n, (kind, text) in enumerate(steps):
        if kind == "call":
            items.append({"type": "function_call", "name": "shell", "arguments": json.dumps({"c": text}),
                          "call_id": f"c{n}"})
            items.append({"type": "function_call_output", "call_id": f"c{n}", "output": text})
        else:
            part = "output_text" if kind == "assistant" else "input_text"
            items.append({"type": "message", "role": kind, "content": [{"type": part, "text": text}]})
    request = {"model": "m", "input": items}
    t = responses.read(json.dumps(request))
    once = responses.write(t)
    assert json.loads(once) == request
    assert responses.write(responses.read(once)) == once


CLAUDE_CODE_REQUEST: dict[str, Any] = {
    "model": "claude-opus-5-5", "max_tokens": 128000,
    "system": [{"type": "text", "text": "billing"}, {"type": "text", "text": "You are Claude.",
                                                      "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                     {"type": "text", "text": "hello"}]},
        {"role": "system", "content": [{"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}}]},
    ],
}


def test_anthropic_system_message_in_the_list_keeps_its_place() -> None:
    text = json.dumps(CLAUDE_CODE_REQUEST)
    assert detect_format(text) == "anthropic"
    t = anthropic_messages.read(text)
    assert [m.role for m in t.messages] == ["system", "user", "system"]
    assert json.loads(anthropic_messages.write(t)) == CLAUDE_CODE_REQUEST
    # Worksurface's own system message later in the view is still written as user text.
    own = Message("ws-status", "system", (Text("status"),), origin=Origin.STATUS)
    out = json.loads(anthropic_messages.write(t, [*t.messages, own]))
    assert [m["role"] for m in out["messages"]] == ["user", "system", "user"]
    # A view that drops the first user turn does not move the listed system message into `system`.
    out = json.loads(anthropic_messages.write(t, [t.messages[0], t.messages[2]]))
    assert out["system"] == CLAUDE_CODE_REQUEST["system"] and out["messages"][0]["role"] == "system"
    assert loads(json.dumps(out)).messages[1].role == "system"


def test_responses_next_request_reuses_its_items_grouped_with_their_response() -> None:
    """A conversation's next request reads only its new items; the ones it repeats are the objects the
    last read made, already grouped with their response (reasoning and call share RESPONSE_META)."""
    from worksurface.formats.codex import RESPONSE_META
    from worksurface.formats.reuse import Reuse

    reuse = Reuse()
    first = responses.read_doc(RESPONSES_REQUEST, reuse=reuse)
    assert reuse.read_count == len(RESPONSES_REQUEST["input"]) + 1          # the items and the instructions
    more = [{"type": "reasoning", "id": "rs_2", "summary": [], "content": None, "encrypted_content": "gBBB=="},
            {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "call_3"},
            {"type": "function_call_output", "call_id": "call_3", "output": "ok"}]
    second = responses.read_doc({**RESPONSES_REQUEST, "input": [*RESPONSES_REQUEST["input"], *more]}, reuse=reuse)
    assert reuse.read_count == len(more)
    n = len(first.messages)
    assert all(a is b for a, b in zip(first.messages, second.messages[:n]))
    reasoning, call = second.messages[n], second.messages[n + 1]
    assert reasoning.meta[RESPONSE_META] == call.meta[RESPONSE_META] != first.messages[4].meta[RESPONSE_META]
    assert first.messages[4].meta[RESPONSE_META] == first.messages[5].meta[RESPONSE_META]
    third = responses.read_doc({**RESPONSES_REQUEST, "input": [*RESPONSES_REQUEST["input"], *more]}, reuse=reuse)
    assert reuse.read_count == 0 and all(a is b for a, b in zip(second.messages, third.messages))
