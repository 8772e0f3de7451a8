"""The real Claude Code resumes what worksurface compacted (issue 13).

Claude Code (installed by .ci/install-claude-code.sh) runs with HOME in a temporary folder and
ANTHROPIC_BASE_URL at a fake Messages API on 127.0.0.1 (tests/fake_anthropic.py); any other traffic is
sent to a dead loopback proxy. On both long real sessions: a worksurface compaction written with
`--claude-projects` resumes with `claude -p ... --resume <id>` without Claude Code compacting again,
and the request carrying the prompt holds worksurface's view (summary, kept tail in order, reinjected
files, status baseline, every tool_use answered); the resumed file (with Claude Code's new records)
compacts again and resumes again; a session Claude Code compacted itself does too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from claude_client import needs_claude, resume
from fake_anthropic import LoggedRequest, last_user_text, request_text
from shared import TRANSCRIPTS, needs_shared
from worksurface.cli import app
from worksurface.core.view import live_slice
from worksurface.formats import read_transcript
from worksurface.probes.cut import first_boundary

SESSIONS = ["8463c716-a2ea-4c14-9efa-87158ebd9f20", "258c7280-ae70-4798-800f-63464d01a85d"]
# Post-compact target (anchored tokens). The default (20% of the window, 40k) is below what these
# sessions' measured usage adds to the text count (55-68k of system prompt, tools and tokenizer
# difference, taken as a constant by Session.prepare), which leaves no room for reinjection; this
# target leaves room for the reinjected files and the status baseline the checks look for.
TARGET = "100000"

pytestmark = [pytest.mark.client, pytest.mark.slow, needs_shared(TRANSCRIPTS / "claude-code"), needs_claude]
runner = CliRunner()


def compact_into(home: Path, source: Path, *args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["compact", str(source), "--force", "--target", TARGET, "--claude-projects",
                              str(home / ".claude" / "projects"), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def records(path: Path) -> list[dict[str, Any]]:
    """The file's records; a damaged line (kept as it was read) is no record, to Claude Code either."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and _parses(line)]


def live_chain(path: Path) -> list[dict[str, Any]]:
    """The records of the last compaction's chain, in order (the boundary first)."""
    out = records(path)
    start = max(i for i, r in enumerate(out) if r.get("subtype") == "compact_boundary")
    return [r for r in out[start:] if r.get("type") in ("user", "assistant", "system")]


def prompt_request(requests: list[LoggedRequest], prompt: str) -> LoggedRequest:
    """The request carrying `prompt`, after checking that nothing came before it but what a resume
    sends: no summarization (Claude Code compacting on its own)."""
    carrying = [i for i, r in enumerate(requests) if prompt in last_user_text(r.body)]
    assert carrying, f"no request carried the prompt; kinds: {[r.kind for r in requests]}"
    first = carrying[0]
    assert [r.kind for r in requests[:first + 1]].count("summarize") == 0, \
        f"Claude Code summarized before the prompt: {[(r.kind, r.input_tokens) for r in requests]}"
    return requests[first]


def block_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for b in content:
        if b.get("type") == "text":
            out.append(b["text"])
        elif b.get("type") == "tool_result":
            out += block_texts(b.get("content") or "")
    return out


def check_request_holds_view(request: LoggedRequest, chain: list[dict[str, Any]]) -> None:
    """The request has the chain's summary, its kept calls in order, its reinjected files and
    status baseline, and every tool_use answered by the next message."""
    messages = request.body["messages"]
    text = request_text(request.body)
    summary = next(r for r in chain if r.get("isCompactSummary"))
    assert summary["message"]["content"] in text
    injected = [r for r in chain if r.get("worksurfaceOrigin") in ("reinjection", "status")]
    assert any(r["worksurfaceOrigin"] == "status" for r in injected)
    for r in injected:
        assert r["isMeta"] is True
        for part in block_texts(r["message"]["content"]):
            assert part in text, part[:80]
    kept_calls = [b["id"] for r in chain if r["type"] == "assistant" and isinstance(r["message"]["content"], list)
                  for b in r["message"]["content"] if b.get("type") == "tool_use"]
    sent_calls = [b["id"] for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
                  for b in m["content"] if b.get("type") == "tool_use"]
    assert kept_calls and sent_calls[:len(kept_calls)] == kept_calls  # the kept tail, in order
    for i, m in enumerate(messages):
        calls = [b["id"] for b in m["content"] if isinstance(m["content"], list) and b.get("type") == "tool_use"] \
            if m["role"] == "assistant" else []
        if calls:
            following = messages[i + 1] if i + 1 < len(messages) else {"content": []}
            answered = {b.get("tool_use_id") for b in following["content"] if isinstance(b, dict)} \
                if isinstance(following["content"], list) else set()
            assert set(calls) <= answered, f"unanswered tool_use in message {i}: {set(calls) - answered}"


@pytest.mark.parametrize("session_id", SESSIONS)
def test_resume_after_worksurface_then_compact_again_and_resume(tmp_path: Path, session_id: str) -> None:
    source = TRANSCRIPTS / "claude-code" / f"{session_id}.jsonl"
    data = compact_into(tmp_path, source, "--at", "boundary")
    written = Path(data["output"])
    assert written.name == f"{session_id}.jsonl" and written.parent.parent == tmp_path / ".claude" / "projects"
    chain = live_chain(written)
    assert chain[0]["compactMetadata"]["postTokens"] < chain[0]["compactMetadata"]["preTokens"]

    first = "WS13-FIRST: continue with the next step."
    request = prompt_request(resume(tmp_path, session_id, first), first)
    check_request_holds_view(request, chain)

    # State migration: the file now has Claude Code's own records after worksurface's; compact it in
    # place (it has not changed since it was read) and resume again.
    grown = records(written)
    assert any(r.get("type") == "user" and first in json.dumps(r.get("message")) for r in grown)
    again = compact_into(tmp_path, written)
    assert Path(again["output"]) == written
    assert sum(r.get("subtype") == "compact_boundary" for r in records(written)) == \
        sum(r.get("subtype") == "compact_boundary" for r in grown) + 1
    assert records(written)[:len(grown)] == grown  # append-only: nothing Claude Code wrote is lost
    second = "WS13-SECOND: and after that?"
    request = prompt_request(resume(tmp_path, session_id, second), second)
    check_request_holds_view(request, live_chain(written))


@pytest.mark.parametrize("session_id", SESSIONS)
def test_session_compacted_by_claude_code_then_worksurface_resumes(tmp_path: Path, session_id: str) -> None:
    source = TRANSCRIPTS / "claude-code" / f"{session_id}.jsonl"
    data = compact_into(tmp_path, source)
    written = Path(data["output"])
    assert sum(r.get("subtype") == "compact_boundary" for r in records(written)) == 2  # Claude Code's, ours
    prompt = "WS13-AFTER-BOTH: what is left to do?"
    request = prompt_request(resume(tmp_path, session_id, prompt), prompt)
    check_request_holds_view(request, live_chain(written))


# --- the field sessions (issue 24): other users, Claude Code 2.0.76 to 2.1.49 -----------------------------

FIELD_CC = sorted(p for p in (TRANSCRIPTS / "field").rglob("*.jsonl") if "subagents" not in p.parts
                  and read_transcript(p).format == "claude-code") if (TRANSCRIPTS / "field").exists() else []


@needs_shared(TRANSCRIPTS / "field")
@pytest.mark.parametrize("source", FIELD_CC, ids=lambda p: str(p.relative_to(TRANSCRIPTS / "field")))
def test_every_field_session_resumes_after_worksurface_compacts_it(tmp_path: Path, source: Path) -> None:
    at = ["--at", "boundary"] if first_boundary(read_transcript(source).messages) is not None else []
    data = compact_into(tmp_path, source, *at)
    written = Path(data["output"])
    prompt = "WS24-FIELD: continue with the next step."
    request = prompt_request(resume(tmp_path, written.stem, prompt), prompt)
    check_request_holds_view(request, live_chain(written))


@needs_shared(TRANSCRIPTS / "field" / "M-Claude")
def test_a_session_with_damaged_lines_written_in_place_resumes_whole(tmp_path: Path) -> None:
    """Damaged lines stay where they were (nothing lost) and Claude Code still follows the chain
    across them: every call of the live part reaches the request, in order."""
    source = TRANSCRIPTS / "field" / "M-Claude" / "3af9b1a7-6512-4883-ad18-320658ced099.jsonl"
    res = runner.invoke(app, ["compact", str(source), "--claude-projects", str(tmp_path / ".claude" / "projects"),
                              "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["boundary"] is None  # under the threshold: the file is written in place
    written = Path(data["output"]).read_text(encoding="utf-8").split("\n")
    original = source.read_text(encoding="utf-8").split("\n")
    damaged = [line for line in original if line.strip() and not _parses(line)]
    assert damaged and all(line in written for line in damaged)
    live = live_slice(read_transcript(source).messages)
    prompt = "WS24-DAMAGED: where were we?"
    request = prompt_request(resume(tmp_path, source.stem, prompt), prompt)
    sent = [b["id"] for m in request.body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_use"]
    assert sent == [c.id for m in live for c in m.tool_calls]


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
