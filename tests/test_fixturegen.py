"""The synthetic session generator: deterministic, sized as asked, well-formed, realistic features."""

from __future__ import annotations

import json
import runpy
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from fixturegen import MIN_TOKENS, generate_jsonl, generate_records
from shared import TRANSCRIPTS, needs_shared
from worksurface.formats import loads
from worksurface.core.model import Message, Text, Thinking, ToolCall, ToolResult
from worksurface.core.tokens import TokenCounter

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 0.15


@lru_cache(maxsize=None)
def _jsonl(tokens: int, seed: int) -> str:
    return generate_jsonl(tokens, seed)


def _records(tokens: int, seed: int) -> list[dict]:
    return [json.loads(line) for line in _jsonl(tokens, seed).splitlines()]


def _messages(records: list[dict]) -> list[Message]:
    """Records to messages without the adapter: one message per user/assistant record."""
    out = []
    for r in records:
        if r.get("type") not in ("user", "assistant"):
            continue
        content = r["message"]["content"]
        blocks = []
        for b in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if b["type"] == "text":
                blocks.append(Text(b["text"]))
            elif b["type"] == "thinking":
                blocks.append(Thinking(b["thinking"], b["signature"]))
            elif b["type"] == "tool_use":
                blocks.append(ToolCall(b["id"], b["name"], b["input"]))
            else:
                blocks.append(ToolResult(b["tool_use_id"], b["content"], bool(b.get("is_error"))))
        out.append(Message(r["uuid"], r["type"], tuple(blocks)))
    return out


def test_same_seed_same_bytes_other_seed_other_session():
    assert generate_jsonl(20_000, 5) == _jsonl(20_000, 5)
    assert generate_jsonl(20_000, 6) != _jsonl(20_000, 5)


@pytest.mark.parametrize("tokens", [MIN_TOKENS, 8_000, 60_000, 300_000])
def test_size_is_within_tolerance(tokens):
    counted = TokenCounter().messages(_messages(_records(tokens, 3)))
    assert abs(counted - tokens) <= TOLERANCE * tokens, counted


def test_too_small_a_request_is_refused():
    with pytest.raises(ValueError, match=str(MIN_TOKENS)):
        generate_records(MIN_TOKENS - 1)


@pytest.mark.parametrize("tokens,seed", [(8_000, 1), (300_000, 3)])
def test_every_call_is_answered_once_after_it_and_the_chain_holds(tokens, seed):
    records = _records(tokens, seed)
    seen_uuids: set[str] = set()
    calls: dict[str, int] = {}
    answered: Counter[str] = Counter()
    for i, r in enumerate(records):
        if "uuid" not in r:
            continue
        assert r["parentUuid"] is None or r["parentUuid"] in seen_uuids
        seen_uuids.add(r["uuid"])
        if r["type"] not in ("user", "assistant"):
            continue
        content = r["message"]["content"]
        for b in content if isinstance(content, list) else ():
            if b["type"] == "tool_use":
                calls[b["id"]] = i
            elif b["type"] == "tool_result":
                assert calls.get(b["tool_use_id"], i) < i
                assert r["sourceToolAssistantUUID"] == records[calls[b["tool_use_id"]]]["uuid"]
                answered[b["tool_use_id"]] += 1
    assert calls and set(calls) == set(answered) and set(answered.values()) == {1}
    assistant = [r for r in records if r.get("type") == "assistant"]
    assert all(len(r["message"]["content"]) == 1 and "usage" in r["message"] for r in assistant)


def test_long_session_has_the_realistic_features():
    records = _records(300_000, 3)
    messages = _messages(records)
    counter = TokenCounter()
    text = "\n".join(m.text for m in messages)
    results = [b for m in messages for b in m.tool_results]
    calls = [c for m in messages for c in m.tool_calls]
    names = Counter(c.name for c in calls)
    assert {"Read", "Grep", "Glob", "Bash", "Edit", "Write", "TodoWrite", "Skill"} <= set(names)
    assert "don't touch migrations/" in text and "use pytest, not unittest" in text and "make lint" in text
    assert "no, don't mock the database" in text
    statuses = {t["status"] for c in calls if c.name == "TodoWrite" for t in c.input["todos"]}
    assert statuses == {"pending", "in_progress", "completed"}
    summaries = [r.content for r in results if " passed in " in r.content]
    assert any(" failed, " in s for s in summaries) and any(" failed" not in s for s in summaries)
    assert any(r.is_error and r.content.startswith("Exit code") for r in results)
    assert any("user doesn't want to proceed" in r.content for r in results)
    assert any(counter.block(r) >= 10_000 for r in results)
    reads = Counter(c.input["file_path"] for c in calls if c.name == "Read")
    assert reads.most_common(1)[0][1] >= 2  # a file is read again
    contents = Counter(r.content for r in results if len(r.content) > 50)
    assert contents.most_common(1)[0][1] >= 2  # an identical output repeats
    assert len({r["cwd"] for r in records if "cwd" in r}) >= 3  # root, subdirectory, worktree
    assert len({r["gitBranch"] for r in records if "gitBranch" in r}) >= 2
    assert any(r.get("isMeta") and "skill" in json.dumps(r["message"]) for r in records)


@pytest.mark.parametrize("tokens,seed", [(8_000, 1), (300_000, 3)])
def test_the_claude_code_adapter_reads_it(tokens, seed):
    transcript = loads(_jsonl(tokens, seed), "claude-code")
    assert transcript.messages == _messages(_records(tokens, seed))
    counted = TokenCounter().messages(transcript.messages)
    assert abs(counted - tokens) <= TOLERANCE * tokens


def test_cli_writes_the_same_bytes(tmp_path, monkeypatch, capsys):
    out = tmp_path / "s.jsonl"
    monkeypatch.setattr(sys, "argv", ["generate.py", "--tokens", "8000", "--seed", "1", "-o", str(out)])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(REPO / "fixtures" / "generate.py"), run_name="__main__")
    assert exit_.value.code == 0 and str(out) in capsys.readouterr().out
    assert out.read_text(encoding="utf-8") == _jsonl(8_000, 1)


@pytest.mark.parametrize("name,tokens,seed", [("small", 8_000, 1), ("long", 230_000, 2)])
def test_checked_in_fixtures_are_reproducible(name, tokens, seed):
    assert (REPO / "fixtures" / f"{name}.jsonl").read_text(encoding="utf-8") == _jsonl(tokens, seed)


SHORT_CC = TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl"


@needs_shared(SHORT_CC)
def test_real_sessions_repeated_read_as_one_live_chain_k_times_as_long(tmp_path):
    from fixturegen.large import write_repeated_sessions
    from worksurface.formats import read_transcript

    once = read_transcript(write_repeated_sessions(tmp_path / "once.jsonl", [SHORT_CC], 1))
    path = write_repeated_sessions(tmp_path / "thrice.jsonl", [SHORT_CC], 3)
    thrice = read_transcript(path)
    assert len(thrice.messages) == 3 * len(once.messages)
    assert [m.text for m in thrice.messages] == [m.text for m in once.messages] * 3
    records = [json.loads(line) for line in path.read_text().splitlines()]
    uuids = [r["uuid"] for r in records if "uuid" in r]
    assert len(set(uuids)) == len(uuids)
    chained = [r for r in records if r.get("type") in ("user", "assistant", "system") and "uuid" in r]
    assert all(b["parentUuid"] == a["uuid"] for a, b in zip(chained, chained[1:]))  # one chain, in order
    calls = [c.id for m in thrice.messages for c in m.tool_calls]
    assert calls and len(set(calls)) == len(calls)  # every copy's tool calls have their own ids
    assert write_repeated_sessions(tmp_path / "again.jsonl", [SHORT_CC], 3).read_bytes() == path.read_bytes()
