"""Claude Code's own microcompact (issue 24, item 1): its `microcompact_boundary` record is read as the
harness's clearing. From the record on the view shows the cleared tool results as Claude Code sends
them (its placeholder), so counts and stages follow what it really sent; the ledger still learns from
what the model saw before; a write-back is byte-lossless (Claude Code clears them again itself)."""

from __future__ import annotations

import json

from worksurface import Session
from worksurface.core.clearing import CLEARED_TEXT, HARNESS_CLEARING, HARNESS_STAGE, clearing_edits, harness_view
from worksurface.core.model import Message, Origin, Text, ToolResult
from worksurface.core.tokens import TokenCounter
from worksurface.formats import claude_code as cc
from worksurface.formats import dumps
from worksurface.offline.inspect import inspect_transcript

PLACEHOLDER = "[Old tool result content cleared]"  # the text Claude Code's bundle sends (cli.js)
PATH = "/tmp/cleared.jsonl"
FILE = "\n".join(f"{i:>6}\u2192def handler_{i}(request): return respond(request, {i})" for i in range(400))
TESTS = "F" + "." * 10 + "\nFAILED tests/test_x.py::test_a - assert 1 == 2\n=== 1 failed, 10 passed in 0.52s ==="


def line(**fields: object) -> str:
    return json.dumps({"sessionId": "s", "cwd": "/repo", **fields}, ensure_ascii=False, separators=(",", ":"))


def usage(tokens: int) -> dict[str, int]:
    return {"input_tokens": 4, "cache_read_input_tokens": tokens, "cache_creation_input_tokens": 0,
            "output_tokens": 20}


def assistant(uid: str, parent: str, content: list[dict[str, object]], tokens: int) -> str:
    return line(type="assistant", uuid=uid, parentUuid=parent,
                message={"id": f"msg_{uid}", "role": "assistant", "content": content, "usage": usage(tokens)})


def user(uid: str, parent: str | None, content: object) -> str:
    return line(type="user", uuid=uid, parentUuid=parent, message={"role": "user", "content": content})


def result(uid: str, parent: str, call_id: str, text: str) -> str:
    return user(uid, parent, [{"type": "tool_result", "tool_use_id": call_id, "content": text}])


CLEARING = line(type="system", subtype="microcompact_boundary", uuid="mc1", parentUuid="a4",
                content="Context microcompacted", isMeta=False, level="info",
                microcompactMetadata={"trigger": "auto", "preTokens": 9000, "tokensSaved": 6500,
                                      "compactedToolIds": ["t1", "t2"], "clearedAttachmentUUIDs": []})
LINES = [
    user("u1", None, "run the tests"),
    assistant("a1", "u1", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}}], 3000),
    result("r1", "a1", "t1", TESTS),
    assistant("a2", "r1", [{"type": "text", "text": "One test fails; reading the handler."}], 3100),
    assistant("a3", "a2", [{"type": "tool_use", "id": "t2", "name": "Read",
                            "input": {"file_path": "/repo/handlers.py"}}], 3100),
    result("r2", "a3", "t2", FILE),
    assistant("a4", "r2", [{"type": "text", "text": "The handler returns the wrong status."}], 9000),
    CLEARING,
    user("u2", "mc1", "fix it"),
    assistant("a5", "u2", [{"type": "text", "text": "Fixed."}], 2500),
]
TEXT = "\n".join(LINES) + "\n"


def cleared(view: list[Message], call_id: str) -> str:
    return next(r.content for m in view for r in m.tool_results if r.call_id == call_id)


def test_the_record_marks_the_message_it_follows_with_the_clearing() -> None:
    t = cc.read(TEXT, PATH)
    marked = [m for m in t.messages if HARNESS_CLEARING in m.meta]
    assert [m.id for m in marked] == ["a4"]
    assert marked[0].meta[HARNESS_CLEARING] == {"trigger": "auto", "pre_tokens": 9000, "tokens_saved": 6500,
                                                "cleared_call_ids": ["t1", "t2"]}
    assert marked[0].meta[CLEARED_TEXT] == PLACEHOLDER
    assert [(e.stage, e.call_id, e.content) for e in clearing_edits(t.messages)] == [
        (HARNESS_STAGE, "t1", PLACEHOLDER), (HARNESS_STAGE, "t2", PLACEHOLDER)]
    # The transcript itself keeps what the model saw before the clearing.
    assert cleared(t.messages, "t2") == FILE


def test_round_trip_is_byte_lossless_with_the_microcompact_record() -> None:
    t = cc.read(TEXT, PATH)
    assert cc.write(t) == TEXT
    assert cc.read(cc.write(t), PATH).messages == t.messages


def test_the_view_follows_the_clearing_and_the_ledger_what_the_model_saw() -> None:
    t = cc.read(TEXT, PATH)
    with Session.open(None) as s:
        prepared = s.prepare(t, usage=2500)
        view = prepared.messages
        assert cleared(view, "t1") == cleared(view, "t2") == PLACEHOLDER
        counter = TokenCounter()
        assert prepared.report.view_tokens_before < counter.messages(t.messages) - 2_000
        runs = s.ledger.upto().test_runs()
        assert [(r.passed, r.failed) for r in runs] == [(10, 1)]  # learnt from the original result
        assert s.original("r2").tool_results[0].content == FILE
        # Written back in place, the records are the originals (Claude Code clears them itself), and
        # their measured usage stands.
        assert dumps(t, [m for m in view if m.origin is Origin.CONVERSATION]) == TEXT
        assert dumps(t, view).split("\n")[:len(LINES)] == LINES


def test_before_the_record_the_view_shows_the_results_and_a_rewind_past_it_restores_them() -> None:
    t = cc.read(TEXT, PATH)
    before = t.messages[:6]  # up to the Read result: no clearing yet
    with Session.open(None) as s:
        assert cleared(s.prepare(before).messages, "t2") == FILE
        assert cleared(s.prepare(t.messages).messages, "t2") == PLACEHOLDER
        assert cleared(s.prepare(before).messages, "t2") == FILE  # rewound: the clearing is gone with it
        assert cleared(s.prepare(t.messages).messages, "t2") == PLACEHOLDER


def test_a_chain_of_worksurface_copies_a_kept_cleared_result_as_claude_code_sends_it() -> None:
    t = cc.read(TEXT, PATH)
    view = harness_view(t.messages)
    boundary = Message("boundary-2-x", "system", (Text("[Conversation compacted]"),), Origin.BOUNDARY,
                       {"epoch": 2, "trigger": "manual"})
    summary = Message("summary-2-x", "user", (Text("Summary: tests ran, one fails."),), Origin.SUMMARY, {"epoch": 2})
    written = [json.loads(x) for x in cc.write_session(t, [boundary, summary, *view[4:]],
                                                       now="2026-01-01T00:00:00.000Z").splitlines()]
    start = max(i for i, r in enumerate(written) if r.get("subtype") == "compact_boundary")
    copied = [r for r in written[start:] if r.get("type") == "user" and isinstance(r["message"]["content"], list)]
    assert [b["content"] for r in copied for b in r["message"]["content"]] == [PLACEHOLDER]
    assert written[:len(LINES)] == [json.loads(x) for x in LINES]  # the history, as it was


def test_inspect_reports_the_clearing_and_counts_the_live_part_as_sent() -> None:
    t = cc.read(TEXT, PATH)
    counter = TokenCounter()
    report = inspect_transcript(t, counter)
    [c] = report["harness_clearings"]
    assert (c["message_id"], c["trigger"], c["tokens_saved"], c["cleared_results"]) == ("a4", "auto", 6500, 2)
    sent = counter.messages(harness_view(t.messages))
    assert report["live"]["tokens"] == sent < report["tokens"]
    assert c["tokens_cleared"] == report["tokens"] - sent
    assert ToolResult("t2", PLACEHOLDER) in harness_view(t.messages)[5].blocks
