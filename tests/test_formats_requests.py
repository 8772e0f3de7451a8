"""OpenAI chat and Anthropic Messages adapters: lossless round trips and valid exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worksurface.core.errors import FormatError
from worksurface.formats import anthropic_messages as anthropic
from worksurface.formats import detect_format, openai_chat as openai, read_transcript
from worksurface.formats.base import Transcript
from worksurface.formats.validate import NO_RESULT
from worksurface.core.model import (Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult,
                               orphans)
from shared import TRANSCRIPTS as _TRANSCRIPTS

TRANSCRIPTS = _TRANSCRIPTS

OPENAI_REQUEST: dict[str, Any] = {
    "model": "gpt-4o", "temperature": 0,
    "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
    "messages": [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "name": "ana", "content": [
            {"type": "text", "text": "What is in a.py?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}}]},
        {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": "{ \"path\":  \"a.py\" }"}},
            {"id": "call_2", "type": "function",
             "function": {"name": "grep", "arguments": "not json at all"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')\n"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "no match"}]},
        {"role": "assistant", "id": "msg_7", "content": [{"type": "text", "text": "It prints hi."}],
         "tool_calls": []},
        {"role": "user", "content": ""},
    ],
}

ANTHROPIC_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5", "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Read a.py"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Need the file.", "signature": "sig=="},
            {"type": "text", "text": "Reading.", "citations": None},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False, "content": [
                {"type": "text", "text": "print('hi')"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}},
            {"type": "text", "text": "Explain it.", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "text", "text": "It prints hi."}]},
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            {"type": "text", "text": "And this?"}]},
    ],
}


def msg(mid: str, role: str, *blocks: Any, origin: Origin = Origin.CONVERSATION, **meta: Any) -> Message:
    return Message(mid, role, tuple(blocks), origin, meta)  # type: ignore[arg-type]


# ---- export validity checks ----------------------------------------------------------------

def assert_valid_openai(out: list[dict[str, Any]]) -> None:
    """Tool messages follow the assistant message holding their calls, nothing between; only the last
    message may leave calls unanswered."""
    i = 0
    while i < len(out):
        m = out[i]
        assert m["role"] != "tool", f"tool message {i} does not follow its call"
        ids = [c["id"] for c in m.get("tool_calls") or ()]
        i += 1
        answered = []
        while i < len(out) and out[i]["role"] == "tool":
            answered.append(out[i]["tool_call_id"])
            i += 1
        assert len(answered) == len(set(answered))
        assert set(answered) == set(ids) if i < len(out) else set(answered) <= set(ids)


def assert_valid_anthropic(doc: dict[str, Any]) -> None:
    msgs = doc["messages"]
    assert msgs and msgs[0]["role"] == "user"
    assert all(m["role"] in ("user", "assistant") for m in msgs)
    assert all(a["role"] != b["role"] for a, b in zip(msgs, msgs[1:])), "roles must alternate"
    for i, m in enumerate(msgs):
        blocks = m["content"] if isinstance(m["content"], list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:   # tool_results only first in a user turn, answering the turn before
            assert m["role"] == "user" and blocks[: len(results)] == results
            prev = msgs[i - 1]["content"]
            asked = {b["id"] for b in prev if b.get("type") == "tool_use"}
            assert {r["tool_use_id"] for r in results} <= asked
        if m["role"] == "assistant":
            ids = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            nxt = msgs[i + 1]["content"] if i + 1 < len(msgs) else []
            got = {b["tool_use_id"] for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"}
            if i + 1 < len(msgs):         # only the last turn may leave calls to be run
                assert ids == got, f"turn {i}: calls {ids} answered by {got}"


# ---- OpenAI ------------------------------------------------------------------------------------

def test_openai_unmodified_round_trip_is_equal_json() -> None:
    text = json.dumps(OPENAI_REQUEST)
    t = openai.read(text, "req.json")
    assert json.loads(openai.write(t)) == OPENAI_REQUEST
    bare = OPENAI_REQUEST["messages"]
    assert json.loads(openai.write(openai.read(json.dumps(bare)))) == bare


def test_openai_read_models_messages() -> None:
    t = openai.read(json.dumps(OPENAI_REQUEST))
    system, user, asked, r1, r2, answer, empty = t.messages
    assert (system.role, system.meta[openai.ROLE_NAME]) == ("system", "developer")
    assert isinstance(user.blocks[1], Image) and user.blocks[1].data == "iVBORw0K"
    assert isinstance(user.blocks[2], Opaque)
    assert asked.tool_calls[0].input == {"path": "a.py"}
    assert asked.tool_calls[1].input == {"_raw": "not json at all"}
    assert r1.role == "tool" and r1.tool_results[0].call_id == "call_1"
    assert r2.tool_results[0].content == "no match"
    assert answer.id == "msg_7" and [m.id for m in t.messages][:2] == ["0", "1"]
    assert t.meta["model"] == "gpt-4o" and "messages" not in t.meta


def test_openai_edited_message_is_regenerated_and_arguments_kept_byte_exact() -> None:
    t = openai.read(json.dumps(OPENAI_REQUEST))
    view = list(t.messages)
    view[3] = view[3].with_blocks([ToolResult("call_1", "[cleared]")])
    view[1] = view[1].with_blocks([Text("What is in b.py?"), *view[1].blocks[1:]])
    out = json.loads(openai.write(t, view))["messages"]
    assert out[3] == {"role": "tool", "tool_call_id": "call_1", "content": "[cleared]"}
    assert out[1]["content"][0] == {"type": "text", "text": "What is in b.py?"}
    assert out[1]["content"][1]["image_url"]["detail"] == "low"        # unchanged part kept raw
    assert out[2]["tool_calls"][0]["function"]["arguments"] == '{ "path":  "a.py" }'
    assert out[2]["tool_calls"][1]["function"]["arguments"] == "not json at all"


def test_openai_export_places_tool_messages_and_converts_worksurface_messages() -> None:
    view = [
        msg("s", "system", Text("sys")),
        msg("u", "user", Text("go")),
        msg("a", "assistant", Thinking("hmm"), Text("calling"), ToolCall("c1", "Read", {"p": "x"}),
            ToolCall("c2", "Bash", {"command": "ls"})),
        msg("status", "system", Text("<agent-status/>"), origin=Origin.STATUS),
        msg("r", "user", ToolResult("c2", "a b"), ToolResult("c1", "x body"), Text("also this")),
        msg("sum", "assistant", Text("summary text"), origin=Origin.SUMMARY),
    ]
    out = json.loads(openai.write(Transcript(view, "claude-code")))["messages"]
    assert_valid_openai(out)
    roles = ["system", "user", "assistant", "tool", "tool", "system", "user", "user"]
    assert [m["role"] for m in out] == roles
    assert out[2] == {"role": "assistant", "content": "calling", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"p": "x"}'}},
        {"id": "c2", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]}
    assert [m["tool_call_id"] for m in out[3:5]] == ["c2", "c1"]
    assert out[6] == {"role": "user", "content": "also this"}
    # worksurface's own messages carry a `name` saying so, tagged under the user's mark key (ownmark),
    # which reading gives back as their origin.
    assert re.fullmatch(r"worksurface_status_[0-9a-f]{24}", out[5]["name"])
    assert re.fullmatch(r"worksurface_summary_[0-9a-f]{24}", out[7]["name"])
    assert {k: v for k, v in out[7].items() if k != "name"} == {"role": "user", "content": "summary text"}
    back = openai.read(json.dumps(out))
    assert [m.origin for m in back.messages][5:] == [Origin.STATUS, Origin.CONVERSATION, Origin.SUMMARY]


def test_exports_answer_a_call_left_without_result_unless_it_is_last() -> None:
    asked = msg("a", "assistant", ToolCall("c1", "Bash", {"command": "sleep 9"}))
    later = msg("u", "user", Text("never mind"))
    out = json.loads(openai.write(Transcript([asked, later], "openai")))["messages"]
    assert out[1] == {"role": "tool", "tool_call_id": "c1", "content": NO_RESULT}
    assert len(json.loads(openai.write(Transcript([later, asked], "openai")))["messages"]) == 2
    turns = json.loads(anthropic.write(Transcript([asked, later], "anthropic")))["messages"]
    assert turns[2]["content"] == [{"type": "tool_result", "tool_use_id": "c1", "content": NO_RESULT,
                                    "is_error": True}, {"type": "text", "text": "never mind"}]
    turns = json.loads(anthropic.write(Transcript([later, asked], "anthropic")))["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant"]


def test_openai_export_rejects_a_result_without_its_call() -> None:
    view = [msg("u", "user", Text("hi")), msg("t", "tool", ToolResult("nope", "x"))]
    with pytest.raises(FormatError, match="nope"):
        openai.write(Transcript(view, "openai"))


# ---- Anthropic ---------------------------------------------------------------------------------

def test_anthropic_unmodified_round_trip_is_equal_json() -> None:
    t = anthropic.read(json.dumps(ANTHROPIC_REQUEST), "req.json")
    assert json.loads(anthropic.write(t)) == ANTHROPIC_REQUEST
    plain = {"system": "Be kind.", "messages": [{"role": "user", "content": "hi"},
                                                 {"role": "assistant", "content": "hello"}]}
    assert json.loads(anthropic.write(anthropic.read(json.dumps(plain)))) == plain
    bare = ANTHROPIC_REQUEST["messages"]
    assert json.loads(anthropic.write(anthropic.read(json.dumps(bare)))) == bare


def test_anthropic_read_models_blocks() -> None:
    t = anthropic.read(json.dumps(ANTHROPIC_REQUEST))
    system, ask, call, result, answer, picture = t.messages
    assert system.id == anthropic.SYSTEM_ID and system.text == "You are terse."
    assert isinstance(call.blocks[0], Thinking) and call.blocks[0].signature == "sig=="
    assert call.tool_calls[0].input == {"file_path": "a.py"}
    r = result.tool_results[0]
    assert (r.content, len(r.images)) == ("print('hi')", 1)
    assert isinstance(result.blocks[1], Opaque)
    assert answer.blocks[0] == Thinking("", "EmwKAhgB", redacted=True)
    assert picture.blocks[0] == Image(data="https://x.test/a.png", source="url")


def test_anthropic_export_is_valid_for_a_messy_view() -> None:
    view = [
        msg("s", "system", Text("sys one")),
        msg("s2", "system", Text("sys two")),
        msg("a0", "assistant", Text("resuming")),
        msg("a1", "assistant", ToolCall("c1", "Read", {"p": 1}), ToolCall("c2", "Grep", {"q": "x"})),
        msg("u1", "user", Text("while you work: use tabs")),
        msg("t1", "tool", ToolResult("c2", "grep out")),
        msg("st", "system", Text("<agent-status/>"), origin=Origin.STATUS),
        msg("t2", "tool", ToolResult("c1", "read out", is_error=True)),
        msg("a2", "assistant", Text("done")),
        msg("a3", "assistant", Text("really")),
    ]
    doc = json.loads(anthropic.write(Transcript(view, "openai")))
    assert doc["system"] == [{"type": "text", "text": "sys one"}, {"type": "text", "text": "sys two"}]
    assert_valid_anthropic(doc)
    turns = doc["messages"]
    assert turns[0] == {"role": "user", "content": [{"type": "text", "text": anthropic.CONTINUED}]}
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text", "text"]
    assert [b["tool_use_id"] for b in turns[2]["content"][:2]] == ["c2", "c1"]
    assert turns[2]["content"][1]["is_error"] is True
    assert [b["text"] for b in turns[3]["content"]] == ["done", "really"]
    again = anthropic.write(anthropic.read(anthropic.write(Transcript(view, "openai"))))
    assert again == anthropic.write(Transcript(view, "openai"))


def test_anthropic_export_rejects_orphans_and_misplaced_calls() -> None:
    with pytest.raises(FormatError, match="no tool call"):
        anthropic.write(Transcript([msg("u", "user", ToolResult("x", "out"))], "anthropic"))
    with pytest.raises(FormatError, match="tool call in a user message"):
        anthropic.write(Transcript([msg("u", "user", ToolCall("x", "Read", {}))], "anthropic"))


def test_sniffing_tells_the_request_formats_apart() -> None:
    assert detect_format(json.dumps(OPENAI_REQUEST)) == "openai"
    assert detect_format(json.dumps(ANTHROPIC_REQUEST)) == "anthropic"
    assert detect_format(json.dumps([{"role": "user", "content": "hi"}])) == "openai"
    hi = [{"role": "user", "content": "hi"}]
    assert detect_format(json.dumps({"system": "s", "messages": hi})) == "anthropic"
    assert detect_format(json.dumps({"model": "claude-x", "messages": hi})) == "anthropic"
    assert not anthropic.sniff(json.dumps(OPENAI_REQUEST), None)
    assert not openai.sniff(json.dumps(ANTHROPIC_REQUEST), None)


@pytest.mark.skipif(not (TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl").exists(), reason="no transcripts")
@pytest.mark.parametrize("name", ["tool_heavy.jsonl", "short.jsonl", "subagent.jsonl"])
def test_claude_code_sessions_export_to_valid_requests(name: str) -> None:
    t = read_transcript(TRANSCRIPTS / "claude-code" / name)
    a1 = anthropic.write(t)
    assert_valid_anthropic(json.loads(a1))
    assert anthropic.write(anthropic.read(a1)) == a1
    o1 = json.loads(openai.write(t))["messages"]
    assert_valid_openai(o1)
    calls = sum(len(m.tool_calls) for m in t.messages)
    assert sum(len(m.get("tool_calls") or ()) for m in o1) == calls


# ---- property tests ---------------------------------------------------------------------------

_texts = st.text(min_size=1, max_size=12)
_names = st.text("abcdefghij", min_size=1, max_size=6)
_json_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _texts, st.lists(_texts, max_size=2))
_inputs = st.dictionaries(_names, _json_values, max_size=3)
_images = st.one_of(
    st.builds(Image, st.sampled_from(["image/png", "image/jpeg"]),
              st.text("ABCxyz09+/", min_size=1, max_size=8)),
    st.builds(lambda u: Image(data=f"https://img.test/{u}.png", source="url"), _names))


@st.composite
def openai_views(draw: st.DrawFn) -> list[Message]:
    """Valid OpenAI-shaped views: tool messages right after their calls, one result each."""
    out: list[Message] = []
    calls = 0

    def add(role: str, blocks: list[Any], **meta: Any) -> None:
        out.append(Message(str(len(out)), role, tuple(blocks), meta=meta))  # type: ignore[arg-type]

    if draw(st.booleans()):
        developer = {openai.ROLE_NAME: "developer"} if draw(st.booleans()) else {}
        add("system", [Text(draw(_texts))], **developer)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "user":
            audio = st.builds(lambda d: Opaque.of({"type": "input_audio", "input_audio": {"data": d}}),
                              _names)
            parts = st.one_of(st.builds(Text, _texts), _images, audio)
            add("user", draw(st.lists(parts, min_size=1, max_size=3)))
        elif kind == "assistant":
            add("assistant", [Text(t) for t in draw(st.lists(_texts, max_size=2))])
        else:
            ids = [f"call_{calls + k}" for k in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            add("assistant", [Text(t) for t in draw(st.lists(_texts, max_size=1))]
                + [ToolCall(i, draw(_names), draw(_inputs)) for i in ids])
            for i in ids:
                add("tool", [ToolResult(i, draw(st.text(max_size=12)))])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_views())
def test_openai_write_then_read_gives_equal_messages(view: list[Message]) -> None:
    text = openai.write(Transcript(view, "openai"))
    assert_valid_openai(json.loads(text)["messages"])
    back = openai.read(text).messages
    assert back == view
    assert [c.input for m in back for c in m.tool_calls] == [c.input for m in view for c in m.tool_calls]


@st.composite
def anthropic_views(draw: st.DrawFn) -> list[Message]:
    """Views with valid pairing but any layout: same-role runs, tool role, late systems, delayed results."""
    out: list[Message] = []
    open_calls: list[str] = []
    n_calls = 0

    def add(role: str, blocks: list[Any], origin: Origin = Origin.CONVERSATION) -> None:
        out.append(Message(f"m{len(out)}", role, tuple(blocks), origin))  # type: ignore[arg-type]

    for _ in range(draw(st.integers(0, 2))):
        add("system", [Text(draw(_texts))])
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "results", "system"]))
        if kind == "user":
            add("user", draw(st.lists(st.one_of(st.builds(Text, _texts), _images), min_size=1, max_size=2)),
                draw(st.sampled_from([Origin.CONVERSATION, Origin.SUMMARY])))
        elif kind == "assistant":
            think = draw(st.sampled_from([[], [Thinking(draw(_texts), "sig")],
                                          [Thinking("", "enc", redacted=True)]]))
            add("assistant", think + [Text(draw(_texts))])
        elif kind == "calls":
            ids = [f"toolu_{n_calls + k}" for k in range(draw(st.integers(1, 3)))]
            n_calls += len(ids)
            open_calls += ids
            add("assistant", [ToolCall(i, draw(_names), draw(_inputs)) for i in ids])
        elif kind == "results" and open_calls:
            answered = draw(st.lists(st.sampled_from(open_calls), min_size=1, unique=True))
            open_calls = [c for c in open_calls if c not in answered]
            blocks: list[Any] = [ToolResult(c, draw(st.text(max_size=8)), draw(st.booleans()),
                                            tuple(draw(st.lists(_images, max_size=1)))) for c in answered]
            if draw(st.booleans()):
                blocks.append(Text(draw(_texts)))
            add(draw(st.sampled_from(["tool", "user"])), blocks)
        else:
            add("system", [Text(draw(_texts))], Origin.STATUS)
    if open_calls and draw(st.booleans()):
        add("tool", [ToolResult(c, "late") for c in open_calls])
    return out


def _content_sequence(messages: list[Message]) -> list[tuple[str, Any]]:
    """(role, block) of everything but tool results and the leading system messages."""
    k = 0
    while k < len(messages) and messages[k].role == "system":
        k += 1
    return [("assistant" if m.role == "assistant" else "user", b) for m in messages[k:] for b in m.blocks
            if not isinstance(b, ToolResult) and b != Text(anthropic.CONTINUED)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_views())
def test_anthropic_export_is_valid_and_stable(view: list[Message]) -> None:
    first = anthropic.write(Transcript(view, "openai"))
    doc = json.loads(first)
    if doc["messages"]:
        assert_valid_anthropic(doc)
    back = anthropic.read(first).messages
    assert anthropic.write(anthropic.read(first)) == first
    assert _content_sequence(back) == _content_sequence(view)
    given = {r.call_id: r for m in view for r in m.tool_results}
    exported = {r.call_id: r for m in back for r in m.tool_results}
    assert all(exported[c] == r for c, r in given.items())
    assert all(r.content == NO_RESULT for c, r in exported.items() if c not in given)
    unanswered, orphan_results = orphans(back)
    assert not orphan_results and unanswered <= {c.id for c in back[-1].tool_calls}
