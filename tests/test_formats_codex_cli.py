"""The commands work on Codex rollouts as on the other formats: inspect, compact, status, replay,
probe derive / check (issue 20, item 4). Uses the rollouts the real Codex CLI wrote (fixtures/codex/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.core.model import Origin
from worksurface.core.view import pairing_problems, live_slice

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
SESSION = FIXTURES / "session.jsonl"
COMPACTED = FIXTURES / "compacted.jsonl"
runner = CliRunner()
# The session fixture is small (about 3.5k tokens): a post-compact target this size keeps its last
# user turn with a tool call and summarizes the rest (the default, 20% of a 200k window, keeps it all).
TARGET = "2500"


def invoke(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_inspect_lists_codex_compaction_as_the_harness_boundary() -> None:
    shape = json.loads(invoke("inspect", str(COMPACTED), "--json"))
    boundaries = shape["compaction"]["boundaries"]
    assert len(boundaries) == 1 and boundaries[0]["by"] == "harness" and boundaries[0]["pre_tokens"] == 6050
    assert len(shape["compaction"]["compact_summaries"]) == 1
    plain = json.loads(invoke("inspect", str(SESSION), "--json"))
    assert plain["compaction"]["boundaries"] == []


def test_compact_writes_a_rollout_that_inspect_shows_compacted_by_worksurface(tmp_path: Path) -> None:
    out = tmp_path / "session.compacted.jsonl"
    report = json.loads(invoke("compact", str(SESSION), "--force", "--target", TARGET, "-o", str(out), "--json"))
    assert report["format"] == "codex" and report["boundary"]["trigger"] == "manual"
    view = read_transcript(out)
    assert view.format == "codex" and not pairing_problems(live_slice(view.messages))
    boundary = next(m for m in view.messages if m.origin is Origin.BOUNDARY)
    assert boundary.meta["made_by"] == "worksurface"
    assert boundary.meta["pre_tokens"] == report["boundary"]["pre_tokens"]
    shape = json.loads(invoke("inspect", str(out), "--json"))
    assert [b["by"] for b in shape["compaction"]["boundaries"]] == ["worksurface"]


@pytest.mark.parametrize("path", [SESSION, COMPACTED], ids=lambda p: p.name)
def test_status_replay_and_probes_run_on_codex_rollouts(path: Path, tmp_path: Path) -> None:
    text = {SESSION: "Fix the failing test in test_calc.py.", COMPACTED: "Make test_calc.py pass."}[path]
    status = json.loads(invoke("status", str(path), "--json"))
    assert status["snapshot"]["sections"]["task"]["goal"]["value"] == text
    replay = json.loads(invoke("replay", str(path), "--json"))
    assert len(replay["calls"]) >= 2 and all(c["view_tokens"] > 0 for c in replay["calls"])
    probes = tmp_path / "probes.json"
    invoke("probe", "derive", str(path), "-o", str(probes))
    derived = json.loads(probes.read_text(encoding="utf-8"))["probes"]
    assert any(p["category"] == "request" and text in p["needles"] for p in derived)
    if path == SESSION:  # the update_plan calls become plan probes
        assert any(p["category"] == "plan" for p in derived)
    checked = json.loads(invoke("probe", "check", str(path), "--probes", str(probes), "--json"))
    assert checked["methods"]["worksurface"]["total"] == len(derived)
