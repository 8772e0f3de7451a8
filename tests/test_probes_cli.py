"""`worksurface probe derive|check|curve` from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from probes_samples import TRANSCRIPTS
from worksurface.cli import app
from worksurface.probes import ProbeSet

SHORT = TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl"
pytestmark = pytest.mark.skipif(not SHORT.is_file(), reason="shared transcripts not available")
runner = CliRunner()


def test_derive_writes_a_probe_file_or_prints_it(tmp_path):
    out = tmp_path / "probes.json"
    result = runner.invoke(app, ["probe", "derive", str(SHORT), "-o", str(out)])
    assert result.exit_code == 0, result.output
    probes = ProbeSet.load(out)
    assert len(probes) > 0 and probes.transcript == str(SHORT)
    printed = runner.invoke(app, ["probe", "derive", str(SHORT), "--at", "10"])
    assert printed.exit_code == 0
    assert json.loads(printed.stdout)["probes"]


def test_check_json_and_table(tmp_path):
    out = tmp_path / "probes.json"
    runner.invoke(app, ["probe", "derive", str(SHORT), "-o", str(out)])
    result = runner.invoke(app, ["probe", "check", str(SHORT), "--probes", str(out), "--json",
                                 "--baseline", "truncate,mask"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["methods"]) == {"worksurface", "truncate", "mask"}
    assert data["methods"]["truncate"]["tokens"] <= data["methods"]["worksurface"]["tokens"]
    table = runner.invoke(app, ["probe", "check", str(SHORT), "--probes", str(out), "--baseline", "truncate"])
    assert table.exit_code == 0, table.output
    assert "worksurface" in table.stdout and "truncate" in table.stdout


def test_curve_json(tmp_path):
    # 15,500 tokens; a 12,000 window leaves a 10,020-token threshold, so the replay compacts.
    path = TRANSCRIPTS / "claude-code" / "subagent.jsonl"
    out = tmp_path / "probes.json"
    runner.invoke(app, ["probe", "derive", str(path), "-o", str(out)])
    result = runner.invoke(app, ["probe", "curve", str(path), "--probes", str(out), "--window", "12000",
                                 "--target", "3000", "--json"])
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)
    assert points and all(p["total"] <= len(ProbeSet.load(out)) for p in points)


def test_curve_without_a_compaction_says_why(tmp_path):
    path = TRANSCRIPTS / "claude-code" / "subagent.jsonl"
    out = tmp_path / "probes.json"
    runner.invoke(app, ["probe", "derive", str(path), "-o", str(out)])
    result = runner.invoke(app, ["probe", "curve", str(path), "--probes", str(out), "--window", "200000",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    assert "no compaction happened" in result.stderr and "167,000" in result.stderr


def test_errors_are_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"probes": [{"id": "x", "category": "nope", "needles": ["a"]}]}')
    result = runner.invoke(app, ["probe", "check", str(SHORT), "--probes", str(bad)])
    assert result.exit_code == 2
    assert "probes[0]" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["probe", "derive", str(SHORT), "--at", "boundary"])
    assert result.exit_code == 2 and "no compact boundary" in result.output
