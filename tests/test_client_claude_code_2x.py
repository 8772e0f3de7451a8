"""A session the real Claude Code (the pinned 2.1.328, newer than 2.1.2xx) writes and compacts itself
(issue 56): worksurface reads its preserved segment as the client relinks it, keeps the manual /compact's
instructions, and a worksurface compaction of it resumes without Claude Code compacting again.

The session is made here against the fake Messages API (tests/fake_anthropic.py): two turns that read a
file, then `/compact <instructions>`, whose boundary carries postTokens, durationMs,
cumulativeDroppedTokens, preservedSegment and preservedMessages (the last turn kept, named by id).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from claude_client import needs_claude, resume, run_claude
from fake_anthropic import Answer, FakeAnthropic, request_text, tool_use
from test_client_claude_code import compact_into, live_chain, prompt_request, records
from worksurface.core.model import Origin
from worksurface.core.view import live_slice
from worksurface.formats import read_transcript

pytestmark = [pytest.mark.client, pytest.mark.slow, needs_claude]
SESSION = "5a6b7c8d-0000-4e1f-9a2b-3c4d5e6f7a80"
INSTRUCTIONS = "keep the notes file contents"
ANSWER = "Read it: WS56-ANSWER."


def _script(home: Path) -> Any:
    def answer(body: dict[str, Any], n: int) -> Answer:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return Answer([{"type": "text", "text": ANSWER}])
        return tool_use("Read", {"file_path": str(home / "work" / "notes.txt")}, f"toolu_ws56_{n:04d}")
    return answer


def make_session(home: Path) -> Path:
    """Two turns, then Claude Code's own manual compaction with instructions; the session file."""
    (home / "work").mkdir(parents=True)
    (home / "work" / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    with FakeAnthropic(script=_script(home)) as fake:
        run_claude(home, fake, ["-p", "read notes.txt please", "--session-id", SESSION, "--allowedTools", "Read"])
        run_claude(home, fake, ["-p", "and once more", "--resume", SESSION, "--allowedTools", "Read"])
    with FakeAnthropic() as fake:
        run_claude(home, fake, ["-p", f"/compact {INSTRUCTIONS}", "--resume", SESSION])
        assert [r.kind for r in fake.messages()] == ["summarize"]
    return next((home / ".claude" / "projects").rglob(f"{SESSION}.jsonl"))


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_session(tmp_path_factory.mktemp("cc2x") / "home")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]


def test_the_boundary_carries_the_newer_metadata_and_the_reader_uses_it(made: Path) -> None:
    boundary = next(r for r in records(made) if r.get("subtype") == "compact_boundary")
    meta = boundary["compactMetadata"]
    for key in ("postTokens", "durationMs", "cumulativeDroppedTokens", "preservedSegment", "preservedMessages"):
        assert key in meta, key
    t = read_transcript(made)
    b = next(m for m in t.messages if m.meta.get("compact_boundary"))
    assert b.meta["post_tokens"] == meta["postTokens"] and b.meta["instructions"] == INSTRUCTIONS
    kept = [m for m in t.messages if m.meta.get("preserved_by") == b.id]
    assert [m.id for m in kept] == meta["preservedMessages"]["uuids"]
    assert t.meta["context_window"] == 1_000_000  # claude-opus-5-5, the pinned client's default model


def test_the_live_view_is_what_claude_code_sends_on_resume(made: Path, tmp_path: Path) -> None:
    """Every conversation message of worksurface's live view reaches the request, in the same order,
    the preserved answer right after the summary."""
    home = tmp_path / "home"
    shutil.copytree(made.parents[3], home)
    prompt = "WS56-RESUME: go on."
    request = prompt_request(resume(home, SESSION, prompt), prompt)
    sent = [text for m in request.body["messages"] for text in _texts(m["content"])]
    live = [m for m in live_slice(read_transcript(made).messages) if m.origin is Origin.CONVERSATION
            and not m.meta.get("compact_boundary") and m.text]
    at = 0
    for m in live:
        found = next((i for i in range(at, len(sent)) if m.text.strip() in sent[i]), None)
        assert found is not None, f"{m.id} ({m.text[:60]!r}) is not sent after position {at}"
        at = found + 1
    summary = next(i for i, s in enumerate(sent) if "continued from a previous conversation" in s)
    assert sent[summary + 1] == ANSWER


def test_a_worksurface_compaction_of_it_resumes_without_compacting_again(made: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(made.parents[3], home)
    data = compact_into(home, next((home / ".claude" / "projects").rglob(f"{SESSION}.jsonl")))
    written = Path(data["output"])
    chain = live_chain(written)
    assert chain[0]["uuid"] != next(r for r in records(made) if r.get("subtype") == "compact_boundary")["uuid"]
    assert "preservedMessages" not in chain[0]["compactMetadata"]  # worksurface's chain is written out whole
    prompt = "WS56-AFTER: what now?"
    request = prompt_request(resume(home, SESSION, prompt), prompt)
    summary = next(r for r in chain if r.get("isCompactSummary"))
    assert summary["message"]["content"] in request_text(request.body)
    # The history (Claude Code's boundary and the records it kept) is still in the file, unchanged.
    before = records(made)
    assert records(written)[:len(before)] == before
    assert json.dumps(before).count(INSTRUCTIONS) >= 1
