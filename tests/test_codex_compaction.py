"""Codex rollouts as field users have them (issue 24, item 1): reasoning items belong to the response
they start (never orphan thinking, never cut from the calls they led to), and a worksurface compaction
is written as Codex writes its own: the standing context verbatim, the latest turn_context after it,
and one token_count that measures the compacted view (so Codex does not compact it again)."""

from __future__ import annotations

import json
from typing import Any

from worksurface import Session
from worksurface.core.model import Thinking
from worksurface.core.view import live_slice, tail_start
from worksurface.core.tokens import TokenCounter
from worksurface.formats import codex, dumps

PATH = "/tmp/rollout.jsonl"
WINDOW = 258_400
DEVELOPER = "<permissions instructions>\nsandbox_mode is danger-full-access. Approval policy is never.\n</permissions instructions>"
AGENTS = "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nRun `bun run test` before you commit.\n</INSTRUCTIONS>"


def rec(kind: str, payload: dict[str, Any], n: int) -> dict[str, Any]:
    return {"timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z", "type": kind, "payload": payload}


def text_item(role: str, text: str, **extra: Any) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}], **extra}


def token_count(total: int) -> dict[str, Any]:
    usage = {"input_tokens": total, "cached_input_tokens": 0, "output_tokens": 40, "reasoning_output_tokens": 20,
             "total_tokens": total}
    return {"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage,
                                            "model_context_window": WINDOW}}


def rollout(turns: int = 12, compacted_by_codex: bool = False, redacted: bool = False) -> str:
    """A rollout as Codex 0.14x writes one: developer and AGENTS.md messages, a turn_context per turn,
    and responses of reasoning (encrypted; `redacted`: all alike, as in a published rollout), a
    commentary message and a call, then its output, each measured by a token_count (the text and
    about 6k tokens of instructions and tool schemas)."""
    counter = TokenCounter()
    sent = 6_000
    out: list[dict[str, Any]] = [rec("session_meta", {"id": "s-1", "cwd": "/w", "cli_version": "0.142.0"}, 0)]
    standing = [text_item("developer", DEVELOPER), text_item("user", AGENTS)]
    if compacted_by_codex:
        out.append(rec("compacted", {"message": "", "replacement_history": [
            text_item("user", "port the parser"), *standing,
            {"type": "compaction", "encrypted_content": "ENC-SUMMARY"}]}, 1))
    else:
        out += [rec("response_item", item, 1) for item in standing]
    n = 2
    for t in range(turns):
        out.append(rec("turn_context", {"turn_id": f"turn-{t}", "cwd": "/w", "model": "gpt-5.5",
                                        "approval_policy": "never"}, n))
        out.append(rec("response_item", text_item("user", f"step {t}: port module {t} " + "detail " * 40), n))
        for step in range(3):
            n += 1
            cid = f"call_{t}_{step}"
            secret = "REDACTED" if redacted else f"ENC-{t}-{step}"
            out.append(rec("response_item", {"type": "reasoning", "summary": [], "encrypted_content": secret}, n))
            out.append(rec("response_item", text_item("assistant", f"Checking module {t}, part {step}."), n))
            out.append(rec("response_item", {"type": "function_call", "name": "exec_command", "call_id": cid,
                                             "arguments": json.dumps({"cmd": f"sed -n 1,200p mod{t}_{step}.py"})}, n))
            out.append(rec("response_item", {"type": "function_call_output", "call_id": cid,
                                             "output": f"module {t} part {step}\n" + "line of code\n" * 150}, n))
            sent += sum(counter.text(json.dumps(r["payload"])) for r in out[-4:])
            out.append(rec("event_msg", token_count(sent), n))
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out)


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.split("\n") if x.strip()]


def compact(text: str, **overrides: Any) -> tuple[Any, str]:
    t = codex.read(text, PATH)
    with Session.open(None, post_compact_target_tokens=overrides.pop("target", 12_000), **overrides) as s:
        prepared = s.prepare(t, force=True)
    return prepared, dumps(t, prepared.messages)


def test_reasoning_is_part_of_its_response_so_nothing_is_orphan_thinking() -> None:
    t = codex.read(rollout(), PATH)
    responses = {m.meta["api_message_id"] for m in t.messages if m.role == "assistant"}
    assert len(responses) == 12 * 3
    reasoning = [m for m in t.messages if isinstance(m.blocks[0], Thinking)]
    assert reasoning[0].blocks[0].signature == "ENC-0-0"  # the encrypted content, as recorded
    with Session.open(None) as s:
        report = s.prepare(t).report
    assert not [n for n in report.notices if "orphan thinking" in n]


def test_a_kept_tail_never_starts_inside_a_response() -> None:
    t = codex.read(rollout(), PATH)
    view = live_slice(t.messages)
    counter = TokenCounter()
    for budget in range(200, 6_000, 150):
        start = tail_start(view, counter, budget, 2)
        assert not (view[start - 1].role == view[start].role == "assistant"), budget


def test_a_compaction_carries_the_standing_context_and_the_reasoning_of_its_kept_turns() -> None:
    text = rollout(compacted_by_codex=True)
    prepared, written = compact(text)
    out = records(written)
    [compacted] = [r for r in out if r["type"] == "compacted" and "worksurface" in r]
    history = compacted["payload"]["replacement_history"]
    source = records(text)[1]["payload"]["replacement_history"]
    assert source[1] in history and source[2] in history  # developer and AGENTS.md, verbatim
    assert not any(DEVELOPER in line for line in prepared.report.boundary.get("summarizer_details", ()))
    read_back = codex.read(written, PATH)
    kept = [m for m in live_slice(read_back.messages) if m.role == "assistant"]
    by_response: dict[str, list[Any]] = {}
    for m in kept:
        by_response.setdefault(m.meta["api_message_id"], []).append(m)
    assert kept and all(isinstance(items[0].blocks[0], Thinking) for items in by_response.values())


def test_the_latest_turn_context_follows_the_compaction_and_one_token_count_measures_the_view() -> None:
    text = rollout(turns=30)
    prepared, written = compact(text)
    out = records(written)
    at = next(i for i, r in enumerate(out) if r["type"] == "compacted")
    contexts = [r for r in records(text) if r["type"] == "turn_context"]
    assert out[at + 1]["type"] == "turn_context" and out[at + 1]["payload"] == contexts[-1]["payload"]
    counts = [r for r in out if r["type"] == "event_msg" and r["payload"]["type"] == "token_count"]
    assert len(counts) == 1 and out[-1] is counts[0]
    info = counts[0]["payload"]["info"]
    size = info["last_token_usage"]["input_tokens"]
    assert info["model_context_window"] == WINDOW and size == info["last_token_usage"]["total_tokens"]
    before = records(text)[-1]["payload"]["info"]["last_token_usage"]["total_tokens"]
    assert TokenCounter().messages(live_slice(prepared.messages)) < size < before / 3  # the view, not the past
    assert info["total_token_usage"] == records(text)[-1]["payload"]["info"]["total_token_usage"]
    again = codex.read(written, PATH)
    assert again.meta["context_window"] == WINDOW


def test_the_window_comes_from_the_rollout() -> None:
    assert codex.read(rollout(), PATH).meta["context_window"] == WINDOW


def test_repeated_items_keep_their_ids_through_a_compaction() -> None:
    """Items without an id (Codex 0.140) are named by content; repeated ones get `~n` in reading
    order. A write that leaves some out still reads back under the same ids."""
    same = rollout(redacted=True)
    t = codex.read(same, PATH)
    prepared, written = compact(same)
    kept_ids = [m.id for m in live_slice(prepared.messages) if isinstance(m.blocks[0], Thinking)]
    assert kept_ids and all("~" in i for i in kept_ids)
    assert [m.id for m in live_slice(codex.read(written, PATH).messages)
            if isinstance(m.blocks[0], Thinking)] == kept_ids
    assert {m.id for m in t.messages} >= set(kept_ids)


def test_a_responses_request_keeps_the_reasoning_of_its_calls() -> None:
    """The same grouping for a Responses API request (what the gateway reads from Codex): reasoning
    items followed by their calls are never cleaned away as orphan thinking."""
    from worksurface.formats import loads
    request = {"model": "gpt-5.5", "input": [
        text_item("user", "run the tests"),
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"},
        {"type": "function_call", "id": "fc_1", "name": "exec_command", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "3 passed"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "ENC2"},
        text_item("assistant", "All green.")]}
    t = loads(json.dumps(request), "openai-responses")
    with Session.open(None) as s:
        prepared = s.prepare(t)
    assert not prepared.report.notices
    assert [m.blocks[0].signature for m in prepared.messages if isinstance(m.blocks[0], Thinking)] == ["ENC", "ENC2"]
