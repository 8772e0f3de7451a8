"""`worksurface status PATH [--strategy S] [--json]`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from status_helpers import CLAUDE_CODE
from worksurface.cli import app

runner = CliRunner()


def openai_transcript(tmp_path):
    """A small OpenAI chat transcript: a request, a failing pytest run, a fix in progress."""
    messages = [
        {"role": "user", "content": "Fix the payment callback signature check"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "shell", "arguments": json.dumps({"command": "pytest -q"})}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": "FAILED tests/test_pay.py::test_invalid_signature - assert False\n1 failed, 41 passed in 0.4s"},
        {"role": "assistant", "content": "One test fails; fixing the signature check."},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_json_gives_the_snapshot_with_sources_and_signals(tmp_path):
    result = runner.invoke(app, ["status", str(openai_transcript(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    sections = data["snapshot"]["sections"]
    run = sections["verification"]["pytest"]
    assert (run["value"]["passed"], run["value"]["failed"], run["source"], run["freshness"]) == (
        41, 1, "transcript", "current")
    assert run["message_id"]
    assert "fix before moving on" in sections["signals"]["fix_verification"]["value"]
    assert sections["task"]["goal"]["value"] == "Fix the payment callback signature check"
    assert data["replay"]["strategy"] == "delta" and data["replay"]["publications"] >= 1
    assert data["rendered"].startswith("<agent-status")


@pytest.mark.parametrize("strategy", ["append", "replace", "delta"])
def test_table_output_shows_fields_the_replay_and_the_bar(tmp_path, strategy):
    result = runner.invoke(app, ["status", str(openai_transcript(tmp_path)), "--strategy", strategy])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "worksurface status: chat.json" in out
    assert "verification" in out and "41 passed, 1 failed" in out
    assert f"strategy {strategy}:" in out
    assert out.count("<agent-status") == 1 and out.rstrip().endswith("</agent-status>")


def test_real_claude_code_session(tmp_path):
    path = CLAUDE_CODE / "short.jsonl"
    if not path.exists():
        pytest.skip(f"shared transcripts not found at {CLAUDE_CODE}")
    data = json.loads(runner.invoke(app, ["status", str(path), "--json"]).output)
    cwd = data["snapshot"]["sections"]["environment"]["cwd"]
    assert cwd["value"] == "/home/marco/projects/spotter" and cwd["source"] == "transcript"
    assert data["snapshot"]["sections"]["repository"]["branch"]["value"] == "master"


@pytest.mark.parametrize("args, problem", [
    (["--strategy", "sometimes"], "'sometimes' is not one of 'append', 'replace', 'delta'"),
    (["--format", "nope"], "'nope' is not one of 'auto'"),
])
def test_bad_options_fail_with_a_one_line_error(tmp_path, args, problem):
    result = runner.invoke(app, ["status", str(openai_transcript(tmp_path)), *args])
    assert result.exit_code == 2
    assert problem in result.output


def test_a_missing_file_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["status", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "no such file" in result.output
