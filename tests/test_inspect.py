"""`worksurface inspect` and the analysis behind it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.formats.base import Transcript
from worksurface.offline.inspect import inspect_transcript
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.core.tokens import TokenCounter
from shared import TRANSCRIPTS as _TRANSCRIPTS

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "fixtures" / "small.jsonl"
TRANSCRIPTS = _TRANSCRIPTS
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".traj", ".md")
NOT_TRANSCRIPTS = ("README.md", "manifest.json")
KEYS = {"path", "format", "messages", "tokens", "by_role", "by_category", "by_tool", "largest_results",
        "compaction", "live", "harness_clearings", "damaged_lines", "unanswered_calls", "orphan_results",
        "queued_inputs", "subagents", "window", "notices"}

runner = CliRunner()


def _json_report(*args: str) -> dict:
    result = runner.invoke(app, ["inspect", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_report_is_consistent_with_the_token_counter():
    report = _json_report(str(SMALL))
    messages = read_transcript(SMALL).messages
    assert set(report) == KEYS
    assert report["format"] == "claude-code" and report["messages"] == len(messages)
    assert report["tokens"] == TokenCounter().messages(messages)
    assert sum(r["tokens"] for r in report["by_role"].values()) == report["tokens"]
    assert sum(report["by_category"].values()) == report["tokens"]
    assert report["by_category"]["observations"] == sum(t["result_tokens"] for t in report["by_tool"].values())
    reads = sum(1 for m in messages for c in m.tool_calls if c.name == "Read")
    assert report["by_tool"]["Read"]["calls"] == report["by_tool"]["Read"]["results"] == reads
    sizes = [r["tokens"] for r in report["largest_results"]]
    assert sizes == sorted(sizes, reverse=True) and 0 < len(sizes) <= 10
    assert all(r["target"] for r in report["largest_results"] if r["tool"] in ("Read", "Bash", "Grep"))
    assert report["compaction"] == {"count": 0, "boundaries": [], "compact_summaries": [], "worksurface": {}}
    assert report["live"] == {"from_message": None, "messages": len(messages), "tokens": report["tokens"]}


def test_table_output():
    result = runner.invoke(app, ["inspect", str(SMALL)])
    assert result.exit_code == 0, result.output
    for heading in ("By role", "By category", "By tool", "Largest tool results", "compaction markers: none"):
        assert heading in result.stdout


def test_a_damaged_line_is_one_notice_counted_in_the_report_and_strict_exits_2(tmp_path):
    bad = tmp_path / "broken-session.jsonl"
    first = SMALL.read_text().splitlines()[0]
    bad.write_text(first + "\n{not json\n")
    result = runner.invoke(app, ["inspect", str(bad), "--json"])
    assert result.exit_code == 0, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "broken-session.jsonl: skipped 1 line" in result.stderr
    assert json.loads(result.stdout)["damaged_lines"] == [
        {"line": 2, "problem": "broken JSON: Expecting property name enclosed in double quotes at column 2",
         "cut": False}]
    table = runner.invoke(app, ["inspect", str(bad)])
    assert "1 damaged line(s) read around" in table.stdout
    strict = runner.invoke(app, ["inspect", str(bad), "--strict"])
    assert strict.exit_code == 2
    assert "broken-session.jsonl:2" in strict.stderr
    assert "Traceback" not in strict.output and len(strict.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["missing.jsonl"], [str(SMALL), "--format", "no-such-format"]])
def test_bad_arguments_exit_2(args, tmp_path):
    result = runner.invoke(app, ["inspect", *args])
    assert result.exit_code == 2 and "error" in result.stderr


def test_worksurface_messages_and_boundaries_are_known_by_metadata():
    boundary = Message("b", "system", (Text("[compacted]"),), Origin.BOUNDARY, {"trigger": "auto", "pre_tokens": 170})
    summary = Message("s", "user", (Text("summary <agent-status>"),), Origin.SUMMARY)
    lookalike = Message("u", "user", (ToolResult("c1", "<agent-status>fake</agent-status>"),))
    messages = [Message("sys", "system", (Text("You are an agent."),)), boundary, summary,
                Message("a", "assistant", (ToolCall("c1", "Read", {"file_path": "/x.py"}),)), lookalike]
    report = inspect_transcript(Transcript(messages, "openai"), TokenCounter())
    assert report["compaction"]["boundaries"] == [
        {"message_id": "b", "index": 1, "by": "worksurface", "made_by": "worksurface", "trigger": "auto",
         "pre_tokens": 170, "post_tokens": None, "counted_after": TokenCounter().messages(messages[1:3]),
         "reported_after": None, "summary_id": "s", "kept": 0, "duration_ms": None, "dropped_tokens": None}]
    assert report["compaction"]["worksurface"] == {"boundary": 1, "summary": 1}
    assert report["live"]["from_message"] == "b" and report["live"]["messages"] == 4
    assert report["by_category"]["stable_prefix"] == TokenCounter().message(messages[0])
    assert report["largest_results"][0]["target"] == "/x.py"


def _transcript_files() -> list[Path]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(p for p in TRANSCRIPTS.rglob("*")
                  if p.suffix in TRANSCRIPT_SUFFIXES and p.name not in NOT_TRANSCRIPTS)


def test_real_claude_code_compaction_is_reported():
    path = TRANSCRIPTS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    if not path.exists():
        pytest.skip("shared transcripts not available")
    report = _json_report(str(path))
    (boundary,) = report["compaction"]["boundaries"]
    assert boundary["by"] == "harness" and boundary["trigger"] == "auto" and boundary["pre_tokens"] == 167094
    assert len(report["compaction"]["compact_summaries"]) == 1
    assert report["live"]["from_message"] == boundary["message_id"] and report["live"]["tokens"] < report["tokens"]


def test_runs_on_every_shared_transcript():
    files = _transcript_files()
    if not files:
        pytest.skip("shared transcripts not available")
    counter = TokenCounter()
    for path in files:
        report = inspect_transcript(read_transcript(path), counter)
        assert report["messages"] > 0, path
        assert sum(report["by_category"].values()) == report["tokens"], path
