"""`inspect` lists the compactions a transcript already contains: how many, where, tokens before and
after each, and who made them (Claude Code, Codex, worksurface)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import Convo, words
from shared import LONG_CC, needs_shared
from worksurface import Session
from worksurface.cli import app
from worksurface.formats import Transcript, read_transcript, write_transcript
from worksurface.offline.inspect import inspect_transcript
from worksurface.core.model import Message, Origin, Text
from worksurface.core.tokens import TokenCounter

runner = CliRunner()


def _compact_metadata(path: Path) -> list[dict]:
    """The compactMetadata of every compact_boundary record, read from the file itself."""
    return [r["compactMetadata"] for r in map(json.loads, path.read_text().splitlines())
            if r.get("type") == "system" and r.get("subtype") == "compact_boundary"]


@needs_shared()
@pytest.mark.skipif(len(LONG_CC) < 2, reason="the two long Claude Code sessions are not in the shared folder")
@pytest.mark.parametrize("path", LONG_CC, ids=lambda p: p.name[:8])
def test_claude_codes_own_compaction_is_listed_with_its_sizes(path: Path) -> None:
    t = read_transcript(path)
    report = inspect_transcript(t, TokenCounter())["compaction"]
    metadata = _compact_metadata(path)
    assert report["count"] == len(report["boundaries"]) == len(metadata) == 1
    (b,) = report["boundaries"]
    assert t.messages[b["index"]].id == b["message_id"] and t.messages[b["index"]].meta["compact_boundary"]
    assert b["made_by"] == "claude-code" and b["by"] == "harness"
    assert (b["trigger"], b["pre_tokens"]) == (metadata[0]["trigger"], metadata[0]["preTokens"])
    assert b["summary_id"] in report["compact_summaries"]
    # After: the summary and what came with it, far below the size that triggered the compaction;
    # the next call's usage includes the system prompt and tools, so it is larger than what is counted.
    assert 0 < b["counted_after"] < b["pre_tokens"] // 10
    assert b["counted_after"] < b["reported_after"] < b["pre_tokens"]


@needs_shared()
@pytest.mark.skipif(not LONG_CC, reason="the long Claude Code sessions are not in the shared folder")
def test_cli_shows_compactions_in_text_and_json() -> None:
    path = LONG_CC[0]
    pre = _compact_metadata(path)[0]["preTokens"]
    text = runner.invoke(app, ["inspect", str(path)])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert "compactions: 1" in flat and "by claude-code, trigger auto" in flat
    assert f"{pre:,} tokens before ->" in flat and "counted after" in flat
    as_json = json.loads(runner.invoke(app, ["inspect", str(path), "--json"]).stdout)
    assert as_json["compaction"]["count"] == 1
    assert as_json["compaction"]["boundaries"][0]["pre_tokens"] == pre


def _session() -> list[Message]:
    c = Convo("w")
    c.system("You are a coding agent.")
    c.user("Port the parser. " + words(40))
    for k in range(12):
        c.tool("bash", {"command": f"cat src/part{k}.py"}, words(600, seed=k), text=f"Reading part {k}.")
    c.user("Now run the tests.")
    return c.messages


@pytest.mark.parametrize("fmt", ["claude-code", "swe-agent", "openhands", "mini-swe-agent", "aider"])
def test_worksurface_compaction_written_to_a_file_is_listed_as_worksurfaces(fmt: str, tmp_path: Path) -> None:
    messages = _session()
    prepared = Session.open(None, post_compact_target_tokens=2_000).prepare(messages, force=True)
    out = tmp_path / f"compacted.{fmt}"
    write_transcript(Transcript([], fmt), out, prepared.messages)
    t = read_transcript(out, fmt)
    report = inspect_transcript(t, TokenCounter())["compaction"]
    assert report["count"] == 1
    (b,) = report["boundaries"]
    assert b["made_by"] == "worksurface" and b["by"] == "worksurface"
    assert t.messages[b["index"]].origin is Origin.BOUNDARY
    assert b["counted_after"] > 0 and report["worksurface"]["summary"] == 1


def test_made_by_comes_from_the_boundary_metadata() -> None:
    boundary = Message("b", "system", (Text("[compacted by Codex]"),),
                       meta={"compact_boundary": True, "made_by": "codex", "trigger": "auto",
                             "pre_tokens": 250_000, "post_tokens": 9_000})
    summary = Message("s", "user", (Text("summary"),), meta={"is_compact_summary": True})
    reply = Message("a", "assistant", (Text("ok"),), meta={"usage": {"input_tokens": 12_000}})
    report = inspect_transcript(Transcript([boundary, summary, reply], "codex"), TokenCounter())["compaction"]
    (b,) = report["boundaries"]
    assert (b["made_by"], b["by"], b["pre_tokens"], b["post_tokens"]) == ("codex", "harness", 250_000, 9_000)
    assert b["counted_after"] == TokenCounter().messages([boundary, summary])
    assert (b["reported_after"], b["summary_id"]) == (12_000, "s")
