"""Cross-format writes: every record is converted (no source record is copied into another format),
the result reads back in the target format, `is_error` survives as text where the target has no flag,
and the conversion reports what it dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shared import TRANSCRIPTS, needs_shared
from worksurface.cli import app
from worksurface.formats import WRITABLE_FORMATS, Transcript, convert, detect_format, dumps_report, loads, read_transcript
from worksurface.formats import claude_code
from worksurface.formats.convert import ERROR_MARKER
from worksurface.core.model import Image, Message, Opaque, Origin, Text, Thinking, ToolCall, ToolResult, orphans

runner = CliRunner()
CC_8463 = TRANSCRIPTS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SHORT = TRANSCRIPTS / "claude-code" / "short.jsonl"
_NOT_TRANSCRIPTS = {"LICENSE", "SOURCE.txt", "README.md", "manifest.json"}
# Targets that hold every message of any source as it is after conversion (one message each).
FAITHFUL = ("claude-code", "swe-agent", "openhands")


def _files(folder: str) -> list[Path]:
    root = TRANSCRIPTS / folder
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in _NOT_TRANSCRIPTS) if root.is_dir() else []


AIDER = _files("aider")
# Every small source: the SWE-agent, OpenHands and mini-swe-agent runs, three aider chats, the short
# Claude Code files (the two long sessions are converted in their own tests).
SOURCES = (_files("swe-agent")[::4] + _files("openhands") + _files("mini-swe-agent") + AIDER[::13]
           + [p for p in _files("claude-code") if p.name in ("short.jsonl", "subagent.jsonl", "tool_heavy.jsonl")])


def _id(p: Path) -> str:
    return str(p.relative_to(TRANSCRIPTS))[:60]


def _content(messages: list[Message]) -> list[Any]:
    """Role (a tool message is the user's turn in formats without a tool role), origin, blocks."""
    return [("user" if m.role == "tool" else m.role, m.origin, m.blocks) for m in messages if m.blocks]


@needs_shared()
@pytest.mark.parametrize("path", SOURCES, ids=_id)
def test_every_source_converts_to_every_writable_format_and_reads_back(path: Path) -> None:
    t = read_transcript(path)
    for target in WRITABLE_FORMATS:
        out, dropped = dumps_report(t, None, target)
        back = loads(out, target)
        assert back.messages and orphans(back.messages)[1] == set(), target
        if target != t.format:
            assert dropped.records == len(t.extras)
        if target in FAITHFUL:
            assert detect_format(out) == target
            assert _content(back.messages) == _content(convert(t, target).messages), target


@needs_shared()
@pytest.mark.parametrize("path", AIDER, ids=_id)
def test_aider_written_as_claude_code_has_only_claude_code_records(path: Path) -> None:
    t = read_transcript(path)
    out, dropped = dumps_report(t, None, "claude-code")
    records = [json.loads(line) for line in out.splitlines()]
    assert all(r.get("type") in claude_code.RECORD_TYPES and "markdown" not in r for r in records)
    assert dropped.records == len(t.extras)
    assert [m.text for m in loads(out, "claude-code").messages] == [m.text for m in t.messages]


@needs_shared(CC_8463)
def test_claude_code_to_openai_carries_every_is_error_and_reports_dropped_thinking() -> None:
    t = read_transcript(CC_8463)
    failed = [r for m in t.messages for r in m.tool_results if r.is_error]
    thinking = sum(isinstance(b, Thinking) for m in t.messages for b in m.blocks)
    out, dropped = dumps_report(t, None, "openai")
    tool_messages = [m for m in json.loads(out)["messages"] if m["role"] == "tool"]
    marked = {m["tool_call_id"]: m["content"] for m in tool_messages if m["content"].startswith(ERROR_MARKER)}
    assert len(failed) == 13 and set(marked) == {r.call_id for r in failed}
    assert all(marked[r.call_id] == ERROR_MARKER + r.content for r in failed)
    assert dropped.carried == {"is_error": 13}
    assert thinking > 0 and dropped.thinking == thinking
    assert dropped.records == len(t.extras) and dropped.fields["cwd"] > 0
    # Nothing of Claude Code's own records leaks into the request.
    doc = json.loads(out)
    assert set(doc) == {"messages"}
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in doc["messages"])


def _mixed() -> Transcript:
    msgs = [Message("u", "user", (Text("look"), Image("image/png", "iVBOR"))),
            Message("a", "assistant", (Thinking("hm", "sig"), Opaque.of({"type": "server_tool_use", "id": "s"}),
                                       ToolCall("c1", "Read", {"file_path": "/a"}))),
            Message("r", "user", (ToolResult("c1", "gone", is_error=True, images=(Image(data="Zm9v"),)),)),
            Message("s", "user", (Text("Summary."),), Origin.SUMMARY, {"kind": "pipeline detail"})]
    return Transcript(msgs, "claude-code", meta={"model": "x"})


@pytest.mark.parametrize("target,thinking,images,opaque,error_as_text", [
    ("swe-agent", 1, 2, 1, True), ("openai", 1, 0, 1, True), ("anthropic", 0, 0, 0, False),
    ("openhands", 1, 1, 1, False), ("aider", 1, 2, 1, True)])
def test_dropped_counts_what_the_target_cannot_hold(target: str, thinking: int, images: int, opaque: int,
                                                    error_as_text: bool) -> None:
    conversion = convert(_mixed(), target)
    d = conversion.dropped
    assert (d.thinking, d.images, d.opaque) == (thinking, images, opaque)
    assert d.carried.get("is_error", 0) == int(error_as_text)
    assert d.fields == {"model": 1}     # a worksurface message's meta is the pipeline's, not a field
    result = next(b for m in conversion.messages for b in m.blocks if isinstance(b, ToolResult)) \
        if target != "aider" else None
    if result is not None:
        assert result.is_error != error_as_text
        assert result.content == (ERROR_MARKER + "gone" if error_as_text else "gone")
    assert d.describe().startswith(f"claude-code -> {target}: dropped")
    assert d.to_json()["dropped"]["thinking"] == thinking


def test_same_format_write_keeps_the_transcript_and_its_records() -> None:
    t = _mixed()
    conversion = convert(t, "claude-code")
    assert conversion.transcript is t and conversion.messages == t.messages
    assert conversion.dropped.empty and not conversion.dropped.carried


@needs_shared(SHORT)
def test_compact_cli_reports_what_the_conversion_dropped(tmp_path: Path) -> None:
    failed = sum(r.is_error for m in read_transcript(SHORT).messages for r in m.tool_results)
    out = tmp_path / "short.json"
    result = runner.invoke(app, ["compact", str(SHORT), "--out-format", "openai", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    conversion = json.loads(result.stdout)["conversion"]
    assert conversion["from"] == "claude-code" and conversion["to"] == "openai"
    assert conversion["carried_as_text"] == {"is_error": failed} and failed > 0
    assert out.read_text().count(ERROR_MARKER) == failed
    table = runner.invoke(app, ["compact", str(SHORT), "--out-format", "swe-agent", "-o", str(tmp_path / "s.traj")])
    assert table.exit_code == 0, table.output
    assert "claude-code -> swe-agent: dropped" in " ".join(table.stdout.split())
    assert detect_format((tmp_path / "s.traj").read_text()) == "swe-agent"
