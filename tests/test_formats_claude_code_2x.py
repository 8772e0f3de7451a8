"""Claude Code 2.1.2xx and later (issue 56): a compaction's full metadata, the messages it kept
verbatim (named by id, relinked after the summary as Claude Code does on load), the window the
session ran in, a manual /compact's instructions, and the record kinds newer versions write.

The record shapes are the ones the pinned Claude Code (2.1.328) writes against the fake API
(tests/test_client_claude_code_2x.py generates such a session and compares with what the client sends)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.core.config import Config
from worksurface.core.errors import FormatError
from worksurface.core.usage import message_usage
from worksurface.core.view import live_slice
from worksurface.formats import claude_code as cc
from worksurface.formats.claude_code_window import DEFAULT_WINDOW, LARGE_WINDOW
from worksurface.offline.sizing import SizeFlags
from worksurface.probes.cut import cut

HEAD = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s1", "version": "2.1.217",
        "gitBranch": "main"}


class Records:
    """A session's records in file order, each chained to the record before it (as Claude Code writes)."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.clock = 0

    def add(self, kind: str, uuid: str | None = None, chain: bool = True, **fields: Any) -> dict[str, Any]:
        self.clock += 1
        record: dict[str, Any] = {"type": kind, **fields}
        if uuid is not None:
            parent = next((r["uuid"] for r in reversed(self.out) if "uuid" in r), None) if chain else None
            record = {"parentUuid": parent, **HEAD, **record, "uuid": uuid,
                      "timestamp": fields.get("timestamp", f"2026-11-01T10:00:{self.clock:02d}.000Z")}
        else:
            record.setdefault("sessionId", "s1")
        self.out.append(record)
        return record

    def user(self, uuid: str, text: str) -> None:
        self.add("user", uuid, message={"role": "user", "content": text})

    def say(self, uuid: str, text: str, tokens: int = 1000, model: str = "claude-opus-4-6", **extra: Any) -> None:
        self.add("assistant", uuid, message={"id": f"msg_{uuid}", "role": "assistant", "model": model,
                                             "content": [{"type": "text", "text": text}],
                                             "usage": {"input_tokens": tokens, "output_tokens": 10}}, **extra)

    def boundary(self, uuid: str, summary: str, kept: list[str], anchor: str | None = None, **meta: Any) -> None:
        tail = next(r["uuid"] for r in reversed(self.out) if r.get("type") in ("user", "assistant"))
        anchor = anchor or summary
        compact: dict[str, Any] = {"trigger": "manual", "preTokens": 297_412, "durationMs": 65_000,
                                   "postTokens": 6_400, "cumulativeDroppedTokens": 290_000}
        if kept:
            compact["preservedSegment"] = {"headUuid": kept[0], "anchorUuid": anchor, "tailUuid": kept[-1]}
            compact["preservedMessages"] = {"anchorUuid": anchor, "uuids": kept, "allUuids": kept}
        compact.update(meta)
        self.add("system", uuid, chain=False, subtype="compact_boundary", content="Conversation compacted",
                 logicalParentUuid=tail, level="info", compactMetadata=compact)
        self.add("user", summary, message={"role": "user", "content": "This session is being continued. Summary: ..."},
                 isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def text(self) -> str:
        return "".join(json.dumps(r) + "\n" for r in self.out)


def preserved_session(**boundary: Any) -> Records:
    """Two turns, then a manual /compact that keeps the last turn (u2, a2) verbatim, then one more turn."""
    r = Records()
    r.add("custom-title", customTitle="fix the parser")
    r.user("u1", "first request")
    r.say("a1", "first answer", tokens=150_000)
    r.user("u2", "second request")
    r.say("a2", "second answer", tokens=297_000)
    r.add("last-prompt", lastPrompt="second request", leafUuid="a2")
    r.add("mode", mode="normal")
    r.add("queue-operation", operation="enqueue", timestamp="2026-11-01T10:01:00.000Z",
          content="/compact keep the parser's error cases")
    r.add("queue-operation", operation="dequeue", timestamp="2026-11-01T10:01:00.100Z")
    kept = boundary.pop("kept", ["u2", "a2"])
    r.boundary("b1", "s1sum", kept, **boundary)
    r.user("u3", "third request")
    r.say("a3", "third answer", tokens=9_000)
    return r


def test_boundary_metadata_is_read_whole() -> None:
    t = cc.read(preserved_session().text(), "s.jsonl")
    b = next(m for m in t.messages if m.meta.get("compact_boundary"))
    assert (b.meta["pre_tokens"], b.meta["post_tokens"], b.meta["duration_ms"], b.meta["dropped_tokens"]) == \
        (297_412, 6_400, 65_000, 290_000)
    assert b.meta["preserved"]["ids"] == ["u2", "a2"] and b.meta["preserved"]["anchor"] == "s1sum"
    assert b.meta["preserved"]["segment"] == {"head": "u2", "anchor": "s1sum", "tail": "a2"}


def test_the_preserved_messages_follow_the_summary_in_the_live_view_and_the_file_round_trips() -> None:
    text = preserved_session().text()
    t = cc.read(text, "s.jsonl")
    assert [m.id for m in t.messages] == ["u1", "a1", "b1", "s1sum", "u2", "a2", "u3", "a3"]
    assert [m.id for m in live_slice(t.messages)] == ["b1", "s1sum", "u2", "a2", "u3", "a3"]
    moved = {m.id: m for m in t.messages if m.meta.get(cc.PRESERVED_BY) == "b1"}
    assert set(moved) == {"u2", "a2"} and moved["u2"].meta[cc.FILE_AFTER] == "a1"
    # Claude Code zeroes a kept assistant record's usage: it measured the 297k context, not this one.
    assert message_usage(moved["a2"]) is None and message_usage(t.messages[-1]) is not None
    assert cc.write(t) == text  # every record back where it was read, byte for byte
    again = cc.read(cc.write(t), "s.jsonl")
    assert [m.id for m in again.messages] == [m.id for m in t.messages]


def test_a_segment_without_a_list_is_walked_from_tail_to_head() -> None:
    r = preserved_session()
    del r.out[[i for i, x in enumerate(r.out) if x.get("uuid") == "b1"][0]]["compactMetadata"]["preservedMessages"]
    t = cc.read(r.text(), "s.jsonl")
    assert [m.id for m in live_slice(t.messages)] == ["b1", "s1sum", "u2", "a2", "u3", "a3"]
    assert cc.write(t) == r.text()


@pytest.mark.parametrize("kept", [["u2", "gone-1", "a2"], ["gone-2"]])
def test_a_preserved_id_no_record_holds_gives_a_notice_and_no_relink(kept: list[str]) -> None:
    """Claude Code relinks nothing when a listed id is missing; the reader does the same and says so."""
    r = preserved_session(kept=kept)
    t = cc.read(r.text(), "s.jsonl")
    missing = [k for k in kept if k.startswith("gone")]
    assert len(t.meta["notices"]) == 1 and all(k in t.meta["notices"][0] for k in missing)
    assert "s.jsonl" in t.meta["notices"][0]
    assert [m.id for m in live_slice(t.messages)] == ["b1", "s1sum", "u3", "a3"]
    assert not any(cc.PRESERVED_BY in m.meta for m in t.messages)
    assert cc.write(t) == r.text()


def test_ids_only_in_all_uuids_are_named_and_the_rest_relinked() -> None:
    r = preserved_session()
    b = next(x for x in r.out if x.get("uuid") == "b1")
    b["compactMetadata"]["preservedMessages"]["allUuids"] = ["u2", "progress-9", "a2"]
    t = cc.read(r.text(), "s.jsonl")
    assert "progress-9" in t.meta["notices"][0]
    assert [m.id for m in live_slice(t.messages)] == ["b1", "s1sum", "u2", "a2", "u3", "a3"]


def test_only_the_last_boundary_relinks() -> None:
    """An older compaction's kept messages are history: Claude Code relinks for its last boundary only."""
    r = preserved_session()
    r.boundary("b2", "s2sum", [])
    r.user("u4", "fourth")
    t = cc.read(r.text(), "s.jsonl")
    assert [m.id for m in t.messages] == ["u1", "a1", "u2", "a2", "b1", "s1sum", "u3", "a3", "b2", "s2sum", "u4"]
    assert cc.write(t) == r.text()


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("preservedMessages", [], "preservedMessages must be an object"),
    ("preservedMessages", {"anchorUuid": 3, "uuids": []}, "anchorUuid must be a string"),
    ("preservedMessages", {"anchorUuid": "s1sum", "uuids": ["u2", 7]}, "uuids must be a list of uuid strings"),
    ("preservedSegment", {"headUuid": "u2", "anchorUuid": "s1sum"}, "tailUuid must be a string"),
    ("durationMs", "long", "durationMs must be a number"),
    ("cumulativeDroppedTokens", 1.5, "cumulativeDroppedTokens must be a number of tokens"),
])
def test_bad_boundary_metadata_names_the_line_and_field(field: str, value: Any, problem: str) -> None:
    r = preserved_session()
    b = next(x for x in r.out if x.get("uuid") == "b1")
    b["compactMetadata"][field] = value
    with pytest.raises(FormatError) as err:
        cc.read(r.text(), "s.jsonl")
    line = r.out.index(b) + 1
    assert problem in str(err.value) and f"s.jsonl:{line}" in str(err.value)


def test_the_cut_at_the_boundary_holds_the_kept_messages_and_the_compact_instructions() -> None:
    t = cc.read(preserved_session().text(), "s.jsonl")
    c = cut(t.messages, "boundary")
    assert [m.id for m in c.before] == ["u1", "a1", "u2", "a2"]
    assert message_usage(c.before[-1]) is not None  # before the compaction its usage measured this context
    assert c.instructions == "keep the parser's error cases"
    assert c.claude_code_view is not None and [m.id for m in c.claude_code_view] == ["s1sum", "u2", "a2"]


def test_a_queued_compact_not_yet_applied_is_pending_and_a_bare_compact_has_no_instructions() -> None:
    r = Records()
    r.user("u1", "hi")
    r.say("a1", "hello")
    r.add("queue-operation", operation="enqueue", content="/compact")
    r.boundary("b1", "sum", [])
    r.add("queue-operation", operation="enqueue", content="/compact  only the API changes ")
    t = cc.read(r.text(), "s.jsonl")
    assert "instructions" not in t.messages[2].meta
    assert t.meta["pending_compact_instructions"] == "only the API changes"
    assert cc.read(r.text().replace("/compact  only", "/compactify only"), "s.jsonl").meta.get(
        "pending_compact_instructions") is None


# --- the window ----------------------------------------------------------------------------------------------

def _window(r: Records) -> tuple[int | None, str]:
    t = cc.read(r.text(), "s.jsonl")
    return t.meta.get("context_window"), t.meta["window_inference"]["reason"]


def _turn(**say: Any) -> Records:
    r = Records()
    r.user("u1", "hi")
    r.say("a1", "hello", **say)
    return r


def test_window_from_the_model_the_user_chose() -> None:
    assert _window(_turn(requestedModel="claude-opus-4-6[1m]"))[0] == LARGE_WINDOW
    assert _window(_turn(model="claude-opus-5"))[0] == LARGE_WINDOW  # a native 1M model
    r = _turn()
    r.add("attachment", "m1", attachment={"type": "model", "identity": {"modelId": "claude-sonnet-4-5[1m]"}})
    window, reason = _window(r)
    assert window == LARGE_WINDOW and "claude-sonnet-4-5[1m]" in reason


def test_window_from_the_1m_beta_and_from_a_size_over_200k() -> None:
    r = _turn()
    r.add("api-request", params={"model": "claude-opus-4-6", "betas": ["claude-code-20250219",
                                                                      "context-1m-2025-08-07"]})
    window, reason = _window(r)
    assert window == LARGE_WINDOW and f"line {len(r.out)}" in reason
    window, reason = _window(preserved_session())  # preTokens 297,412 with a 200k model name
    assert window == LARGE_WINDOW and "297,412" in reason


def test_an_older_session_keeps_the_configured_window() -> None:
    """Nothing in the file shows more than 200k: no recorded window, so sizing is what it was."""
    r = _turn(tokens=167_000, model="claude-sonnet-4-5-20250929")
    # Text that mentions a 1M model is not the harness's record of one.
    r.user("u2", "should we use claude-opus-4-6[1m] here?")
    t = cc.read(r.text(), "s.jsonl")
    assert "context_window" not in t.meta and t.meta["window_inference"]["window"] is None
    base = Config(window=150_000)
    assert SizeFlags().config(t, base).window == 150_000


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=2_000_000), st.sampled_from(["claude-opus-4-6", "claude-haiku-4-5"]))
def test_the_window_follows_the_largest_size_reached(tokens: int, model: str) -> None:
    window, _ = _window(_turn(tokens=tokens, model=model))
    assert window == (LARGE_WINDOW if tokens > DEFAULT_WINDOW else None)


def test_the_post_compact_target_and_threshold_follow_the_inferred_window() -> None:
    t = cc.read(preserved_session().text(), "s.jsonl")
    config = SizeFlags().config(t, Config())
    assert config.window == LARGE_WINDOW
    assert config.post_compact_target == int(LARGE_WINDOW * config.post_compact_fraction) > 47_000
    assert config.threshold > 297_412  # Claude Code compacted by hand at 297k: far under its own threshold


# --- record kinds --------------------------------------------------------------------------------------------

def test_custom_title_mode_last_prompt_and_other_new_records_are_kept_in_place_and_are_no_input() -> None:
    r = preserved_session()
    r.add("tools-used", tools=["ToolSearch", "SendMessage"])
    r.add("atis-latch", atis="")
    r.add("cost-state", totalCostUSD=1.5, modelUsage={"claude-opus-4-6": {"inputTokens": 3}})
    t = cc.read(r.text(), "s.jsonl")
    kinds = [x["type"] for _, x in t.extras if isinstance(x, dict)]
    for kind in ("custom-title", "last-prompt", "mode", "tools-used", "atis-latch", "cost-state"):
        assert kind in kinds
    texts = [text for _, text in t.queued_inputs]
    assert "second request" not in texts and "fix the parser" not in texts  # a last-prompt or title is no input
    assert cc.write(t) == r.text()


@pytest.mark.parametrize("first", [
    {"type": "custom-title", "customTitle": "t", "sessionId": "s1"},
    {"type": "mode", "mode": "plan", "sessionId": "s1"},
    {"type": "last-prompt", "lastPrompt": "x", "leafUuid": "u9", "sessionId": "s1"},
])
def test_a_file_that_starts_with_a_record_of_a_newer_kind_is_claude_code(first: dict[str, Any]) -> None:
    text = json.dumps(first) + "\n" + preserved_session().text()
    assert cc.sniff(text, None)
    assert cc.write(cc.read(text, None)) == text


def test_records_out_of_time_order_at_the_start_of_a_file_read_and_write_back() -> None:
    """Claude Code 2.1.2xx writes its first attachments with timestamps before the prompt they follow."""
    r = Records()
    r.user("u1", "hi")
    r.add("attachment", "at1", attachment={"type": "environment", "snapshot": {}}, timestamp="2026-11-01T09:00:00.000Z")
    r.add("attachment", "at2", attachment={"type": "hook_additional_context", "hookEvent": "SessionStart",
                                           "content": ["Never push to main."]}, timestamp="2026-11-01T08:59:59.000Z")
    r.say("a1", "hello")
    t = cc.read(r.text(), "s.jsonl")
    assert [m.id for m in t.messages] == ["u1", "a1"] and cc.write(t) == r.text()
    # A compaction's new chain is stamped after every record of the file, whatever their order.
    from worksurface.core.model import Message, Origin, Text
    view = [Message("ws-b", "system", (Text("Conversation compacted"),), Origin.BOUNDARY),
            Message("ws-s", "user", (Text("summary"),), Origin.SUMMARY)]
    out = [json.loads(x) for x in cc.write_session(t, view, now="2026-11-01T08:00:00.000Z").splitlines()]
    assert out[-1]["timestamp"] >= max(x["timestamp"] for x in r.out if "timestamp" in x)


def test_attachments_are_classified_by_their_producer() -> None:
    from worksurface.formats.claude_code_records import attachment_producer
    assert attachment_producer({"type": "hook_additional_context", "content": ["x"]}) == "harness"
    assert attachment_producer({"type": "hook_success", "content": "x"}) == "harness"
    assert attachment_producer({"type": "deferred_tools_delta", "addedNames": ["ToolSearch"]}) == "tools"
    assert attachment_producer({"type": "mcp_instructions_delta"}) == "tools"
    assert attachment_producer({"type": "queued_command", "prompt": "next"}) == "user"
    assert attachment_producer({"type": "file", "filename": "a.py"}) == "file"
    assert attachment_producer({"type": "something_new"}) == "harness"  # whatever it is, Claude Code wrote it


# --- the generated 2.1.2xx session (fixturegen/newer.py, also in the corpus gate) ----------------------------

def test_the_generated_newer_session_is_deterministic_and_reads_as_claude_code_writes_it() -> None:
    from fixturegen.newer import INSTRUCTIONS, MISSING_ID, newer_jsonl

    text = newer_jsonl(12_000, 1)
    assert text == newer_jsonl(12_000, 1) != newer_jsonl(12_000, 2)
    records = [json.loads(x) for x in text.splitlines()]
    assert records[0]["type"] == "custom-title"
    stamps = [r["timestamp"] for r in records if "timestamp" in r]
    assert stamps != sorted(stamps)  # attachments stamped before the prompt they follow
    t = cc.read(text, "newer.jsonl")
    assert cc.write(t) == text
    boundary = next(m for m in t.messages if m.meta.get("compact_boundary"))
    kept = [m for m in live_slice(t.messages) if m.meta.get(cc.PRESERVED_BY) == boundary.id]
    assert [m.id for m in kept] == [i for i in boundary.meta["preserved"]["ids"] if i in {m.id for m in kept}]
    assert kept and live_slice(t.messages)[2].id == kept[0].id  # right after boundary and summary
    assert boundary.meta["instructions"] == INSTRUCTIONS and MISSING_ID in t.meta["notices"][0]
    assert t.meta["context_window"] == LARGE_WINDOW
    # Later usage measures the compacted context, not the one before it.
    after = [message_usage(m) for m in live_slice(t.messages) if m.role == "assistant"]
    assert all(u is None or u.context < boundary.meta["pre_tokens"] for u in after)


def test_the_newer_tools_have_kinds_and_a_sub_agent_named_by_its_model_is_a_task() -> None:
    from fixturegen.newer import newer_jsonl
    from worksurface.core.toolkinds import tool_kind
    from worksurface.facts.subagents import subagent_tasks

    t = cc.read(newer_jsonl(12_000, 1), "newer.jsonl")
    calls = {c.name: c for m in t.messages for c in m.tool_calls}
    assert tool_kind(calls["ToolSearch"]) == "search"
    assert tool_kind(calls["mcp__claude-in-chrome__navigate"]) == "fetch"
    assert tool_kind(calls["SendMessage"]) == "other" and tool_kind(calls["Agent"]) == "agent"
    tasks = [task for task in subagent_tasks(t.messages) if task.call_id == calls["Agent"].id]
    assert len(tasks) == 1 and tasks[0].agent_type == "general-purpose" and "12 passed" in tasks[0].result


def test_the_deferred_tools_attachment_announces_tools_and_the_hook_context_is_the_harness_s() -> None:
    from fixturegen.newer import DEFERRED, HOOK_RULE, newer_jsonl
    from worksurface.facts.tools import attachment_announcements
    from worksurface.formats.claude_code_records import attachment_producer

    t = cc.read(newer_jsonl(12_000, 1), "newer.jsonl")
    attachments = [r for _, r in t.extras if isinstance(r, dict) and r.get("type") == "attachment"]
    hook = next(r["attachment"] for r in attachments if r["attachment"]["type"] == "hook_additional_context")
    assert hook["content"] == [HOOK_RULE] and attachment_producer(hook) == "harness"
    found = attachment_announcements(list(enumerate(r for _, r in t.extras)))
    assert [a.kind for a in found] == ["tools"] and set(found[0].names) == set(DEFERRED)


def test_a_hook_context_attachment_s_rule_is_a_standing_constraint_and_a_tool_output_s_is_not() -> None:
    """A SessionStart hook's context reaches the model only as an attachment record: the harness
    wrote it, so its rule binds (source "hook"); the same words printed by a tool bind nothing."""
    from fixturegen.newer import HOOK_RULE, newer_jsonl
    from worksurface.facts.constraints import HOOK, attachment_constraints
    from worksurface.ledger.ledger import Ledger

    t = cc.read(newer_jsonl(12_000, 1), "newer.jsonl")
    ledger = Ledger()
    ledger.update(t.messages, queued=t.queued_inputs, extras=t.extras)
    found = [c for c in ledger.records.kind("constraints").values() if c.text == HOOK_RULE]
    assert len(found) == 1 and found[0].source == HOOK and found[0].origin == "SessionStart"
    printed = {"type": "user", "uuid": "r9", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t9", "content": HOOK_RULE}]}}
    assert attachment_constraints([(0, printed)]) == []
    other = {"type": "attachment", "uuid": "a9", "attachment": {"type": "file", "content": HOOK_RULE}}
    assert attachment_constraints([(0, other)]) == []
    # worksurface's own surface, attached back by Claude Code after its hook ran, restates rules: not read again.
    from worksurface.hooks.run import HEADER
    own = {"type": "attachment", "uuid": "a8", "attachment": {"type": "hook_additional_context",
                                                              "content": [f"{HEADER}\n\n- {HOOK_RULE}"]}}
    assert attachment_constraints([(0, own)]) == []


def test_inspect_names_the_window_and_the_reader_s_notices(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from worksurface.cli import app

    path = tmp_path / "s.jsonl"
    path.write_text(preserved_session(kept=["u2", "gone-1", "a2"]).text(), encoding="utf-8")
    res = CliRunner().invoke(app, ["inspect", str(path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["window"]["window"] == LARGE_WINDOW and "297,412" in data["window"]["reason"]
    assert len(data["notices"]) == 1 and "gone-1" in data["notices"][0]


def test_an_edited_preserved_message_is_written_where_claude_code_relinks_it_from() -> None:
    from dataclasses import replace as replaced

    from worksurface.core.model import Text

    text = preserved_session().text()
    t = cc.read(text, "s.jsonl")
    view = [replaced(m, blocks=(Text("second answer, shortened"),)) if m.id == "a2" else m for m in t.messages]
    out = cc.write(t, view)
    records = [json.loads(x) for x in out.splitlines()]
    order = [r.get("uuid") for r in records if r.get("type") in ("user", "assistant", "system")]
    assert order == ["u1", "a1", "u2", "a2", "b1", "s1sum", "u3", "a3"]  # the file's order
    again = cc.read(out, "s.jsonl")
    live = live_slice(again.messages)
    assert [m.id for m in live][:4] == ["b1", "s1sum", "u2", "a2"] and live[3].text == "second answer, shortened"


def test_a_worksurface_compaction_of_a_preserved_session_writes_the_history_as_it_was_then_its_chain() -> None:
    from worksurface.core.model import Message, Origin, Text

    text = preserved_session().text()
    t = cc.read(text, "s.jsonl")
    live = live_slice(t.messages)
    view = [Message("ws-b", "system", (Text("Conversation compacted"),), Origin.BOUNDARY),
            Message("ws-s", "user", (Text("worksurface summary"),), Origin.SUMMARY), *live[2:]]
    out = cc.write_session(t, view, now="2026-11-02T00:00:00.000Z")
    assert out.startswith(text)  # append-only: Claude Code's records, its boundary and kept turn, unchanged
    again = cc.read(out, "s.jsonl")
    chain = live_slice(again.messages)
    assert [m.text for m in chain][1:] == ["worksurface summary", "second request", "second answer",
                                            "third request", "third answer"]
    assert not any(m.meta.get(cc.PRESERVED_BY) for m in again.messages)  # the last boundary keeps nothing by id


# --- a session the real Claude Code 2.1.217 wrote (fixtures/claude-code-2x) --------------------------------

FIXTURE_217 = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "claude-code-2x" / \
    "compact-2.1.217.jsonl"


def _fixture_217() -> str:
    return FIXTURE_217.read_text(encoding="utf-8")


def test_the_2_1_217_session_reads_in_the_order_claude_code_2_1_217_sends_it() -> None:
    """Resumed, 2.1.217 sends its summary, the answer it kept, then the /compact command's records."""
    text = _fixture_217()
    t = cc.read(text, "compact-2.1.217.jsonl")
    live = live_slice(t.messages)
    assert live[0].meta["compact_boundary"] and live[1].meta["is_compact_summary"]
    assert live[2].text == "Read it: alpha and beta." and live[2].meta[cc.PRESERVED_BY] == live[0].id
    assert [m.text.split(">")[0] for m in live[3:]] == ["<local-command-caveat", "<command-name", "<local-command-stdout"]
    assert live[0].meta["instructions"] == "keep the notes file contents" and "notices" not in t.meta
    assert cc.write(t) == text


def test_a_missing_kept_id_in_a_2_1_217_session_sends_the_whole_history_as_claude_code_does() -> None:
    """2.1.217 hangs the records after the summary on the kept tail: with a listed id that no record
    holds, Claude Code (2.1.217 and 2.1.328 alike, seen against the fake API) relinks nothing and walks
    from the leaf into the old chain, so it sends the history before the boundary and not the summary."""
    records = [json.loads(x) for x in _fixture_217().splitlines()]
    boundary = next(r for r in records if r.get("subtype") == "compact_boundary")
    boundary["compactMetadata"]["preservedMessages"]["uuids"].insert(1, "0f0f0f0f-0000-4000-8000-000000000000")
    text = "".join(json.dumps(r) + "\n" for r in records)
    t = cc.read(text, "s.jsonl")
    assert "0f0f0f0f-0000-4000-8000-000000000000" in t.meta["notices"][0]
    assert "continue the chain before the boundary" in t.meta["notices"][0]
    live = live_slice(t.messages)
    assert live == t.messages and live[0].text == "read notes.txt please"
    assert not any(m.meta.get("compact_boundary") or m.meta.get("is_compact_summary") for m in live)
    assert sum(1 for _, r in t.extras if isinstance(r, dict) and r.get("subtype") == "compact_boundary") == 1
    assert cc.write(t) == text  # the boundary and the summary are still in the file, where they were


def test_compact_at_the_boundary_gives_the_manual_compaction_s_instructions_to_the_summary(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from fixturegen.newer import INSTRUCTIONS, newer_jsonl
    from worksurface.cli import app

    path, out = tmp_path / "s.jsonl", tmp_path / "out.jsonl"
    path.write_text(newer_jsonl(12_000, 1), encoding="utf-8")
    res = CliRunner().invoke(app, ["compact", str(path), "--at", "boundary", "--force", "--json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    written = cc.read(out.read_text(encoding="utf-8"), str(out))
    summary = next(m for m in live_slice(written.messages) if m.origin.value == "summary")
    assert f"Focus requested for this summary (verbatim): {INSTRUCTIONS}" in summary.text
    # Compacted at Claude Code's boundary, the view keeps the turn Claude Code kept (the cut holds it).
    source = cc.read(path.read_text(encoding="utf-8"), str(path)).messages
    kept = [m for m in source if m.meta.get(cc.PRESERVED_BY)]
    conversation = [m.text for m in live_slice(written.messages) if m.origin.value == "conversation"]
    assert kept and conversation[-1] == kept[-1].text


def test_inspect_counts_the_kept_messages_as_given_after_the_boundary() -> None:
    from worksurface.core.tokens import TokenCounter
    from worksurface.offline.inspect import inspect_transcript

    t = cc.read(preserved_session().text(), "s.jsonl")
    [b] = inspect_transcript(t, TokenCounter())["compaction"]["boundaries"]
    assert (b["kept"], b["duration_ms"], b["dropped_tokens"], b["pre_tokens"], b["post_tokens"]) == \
        (2, 65_000, 290_000, 297_412, 6_400)
    live = live_slice(t.messages)
    assert b["counted_after"] == TokenCounter().messages(live[:5])  # boundary, summary, kept turn, next prompt


@settings(max_examples=60, deadline=None)
@given(turns=st.integers(min_value=1, max_value=6), kept=st.integers(min_value=0, max_value=4),
       after=st.integers(min_value=0, max_value=3), extras=st.lists(st.booleans(), min_size=20, max_size=20),
       hang_on_tail=st.booleans(), missing=st.booleans())
def test_any_preserved_tail_reads_relinked_and_writes_back_as_read(turns: int, kept: int, after: int,
                                                                  extras: list[bool], hang_on_tail: bool,
                                                                  missing: bool) -> None:
    """Whatever the kept tail, the records between messages and the shape Claude Code hung the records
    after the summary on: the file writes back byte for byte, and the live view is the boundary, the
    summary, the kept messages in order, then the rest (or, with a missing id, what Claude Code sends)."""
    r = Records()
    ids: list[str] = []
    flags = iter(extras)
    for n in range(turns):
        for kind, uid in (("user", f"u{n}"), ("assistant", f"a{n}")):
            r.user(uid, f"prompt {n}") if kind == "user" else r.say(uid, f"answer {n}")
            ids.append(uid)
            if next(flags, False):
                r.add("attachment", f"x{uid}", attachment={"type": "date", "date": "2026-11-01"})
    kept_ids = ids[len(ids) - min(kept, len(ids)):] if kept else []
    listed = kept_ids + (["gone-0"] if missing and kept_ids else [])
    r.boundary("B", "S", listed)
    tail = ids[-1]
    for n in range(after):
        r.user(f"p{n}", f"later {n}")
        if n == 0 and hang_on_tail:
            r.out[-1]["parentUuid"] = tail  # as 2.1.217 hangs the first record after the summary
        if next(flags, False):
            r.add("mode", mode="normal")
    text = r.text()
    t = cc.read(text, "s.jsonl")
    assert cc.write(t) == text
    live = [m.id for m in live_slice(t.messages)]
    later = [f"p{n}" for n in range(after)]
    if not (missing and kept_ids):
        assert live == ["B", "S", *kept_ids, *later]
    elif hang_on_tail and after:
        assert live == [*ids, *later]  # Claude Code walks into the old chain: no boundary, no summary
    else:
        assert live == ["B", "S", *later]
