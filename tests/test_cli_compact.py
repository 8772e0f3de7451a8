"""`worksurface compact` and `worksurface replay` through the CLI: output files, JSON report, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from builders import LONG_CC
from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.core.tokens import TokenCounter
from worksurface.core.view import pairing_problems, live_slice

FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()


def _compact(*args: str) -> dict:
    res = runner.invoke(app, ["compact", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_compact_json_report_and_output_file(tmp_path):
    out = tmp_path / "small.out.jsonl"
    data = _compact(str(FIXTURES / "small.jsonl"), "-o", str(out), "--force")
    assert {"tokens_before", "tokens_after", "stages", "boundary"} <= set(data)
    assert [s["name"] for s in data["stages"]] == ["ingest", "budget", "snip", "microcompact", "collapse", "autocompact"]
    assert set(data["stages"][0]) == {"name", "tokens_before", "tokens_after", "items", "ms", "skipped"}
    assert data["boundary"]["trigger"] == "manual"
    written = read_transcript(out)
    assert written.format == "claude-code" and not pairing_problems(live_slice(written.messages))


@pytest.mark.skipif(not LONG_CC, reason="shared transcripts not available")
@pytest.mark.parametrize("target", [None, 10_000])
def test_compact_long_claude_code_sessions_at_their_boundary(tmp_path, target):
    for path in LONG_CC:
        out = tmp_path / f"{path.stem}.jsonl"
        extra = ["--target", str(target)] if target else []
        data = _compact(str(path), "--at", "boundary", "--force", "-o", str(out), *extra)
        view = live_slice(read_transcript(out).messages)
        assert not pairing_problems(view)
        assert TokenCounter().messages(view) <= (target or 40_000)
        assert data["tokens_after"] <= (target or 40_000)


def test_compact_errors_name_the_file_and_exit_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user", "uuid": "a", "sessionId": "s", "message": {"role": "user", "content": "hi"}}\n'
                   '{"type": "user", "uuid": "b", "message": 7}\n')
    res = runner.invoke(app, ["compact", str(bad)])
    assert res.exit_code == 2 and "bad.jsonl:2" in res.output


def test_compact_reads_around_a_damaged_line_keeps_it_and_strict_refuses(tmp_path):
    bad = tmp_path / "bad.jsonl"
    first = '{"type": "user", "uuid": "a", "sessionId": "s", "message": {"role": "user", "content": "hi"}}\n'
    bad.write_text(first + '{broken\n')
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["compact", str(bad), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "bad.jsonl: skipped 1 line" in res.stderr and "line 2: broken JSON" in res.stderr
    lines = out.read_text().splitlines()
    assert json.loads(lines[0]) == json.loads(first) and lines[1] == "{broken"  # at its place, as read
    strict = runner.invoke(app, ["compact", str(bad), "-o", str(out), "--strict"])
    assert strict.exit_code == 2 and "bad.jsonl:2: broken JSON" in strict.stderr


def test_replay_reports_every_call(tmp_path):
    res = runner.invoke(app, ["replay", str(FIXTURES / "small.jsonl"), "--session", str(tmp_path / "s"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["summary"]["calls"] == len(data["calls"]) > 3
    assert 0.5 < data["summary"]["cache_share"] <= 1.0
    assert all(c["cached_tokens"] <= c["view_tokens"] for c in data["calls"])
