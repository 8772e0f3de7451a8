"""Claude Code JSONL adapter: real sessions read and round-trip; edits and worksurface messages survive."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worksurface.core.errors import FormatError
from worksurface.formats import claude_code as cc, loads
from worksurface.formats.base import Transcript
from worksurface.core.model import Image, Message, Origin, Text, Thinking, ToolCall, ToolResult
from shared import TRANSCRIPTS as _TRANSCRIPTS
from worksurface.core.view import is_safe_cut

DATA = _TRANSCRIPTS / "claude-code"
FILES = sorted(DATA.rglob("*.jsonl")) if DATA.is_dir() else []
LONG = ["258c7280-ae70-4798-800f-63464d01a85d.jsonl", "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"]
needs_data = pytest.mark.skipif(not FILES, reason=f"no transcripts at {DATA}")


def records(text: str) -> list:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def load(name: str) -> tuple[str, Transcript]:
    path = DATA / name
    text = path.read_text(encoding="utf-8")
    return text, cc.read(text, str(path))


def by_uuid(text: str) -> dict:
    return {r["uuid"]: r for r in records(text) if "uuid" in r}


# ------------------------------------------------------------------------------------ real files


@needs_data
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_real_file_reads_and_round_trips_record_for_record(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert cc.sniff(text, str(path))
    transcript = cc.read(text, str(path))
    source = records(text)
    kinds = Counter(r["type"] for r in source)
    boundaries = sum(1 for r in source if r.get("subtype") == "compact_boundary")
    assert len(transcript.messages) == kinds["user"] + kinds["assistant"] + boundaries
    assert len(transcript.extras) == len(source) - len(transcript.messages)
    roles = Counter(m.role for m in transcript.messages)
    assert roles == +Counter(user=kinds["user"], assistant=kinds["assistant"], system=boundaries)
    assert all(m.id == m.meta["raw"]["uuid"] and m.origin is Origin.CONVERSATION for m in transcript.messages)

    written = cc.write(transcript)
    assert records(written) == source
    assert cc.read(written, str(path)).messages == transcript.messages


@needs_data
@pytest.mark.parametrize("name", LONG)
def test_long_session_compaction_is_detected(name: str) -> None:
    _, t = load(name)
    boundaries = [i for i, m in enumerate(t.messages) if m.meta.get("compact_boundary")]
    assert len(boundaries) == 1
    boundary = t.messages[boundaries[0]]
    assert boundary.role == "system" and boundary.text == "Conversation compacted"
    assert boundary.meta["trigger"] == "auto" and boundary.meta["pre_tokens"] > 100_000
    summary = t.messages[boundaries[0] + 1]
    assert summary.meta["is_compact_summary"] and summary.role == "user"
    assert "continued from a previous conversation" in summary.text


@needs_data
def test_meta_blocks_and_split_assistant_records() -> None:
    _, t = load(LONG[1])
    assistants = [m for m in t.messages if m.role == "assistant"]
    per_api_message = Counter(m.meta["api_message_id"] for m in assistants)
    assert max(per_api_message.values()) > 1  # one API message, several records, kept apart
    assert all(len(m.blocks) == 1 and m.meta["usage"]["output_tokens"] >= 0 for m in assistants)
    thinking = [b for m in assistants for b in m.blocks if isinstance(b, Thinking)]
    assert thinking and all(b.signature for b in thinking)
    first_user = next(m for m in t.messages if m.role == "user")
    assert first_user.meta["cwd"].startswith("/home/") and first_user.meta["git_branch"] == "spotter-fum"
    assert "todos" in first_user.meta and first_user.meta["timestamp"].startswith("2026-")
    calls = {c.id for m in assistants for c in m.tool_calls}
    results = [r for m in t.messages for r in m.tool_results]
    assert results and {r.call_id for r in results} <= calls
    assert any(r.is_error for r in results)
    assert all(m.role == "user" for m in t.messages if m.tool_results)


@needs_data
def test_queued_inputs_and_extras_keep_their_place() -> None:
    text, t = load("tool_heavy.jsonl")
    assert [q[1] for q in t.queued_inputs] == ["/mcp"]
    anchor = t.queued_inputs[0][0]
    assert t.messages[[m.id for m in t.messages].index(anchor)].tool_calls  # typed while a call ran
    kinds = Counter(r["type"] for _, r in t.extras)
    assert kinds == {"progress": 10, "file-history-snapshot": 3, "queue-operation": 2, "system": 2}
    assert t.extras[0][0] is None  # the snapshot before the first message


@needs_data
def test_changed_tool_result_is_written_in_the_stored_shape() -> None:
    text, t = load(LONG[0])
    index = next(i for i, m in enumerate(t.messages)
                 if m.tool_results and isinstance(m.meta["raw"].get("toolUseResult"), dict))
    old = t.messages[index]
    result = old.tool_results[0]
    placeholder = "[Old tool result content cleared]"
    cleared = old.with_blocks([ToolResult(result.call_id, placeholder, result.is_error)])
    view = t.messages[:index] + [cleared] + t.messages[index + 1:]

    written = cc.write(t, view)
    again = cc.read(written)
    assert again.messages == view
    assert again.messages[index].tool_results[0].content == placeholder
    new, raw = by_uuid(written)[old.id], old.meta["raw"]
    assert new["toolUseResult"] == placeholder
    assert new["message"]["content"][0] == {**raw["message"]["content"][0], "content": placeholder}
    untouched = {k for k in raw if k not in ("message", "toolUseResult")}
    assert {k: new[k] for k in untouched} == {k: raw[k] for k in untouched}
    assert len(records(written)) == len(records(text))


@needs_data
def test_only_the_messages_the_reader_made_are_written_as_their_records_unread() -> None:
    # The writer skips decoding a record again for a message the reader made from it; a transcript
    # put together by hand has none, so each of its messages is compared with its record.
    text, t = load(LONG[0])
    assert len(t.as_read) == len(t.messages)
    index = next(i for i, m in enumerate(t.messages) if m.tool_results)
    edited = t.messages[index].with_blocks([ToolResult(t.messages[index].tool_results[0].call_id, "changed")])
    by_hand = Transcript(t.messages[:index] + [edited] + t.messages[index + 1:], "claude-code", None, t.extras)
    assert by_hand.as_read == ()
    assert by_uuid(cc.write(by_hand))[edited.id]["toolUseResult"] == "changed"
    assert records(cc.write(t)) == records(text)


@needs_data
def test_list_shaped_tool_result_stays_a_list() -> None:
    _, t = load("subagent.jsonl")
    index = next(i for i, m in enumerate(t.messages)
                 if m.tool_results and isinstance(m.meta["raw"]["message"]["content"][0]["content"], list))
    old = t.messages[index]
    assert "agentId:" in old.tool_results[0].content  # list parts are joined, none lost
    view = list(t.messages)
    view[index] = old.with_blocks([ToolResult(old.tool_results[0].call_id, "short")])
    block = by_uuid(cc.write(t, view))[old.id]["message"]["content"][0]
    assert block["content"] == [{"type": "text", "text": "short"}]


def _worksurface_messages() -> list[Message]:
    return [
        Message("ws-boundary", "system", (Text("Conversation compacted"),), Origin.BOUNDARY,
                {"trigger": "auto", "pre_tokens": 170_000}),
        Message("ws-summary", "user", (Text("Summary of the work so far."),), Origin.SUMMARY),
        Message("ws-files", "user", (Text("<file>a.py</file>"), Text("<file>b.py</file>")),
                Origin.REINJECTION),
        Message("ws-status", "system", (Text("<agent-status>tokens 12k</agent-status>"),), Origin.STATUS),
        Message("ws-snip", "user", (Text("[snipped 3 messages]"),), Origin.SNIP_MARKER),
    ]


@needs_data
def test_compacted_view_keeps_history_and_starts_a_new_chain() -> None:
    text, t = load(LONG[0])
    start = next(i for i in range(len(t.messages) - 40, len(t.messages))
                 if t.messages[i].role == "user" and not t.messages[i].tool_results)
    tail = t.messages[start:]
    view = _worksurface_messages() + tail
    written = cc.write_session(t, view, now="2026-12-01T10:00:00.000Z")
    out = records(written)
    source = records(text)
    # Append-only, as Claude Code keeps its file: every original record first, unchanged.
    assert out[:len(source)] == source
    chain = out[len(source):]
    assert len(chain) == len(view)
    again = cc.read(written)
    live = again.messages[len(t.messages):]
    assert [(m.role, m.origin, m.blocks) for m in live] == [(m.role, m.origin, m.blocks) for m in view]
    assert [m.meta["worksurface_id"] for m in live[:5]] == [m.id for m in view[:5]]  # provenance kept
    assert all(m.id != o.id for m, o in zip(live[5:], tail))   # kept messages are copies, new uuids

    boundary, summary, files, status = chain[0], chain[1], chain[2], chain[3]
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    last = next(r for r in reversed(source) if r["type"] in ("user", "assistant"))  # the conversation's end
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"] == last["uuid"]
    assert boundary["timestamp"] == "2026-12-01T10:00:00.000Z"
    meta = boundary["compactMetadata"]
    assert meta["trigger"] == "auto" and meta["preTokens"] == 170_000 and 0 < meta["postTokens"] < 170_000
    assert boundary["sessionId"] == next(r["sessionId"] for r in source if "sessionId" in r)
    assert all(str(uuid.UUID(r["uuid"])) == r["uuid"] for r in chain)
    assert summary["isCompactSummary"] and summary["isVisibleInTranscriptOnly"]
    assert files["isMeta"] is True and status["isMeta"] is True  # injected context, as Claude Code marks it
    assert "isMeta" not in chain[4] or chain[4]["isMeta"] is not True  # a snip marker stands for conversation
    # One chain: each record's parent is the one before it.
    assert all(b["parentUuid"] == a["uuid"] for a, b in zip(chain, chain[1:]))
    uuids = [r["uuid"] for r in out if "uuid" in r]
    assert len(set(uuids)) == len(uuids)
    # The same view and session give the same file.
    assert cc.write_session(t, view, now="2026-12-01T10:00:00.000Z") == written


@needs_data
def test_usage_after_the_boundary_matches_the_compacted_view() -> None:
    _, t = load(LONG[1])
    boundary = next(i for i, m in enumerate(t.messages) if m.meta.get("compact_boundary"))
    before = t.messages[:boundary]
    tail_start = next(i for i in range(len(before) - 30, len(before))
                      if before[i].role == "assistant" and is_safe_cut(before, i))
    cut = Transcript(before, cc.NAME, t.path, [(a, r) for a, r in t.extras], {}, [])
    view = _worksurface_messages()[:2] + before[tail_start:]
    out = records(cc.write_session(cut, view, now="2026-12-01T10:00:00.000Z"))
    chain = out[next(i for i, r in enumerate(out) if r.get("uuid") and r.get("worksurfaceId") == "ws-boundary"):]
    assistants = [r for r in chain if r["type"] == "assistant"]
    assert assistants
    sizes = [sum(r["message"]["usage"][k] for k in ("input_tokens", "cache_read_input_tokens",
                                                    "cache_creation_input_tokens", "output_tokens"))
             for r in assistants]
    measured = [m.meta["usage"] for m in before[tail_start:] if m.role == "assistant"]
    original = max(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
                   for u in measured)
    assert sizes == sorted(sizes) and sizes[-1] < original / 2  # what Claude Code will now read
    assert chain[0]["compactMetadata"]["postTokens"] >= sizes[-1]
    # Records of one API message share one (new) message id, and never the history's.
    history_ids = {r["message"]["id"] for r in out[:len(out) - len(chain)] if r["type"] == "assistant"}
    assert not history_ids & {r["message"]["id"] for r in assistants}


def test_in_place_write_keeps_measured_usage_until_the_view_changes() -> None:
    usage = {"input_tokens": 5, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 100,
             "output_tokens": 7}
    text = "\n".join([
        line(type="user", uuid="u1", message={"role": "user", "content": "start " * 200}),
        line(type="assistant", uuid="a1", message={"id": "m1", "role": "assistant", "usage": usage,
                                                   "content": [{"type": "text", "text": "ok"}]}),
        line(type="user", uuid="u2", message={"role": "user", "content": "next"}),
        line(type="assistant", uuid="a2", message={"id": "m2", "role": "assistant", "usage": usage,
                                                   "content": [{"type": "text", "text": "done"}]}),
    ])
    t = cc.read(text, "u.jsonl")
    assert records(cc.write(t)) == records(text)
    view = [t.messages[0].with_blocks([Text("start")])] + t.messages[1:]
    out = by_uuid(cc.write(t, view))
    for uuid_ in ("a1", "a2"):
        fitted = out[uuid_]["message"]["usage"]
        assert fitted["cache_read_input_tokens"] == 0 and fitted["input_tokens"] < 1005
    assert out["a1"]["message"]["usage"]["input_tokens"] < out["a2"]["message"]["usage"]["input_tokens"]


# --------------------------------------------------------------------------------- synthetic input

SESSION = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s1",
           "version": "2.1.39", "gitBranch": "main", "timestamp": "2026-01-01T00:00:00Z"}


def line(**record) -> str:
    return json.dumps({**SESSION, **record})


def test_images_in_user_content_and_tool_results() -> None:
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}}
    text = "\n".join([
        line(type="user", uuid="u1",
             message={"role": "user", "content": [{"type": "text", "text": "look"}, img]}),
        line(type="assistant", uuid="a1", message={"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "x.png"}},
            {"type": "redacted_thinking", "data": "ENC"}, {"type": "server_tool_use", "id": "s"}]}),
        line(type="user", uuid="u2", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "text", "text": "png"}, img]}]}),
    ])
    t = cc.read(text, "img.jsonl")
    assert t.messages[0].blocks == (Text("look"), Image("image/jpeg", "QUJD"))
    call, redacted, opaque = t.messages[1].blocks
    assert redacted == Thinking("", "ENC", redacted=True)
    assert opaque.value == {"type": "server_tool_use", "id": "s"}
    assert t.messages[2].blocks == (ToolResult("t1", "png", images=(Image("image/jpeg", "QUJD"),)),)
    view = t.messages[:2] + [t.messages[2].with_blocks([ToolResult("t1", "cleared")])]
    assert cc.read(cc.write(t, view)).messages == view
    assert records(cc.write(t)) == records(text)


def test_interrupted_call_and_result_across_a_boundary_are_read() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}
    text = "\n".join([
        line(type="assistant", uuid="a1", message={"id": "m1", "role": "assistant", "content": [call]}),
        line(type="system", subtype="compact_boundary", uuid="b1", content="Conversation compacted",
             compactMetadata={"trigger": "manual", "preTokens": 9}),
        line(type="user", uuid="u1", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}),
        line(type="assistant", uuid="a2", message={"id": "m2", "role": "assistant", "content": [
            {**call, "id": "t2"}]}),
        line(type="user", uuid="u2", message={"role": "user", "content": [
            {"type": "text", "text": "[Request interrupted by user for tool use]"}]}),
    ])
    t = cc.read(text, "cut.jsonl")
    assert [m.id for m in t.messages] == ["a1", "b1", "u1", "a2", "u2"]
    assert t.messages[1].meta["trigger"] == "manual" and t.messages[1].meta["pre_tokens"] == 9
    assert t.messages[3].meta["interrupted"] == ["t2"] and "interrupted" not in t.messages[0].meta
    assert records(cc.write(t)) == records(text)


@pytest.mark.parametrize(("body", "problem"), [
    (line(type="user", uuid="u1"), "without a 'message'"),
    (line(type=7, uuid="u1"), "record type must be a string"),
    (line(type="user", uuid="u1", message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "x"}]}), "'toolu_gone'"),
])
def test_bad_input_names_path_line_and_problem(body: str, problem: str) -> None:
    good = line(type="user", uuid="u0", message={"role": "user", "content": "hi"})
    with pytest.raises(FormatError) as info:
        cc.read("\n".join([good, "", body]), "/tmp/bad.jsonl")
    assert "/tmp/bad.jsonl:3" in str(info.value) and problem in str(info.value)
    assert info.value.line == 3


@pytest.mark.parametrize(("body", "problem"), [
    ('{"type": "user", "uuid": "u1", "message": ', "the last line is cut off"),
    ('{"type": "user", "uuid": "u1", "message": \n', "broken JSON"),
    ('[1, 2]\n', "not an object"),
])
def test_a_line_that_is_no_record_is_read_around_and_strict_refuses_it(body: str, problem: str) -> None:
    good = line(type="user", uuid="u0", message={"role": "user", "content": "hi"})
    text = "\n".join([good, "", body])
    assert [m.id for m in cc.read(text, "/tmp/bad.jsonl").messages] == ["u0"]
    with pytest.raises(FormatError) as info:
        loads(text, "claude-code", "/tmp/bad.jsonl", strict=True)
    assert "/tmp/bad.jsonl:3" in str(info.value) and problem in str(info.value)
    assert info.value.line == 3


def test_sniff() -> None:
    assert cc.sniff("\n" + line(type="user", uuid="u", message={}), None)
    assert cc.sniff('{"type": "queue-operation", "operation": "enqueue"}', None)
    assert cc.sniff('{"type": "new-kind", "sessionId": "s"}', "x.jsonl")
    assert not cc.sniff('{"type": "new-kind", "sessionId": "s"}', "x.json")
    assert not cc.sniff('{"messages": [{"role": "user", "content": "hi"}]}', "x.jsonl")
    assert not cc.sniff('{"type": "user"}', None)
    assert not cc.sniff("not json at all", None)


# ------------------------------------------------------------------------------------- property

_texts = st.text(max_size=30)
_inputs = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), _texts, st.booleans(), st.none()),
                          max_size=3)


@st.composite
def conversations(draw) -> list[Message]:
    """User turns, assistant replies with tool calls, and the results of those calls, paired."""
    msgs: list[Message] = []
    for turn in range(draw(st.integers(1, 5))):
        texts = draw(st.lists(_texts, min_size=1, max_size=2))
        msgs.append(Message(f"u{turn}", "user", tuple(Text(t) for t in texts)))
        calls = [ToolCall(f"call{turn}_{k}", draw(st.sampled_from(["Read", "Bash", "Grep"])), draw(_inputs))
                 for k in range(draw(st.integers(0, 3)))]
        head = [Text(draw(_texts))] if draw(st.booleans()) else []
        if draw(st.booleans()):
            head.insert(0, Thinking(draw(_texts), draw(st.one_of(st.none(), _texts))))
        msgs.append(Message(f"a{turn}", "assistant", tuple(head + calls)))
        results = [ToolResult(c.id, draw(_texts), draw(st.booleans())) for c in calls]
        if results and draw(st.booleans()):
            msgs.append(Message(f"r{turn}", "user", tuple(results)))
        else:
            msgs.extend(Message(f"r{turn}_{k}", "user", (r,)) for k, r in enumerate(results))
        if draw(st.booleans()):
            origin = draw(st.sampled_from([o for o in Origin if o is not Origin.CONVERSATION]))
            role = draw(st.sampled_from(["user", "system"]))
            msgs.append(Message(f"w{turn}", role, (Text(draw(_texts)),), origin))
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_written_messages_read_back_equal(msgs: list[Message]) -> None:
    again = cc.read(cc.write(Transcript([], cc.NAME), msgs))
    # worksurface's own messages come back under their record's UUID (the id they were written with
    # is kept in meta); everything else is equal, ids included.
    assert [_same_id(m) for m in again.messages] == [_same_id(m) for m in msgs]
    assert [m.meta.get("worksurface_id", m.id) for m in again.messages] == [m.id for m in msgs]
    own = [m for m in again.messages if m.origin is not Origin.CONVERSATION]
    assert all(str(uuid.UUID(m.id)) == m.id for m in own)
    # and the file written from what was read is stable
    assert cc.read(cc.write(again)).messages == again.messages


def _same_id(m: Message) -> Message:
    return Message("-", m.role, m.blocks, m.origin) if m.origin is not Origin.CONVERSATION else m
