"""Codex rollout adapter: the real rollouts in fixtures/codex/ (written by the Codex CLI) read and
round-trip record for record; edits, worksurface compactions and Codex's own compactions survive."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from worksurface.core.errors import FormatError
from worksurface.formats import codex, detect_format, dumps, loads
from worksurface.formats.base import Transcript
from worksurface.core.model import Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult
from worksurface.core.view import live_slice

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
SESSION = FIXTURES / "session.jsonl"
COMPACTED = FIXTURES / "compacted.jsonl"
PATH = "/tmp/rollout-broken.jsonl"


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def load(path: Path) -> tuple[str, Transcript]:
    text = path.read_text(encoding="utf-8")
    return text, codex.read(text, str(path))


def line(kind: str, payload: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload, **extra},
                      separators=(",", ":"))  # as Codex writes


META = line("session_meta", {"id": "s-1", "cwd": "/w", "cli_version": "0.169.0"})


def user(text: str, item_id: str | None = None) -> str:
    payload: dict[str, Any] = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    if item_id:
        payload["id"] = item_id
    return line("response_item", payload)


# ------------------------------------------------------------------------------------ real rollouts


@pytest.mark.parametrize("path", [SESSION, COMPACTED], ids=lambda p: p.name)
def test_real_rollout_reads_and_round_trips_record_for_record(path: Path) -> None:
    text, transcript = load(path)
    assert detect_format(text, str(path)) == "codex"
    source = records(text)
    kinds = Counter(r["type"] for r in source)
    items = sum(len(r["payload"].get("replacement_history") or [None]) for r in source if r["type"] == "compacted")
    assert len(transcript.messages) == kinds["response_item"] + kinds["compacted"] + items
    assert len(transcript.extras) == len(source) - kinds["response_item"] - kinds["compacted"]
    assert len({m.id for m in transcript.messages}) == len(transcript.messages)

    written = dumps(transcript)
    assert records(written) == source
    assert written == text
    assert loads(written, "auto", str(path)).messages == transcript.messages


def test_session_rollout_holds_the_scripted_work() -> None:
    _, t = load(SESSION)
    calls = {c.id: c for m in t.messages for c in m.tool_calls}
    results = {r.call_id: r for m in t.messages for r in m.tool_results}
    assert set(calls) == set(results), "every call Codex ran has its output"
    assert calls["call_plan1"].name == "update_plan" and calls["call_plan1"].input["plan"][0]["step"] == "Run the test"
    assert calls["call_patch"].name == "apply_patch" and "+    return a + b" in calls["call_patch"].input["input"]
    assert "Success. Updated the following files" in results["call_patch"].content
    # The test really ran in Codex's shell: it failed before the patch and passed after.
    assert "exited with code 1" in results["call_test1"].content and "AssertionError" in results["call_test1"].content
    assert "exited with code 0" in results["call_test2"].content and "1 passed" in results["call_test2"].content
    reasoning = next(m for m in t.messages if m.id == "rs_1")
    assert reasoning.blocks == (Thinking("Plan the fix first."),)
    web = next(m for m in t.messages if m.id == "ws_1")
    assert isinstance(web.blocks[0], Opaque) and web.blocks[0].value["action"]["query"].startswith("python")
    env = next(m for m in t.messages if "<environment_context>" in m.text)
    assert env.role == "system" and env.meta["is_meta"], "harness context is standing context, not a user turn"
    users = [m.text for m in t.messages if m.role == "user"]
    assert users == ["Fix the failing test in test_calc.py.", "How long is calc.py now? Is this a git repo?"]
    assert t.meta["model"] == "gpt-5.5" and t.meta["cli_version"] == "0.169.0"
    turns = [r["payload"]["turn_id"] for r in records(SESSION.read_text(encoding="utf-8"))
             if r["type"] == "event_msg" and r["payload"].get("type") == "task_started"]
    assert len(turns) == 2
    assert next(m for m in t.messages if m.id == "msg_done2").meta["turn_id"] == turns[1]


def test_token_count_usage_lands_on_the_message_it_measures() -> None:
    text, t = load(SESSION)
    counts = [r["payload"]["info"]["last_token_usage"] for r in records(text)
              if r["type"] == "event_msg" and r["payload"].get("type") == "token_count"]
    measured = [m for m in t.messages if "usage" in m.meta]
    assert [m.meta["usage"] for m in measured] == counts
    assert all(m.role == "assistant" for m in measured)
    final = next(m for m in t.messages if m.id == "msg_done")
    assert final.meta["usage"]["input_tokens"] == 3200
    assert set(final.meta["usage"]) >= {"input_tokens", "cached_input_tokens", "output_tokens", "total_tokens"}
    call = next(m for m in t.messages if m.id == "fc_call_test1")
    assert call.meta["usage"]["input_tokens"] == 2400, "usage goes on the call, not on its output"


def test_codex_compaction_is_a_boundary_and_the_live_view_starts_there() -> None:
    text, t = load(COMPACTED)
    record = next(r for r in records(text) if r["type"] == "compacted")
    boundaries = [m for m in t.messages if m.meta.get("compact_boundary")]
    assert len(boundaries) == 1
    b = boundaries[0]
    assert b.role == "system" and b.origin is Origin.CONVERSATION
    assert b.meta["made_by"] == "codex"
    assert b.meta["pre_tokens"] == 6050, "the last measured context before the compaction request"
    assert isinstance(b.meta["post_tokens"], int) and b.meta["post_tokens"] > 0
    live = live_slice(t.messages)
    assert live[0] is b
    summaries = [m for m in live if m.meta.get("is_compact_summary")]
    assert len(summaries) == 1 and summaries[0].role == "user"
    assert summaries[0].text == record["payload"]["message"]
    assert "calc.py was patched to return a + b" in summaries[0].text
    kept = live[1:1 + len(record["payload"]["replacement_history"])]
    assert all(m.meta.get("codex_compacted") == b.id for m in kept)
    assert [m.text for m in kept if m.role == "user" and not m.meta.get("is_compact_summary")] == [
        "Make test_calc.py pass."]
    # The summarizer's own answer precedes the boundary and is flagged, not taken for the conversation.
    assert any(m.meta.get("compaction_output") for m in t.messages[:t.messages.index(b)])


def test_edited_item_inside_a_codex_compaction_rebuilds_its_replacement_history() -> None:
    text, t = load(COMPACTED)
    target = next(m for m in t.messages if m.text == "Make test_calc.py pass." and m.meta.get("codex_compacted"))
    edited = [m.with_blocks([Text("Make test_calc.py pass, please.")]) if m is target else m for m in t.messages]
    written = dumps(t, edited)
    record = next(r for r in records(written) if r["type"] == "compacted")
    texts = [p["text"] for item in record["payload"]["replacement_history"] for p in item.get("content", [])]
    assert "Make test_calc.py pass, please." in texts and "Make test_calc.py pass." not in texts
    assert "replacement_history_metadata" not in record["payload"], "stale per-item metadata is dropped"
    again = loads(written, "codex")
    assert again.messages == edited
    boundary = next(m for m in again.messages if m.meta.get("compact_boundary"))
    assert boundary.meta["made_by"] == "codex" and boundary.origin is Origin.CONVERSATION


# ------------------------------------------------------------------------------------ edits and views


def test_edited_tool_output_keeps_its_record_and_replaces_the_output() -> None:
    text, t = load(SESSION)
    target = next(m for m in t.messages if any(r.call_id == "call_ls" for r in m.tool_results))
    new = target.with_blocks([ToolResult("call_ls", "[output cleared]")])
    written = dumps(t, [new if m is target else m for m in t.messages])
    before = {r["payload"].get("id"): r for r in records(text) if r["type"] == "response_item"}
    after = {r["payload"].get("id"): r for r in records(written) if r["type"] == "response_item"}
    assert after[target.id]["payload"]["output"] == "[output cleared]"
    assert {k: v for k, v in after[target.id]["payload"].items() if k != "output"} == {
        k: v for k, v in before[target.id]["payload"].items() if k != "output"}
    assert "worksurface" not in after[target.id]
    assert loads(written, "codex").messages == [new if m is target else m for m in t.messages]


def test_dropping_messages_drops_their_records_and_keeps_ordinals_consecutive() -> None:
    text, t = load(SESSION)
    kept = [m for m in t.messages if not any(r.call_id == "call_wc" for r in m.tool_results)
            and not any(c.id == "call_wc" for c in m.tool_calls)]
    written = records(dumps(t, kept))
    assert [r["ordinal"] for r in written] == list(range(len(written)))
    assert not any(r["payload"].get("call_id") == "call_wc" for r in written if r["type"] == "response_item")
    assert loads("\n".join(json.dumps(r) for r in written), "codex").messages == kept


def worksurface_view(t: Transcript) -> list[Message]:
    """What a worksurface compaction of the session looks like: the standing context, a boundary, a
    summary, a reinjected note, then the kept tail (from the second user turn on)."""
    prefix = [m for m in t.messages if m.role == "system"]
    tail_start = next(i for i, m in enumerate(t.messages) if m.text.startswith("How long is calc.py"))
    boundary = Message("boundary-1-x", "system", (Text("[Conversation compacted (manual): ...]"),), Origin.BOUNDARY,
                       {"trigger": "manual", "pre_tokens": 9000, "post_tokens": 2100, "epoch": 1})
    summary = Message("summary-1-x", "user", (Text("Summary: calc.add was fixed; test passes."),), Origin.SUMMARY)
    note = Message("reinject-plan-1", "user", (Text("<plan>all steps completed</plan>"),), Origin.REINJECTION)
    return prefix + [boundary, summary, note] + t.messages[tail_start:]


def test_worksurface_compaction_writes_a_codex_compacted_record_and_reads_back() -> None:
    _, t = load(SESSION)
    view = worksurface_view(t)
    written = dumps(t, view)
    recs = records(written)
    compacted = [r for r in recs if r["type"] == "compacted"]
    assert len(compacted) == 1
    payload = compacted[0]["payload"]
    assert payload["message"] == "Summary: calc.add was fixed; test passes."
    history = payload["replacement_history"]
    roles = [(h["type"], h.get("role")) for h in history]
    assert roles == [("message", "developer"), ("message", "user"), ("message", "user"), ("message", "user")]
    assert history[-2]["content"] == [{"type": "input_text", "text": "Summary: calc.add was fixed; test passes."}]
    assert history[-1]["content"][0]["text"] == "<plan>all steps completed</plan>"
    # The kept tail follows as ordinary records, so resume appends it after the replacement history.
    after = recs[recs.index(compacted[0]) + 1:]
    assert any(r["type"] == "response_item" and r["payload"].get("call_id") == "call_wc" for r in after)
    back = loads(written, "auto")
    assert back.messages == view
    b = next(m for m in back.messages if m.origin is Origin.BOUNDARY)
    assert b.meta["made_by"] == "worksurface" and b.meta["pre_tokens"] == 9000 and b.meta["post_tokens"] == 2100
    assert b.meta["compact_boundary"] and b.meta["trigger"] == "manual"
    assert live_slice(back.messages)[0].id == "boundary-1-x"
    assert dumps(back) == written, "a written worksurface compaction writes back unchanged"


# ------------------------------------------------------------------------------------ hand-made records


def test_local_shell_call_web_search_and_older_compacted_record() -> None:
    text = "\n".join([
        META,
        user("list files", "u1"),
        line("response_item", {"type": "local_shell_call", "id": "ls_1", "call_id": "c1", "status": "completed",
                               "action": {"type": "exec", "command": ["ls"]}}),
        line("response_item", {"type": "function_call_output", "call_id": "c1",
                               "output": {"content": "a.txt", "success": False}}),
        line("response_item", {"type": "web_search_call", "status": "completed",
                               "action": {"type": "search", "query": "q"}}),
        line("event_msg", {"type": "token_count",
                           "info": {"last_token_usage": {"input_tokens": 70, "total_tokens": 90}}}),
        line("compacted", {"message": "summary of the work"}),
        user("go on", "u2"),
    ]) + "\n"
    t = loads(text, "auto", PATH)
    assert t.format == "codex"
    call = t.messages[1]
    assert call.blocks == (ToolCall("c1", "local_shell", {"type": "exec", "command": ["ls"]}),)
    assert t.messages[2].blocks == (ToolResult("c1", "a.txt", is_error=True),)
    assert t.messages[2].id == "c1.output"
    assert t.messages[3].meta["usage"] == {"input_tokens": 70, "total_tokens": 90}
    boundary, summary = t.messages[4], t.messages[5]
    assert boundary.meta["compact_boundary"] and boundary.meta["made_by"] == "codex"
    assert boundary.meta["pre_tokens"] == 90
    assert summary.meta["is_compact_summary"] and summary.text == "summary of the work" and summary.role == "user"
    assert live_slice(t.messages)[0] is boundary
    assert dumps(t) == text
    assert "ordinal" not in dumps(t, t.messages[:2] + [Message("n1", "user", (Text("new"),))])


def test_new_messages_of_every_kind_round_trip() -> None:
    t = loads(META + "\n" + user("hi", "u1") + "\n", "codex")
    new = [
        t.messages[0],
        Message("a1", "assistant", (Thinking("think", "enc"),)),
        Message("a2", "assistant", (ToolCall("k1", "exec_command", {"cmd": "ls"}),)),
        Message("r1", "tool", (ToolResult("k1", "x\ny"),)),
        Message("a3", "assistant", (ToolCall("k2", "apply_patch", {"input": "*** Begin Patch"}),)),
        Message("r2", "tool", (ToolResult("k2", "ok"),)),
        Message("s1", "user", (Text("status"),), Origin.STATUS),
        Message("a4", "assistant", (Text("done"),)),
    ]
    written = dumps(t, new)
    kinds = [r["payload"]["type"] for r in records(written)[1:]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                     "function_call_output", "message", "message"]
    assert loads(written, "codex").messages == new


# ------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("bad", "problem"), [
    ("{not json", "broken JSON"),
    ("[1, 2]", "JSON list, not an object"),
])
def test_a_line_that_is_no_record_is_read_around_and_strict_refuses_it(bad: str, problem: str) -> None:
    text = META + "\n" + user("hi", "u1") + "\n" + bad + "\n"
    assert [m.text for m in codex.read(text, PATH).messages] == ["hi"]
    with pytest.raises(FormatError) as info:
        loads(text, "codex", PATH, strict=True)
    assert info.value.path == PATH and info.value.line == 3
    assert problem in info.value.problem


@pytest.mark.parametrize(("bad", "problem"), [
    (json.dumps({"payload": {}}), "no string 'type'"),
    (json.dumps({"type": "response_item", "payload": 3}), "without an object 'payload'"),
    (line("response_item", {"type": "message", "role": "user", "content": "x"}), "'content' must be a list"),
    (line("response_item", {"type": "message", "role": "robot", "content": []}), "unknown role 'robot'"),
    (line("response_item", {"type": "function_call", "name": "f", "arguments": "{}"}), "without a string 'call_id'"),
    (line("response_item", {"type": "function_call", "call_id": "c", "name": "f", "arguments": 5}), "must be strings"),
    (line("compacted", {"message": "s", "replacement_history": "x"}), "must be a list of objects"),
    (line("response_item", {"type": "message", "role": "user", "content": [7]}), "content part is a int"),
])
def test_bad_record_names_path_line_and_problem(bad: str, problem: str) -> None:
    text = META + "\n" + user("hi", "u1") + "\n" + bad + "\n"
    with pytest.raises(FormatError) as info:
        codex.read(text, PATH)
    assert info.value.path == PATH and info.value.line == 3
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{PATH}:3")


def test_output_without_its_call_is_an_error_naming_the_line() -> None:
    text = "\n".join([META, user("hi"), line("response_item", {"type": "function_call_output", "call_id": "zz",
                                                               "output": "x"})])
    with pytest.raises(FormatError, match="call id 'zz', which never appears") as info:
        codex.read(text, PATH)
    assert info.value.line == 3


def test_sniff_tells_codex_from_claude_code_and_other_jsonl() -> None:
    assert codex.sniff(META, None)
    claude = json.dumps({"type": "user", "uuid": "u", "sessionId": "s", "message": {"role": "user", "content": "x"}})
    assert not codex.sniff(claude, "a.jsonl")
    assert not codex.sniff(json.dumps({"type": "response_item", "payload": {}}), None), "needs a timestamp"
    assert detect_format(SESSION.read_text(encoding="utf-8"), str(SESSION)) == "codex"


def test_unchanged_messages_keep_their_raw_payload_under_replace() -> None:
    # A stage that only touches meta (not content) must not make the writer re-encode the record.
    text, t = load(SESSION)
    touched = [replace(m, meta={**m.meta, "note": 1}) for m in t.messages]
    assert dumps(t, touched) == text


def test_an_unchanged_record_is_written_as_its_line_and_an_edited_one_encoded_again() -> None:
    """Spacing, key order and escapes of an untouched line survive byte for byte; the record of an
    edited message is encoded again."""
    spaced = json.dumps({"timestamp": "2026-01-01T00:00:01.000Z", "type": "response_item",
                         "payload": {"type": "message", "role": "user",
                                     "content": [{"type": "input_text", "text": "caf\u00e9 first"}]}})
    answer = line("response_item", {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": "fine"}]})
    text = "\n".join([META, spaced, answer]) + "\n"
    t = loads(text, "codex", "r.jsonl")
    assert dumps(t) == text
    edited = [t.messages[0], replace(t.messages[1], blocks=(Text("changed"),))]
    out = codex.write(t, edited).split("\n")
    assert out[1] == spaced  # "\u00e9" escaped and ", " spacing as read
    assert json.loads(out[2])["payload"]["content"][0]["text"] == "changed" and '": ' not in out[2]
