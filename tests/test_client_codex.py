"""The real Codex CLI against a fake Responses API on 127.0.0.1: a rollout worksurface compacted resumes
from worksurface's summary and kept items without Codex compacting again, and a rollout Codex compacted
itself reads back with its compaction visible.

Needs the Codex CLI (`.ci/install-codex.sh`, or WORKSURFACE_CODEX_BIN); skips with the reason when it
is absent. HOME is a temporary folder; the fake server stops when each test ends.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fake_responses import (FakeResponses, Recorded, Reply, Steps, codex_env, find_codex, message,
                            rollouts, write_codex_config)
from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.core.model import Origin
from worksurface.core.view import check_pairing, live_slice

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
CODEX = find_codex()
TABLES = "[tools.update_plan]\nenabled = true\n"
RUN_TIMEOUT = 90
# Codex writes rollouts under sessions/YYYY/MM/DD; resume finds them by the id in the file name.
SESSIONS_DAY = Path(".codex") / "sessions" / "2026" / "11" / "30"

pytestmark = [
    pytest.mark.client, pytest.mark.slow,
    pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed: run .ci/install-codex.sh "
                                             "(or set WORKSURFACE_CODEX_BIN to a codex binary)"),
]
runner = CliRunner()
# The session fixture is small (about 3.5k tokens): a post-compact target this size keeps its last
# user turn with a tool call and summarizes the rest (the default, 20% of a 200k window, keeps it all).
TARGET = "2500"


def run_codex(home: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    work = home / "work"
    work.mkdir(exist_ok=True)
    assert CODEX is not None
    done = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                           "-C", str(work), *args], env=codex_env(home, dict(os.environ)), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def texts(item: dict[str, Any]) -> list[str]:
    return [p.get("text", "") for p in item.get("content") or [] if isinstance(p, dict)]


def install_rollout(home: Path, rollout: Path) -> str:
    """Put a rollout where Codex looks for sessions; returns its session id."""
    first = json.loads(rollout.read_text(encoding="utf-8").split("\n", 1)[0])
    session_id = str(first["payload"]["id"])
    day = home / SESSIONS_DAY
    day.mkdir(parents=True, exist_ok=True)
    shutil.copy(rollout, day / f"rollout-2026-11-30T13-52-37-{session_id}.jsonl")
    return session_id


def describe(requests: list[Recorded]) -> list[dict[str, Any]]:
    return [{"kind": r.kind, "path": r.path, "bytes": len(json.dumps(r.body)), "items": len(r.body.get("input", []))}
            for r in requests]


def test_resume_of_a_worksurface_compacted_rollout_sends_its_summary_and_kept_items(tmp_path: Path) -> None:
    compacted = tmp_path / "session.compacted.jsonl"
    # Sized on the text (--no-usage): Codex's own instructions and tool schemas, which the anchored
    # size counts, are larger than this small target on their own.
    res = runner.invoke(app, ["compact", str(FIXTURES / "session.jsonl"), "--force", "--target", TARGET,
                              "--no-usage", "-o", str(compacted), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["format"] == "codex" and report["boundary"]["trigger"] == "manual"

    view = read_transcript(compacted)
    assert view.format == "codex" and not check_pairing(live_slice(view.messages))
    summary = next(m for m in view.messages if m.origin is Origin.SUMMARY)
    kept = [m for m in live_slice(view.messages) if m.origin is Origin.CONVERSATION and m.role != "system"]
    assert kept, "the compaction keeps a tail"
    records = [json.loads(line) for line in compacted.read_text(encoding="utf-8").split("\n") if line.strip()]
    assert [r["payload"]["message"] for r in records if r["type"] == "compacted"] == [summary.text]

    home = tmp_path / "home"
    session_id = install_rollout(home, compacted)
    with FakeResponses(Steps([Reply([message("I fixed calc.add.", "msg_resumed")])])) as server:
        write_codex_config(home, server.base_url, tables=TABLES)
        done = run_codex(home, ["resume", session_id, "What did you change?"])
    assert "I fixed calc.add." in done.stdout
    print("requests on resume:", json.dumps(describe(server.requests)))

    assert server.kinds() == ["turn"], "Codex answered the prompt without compacting on its own"
    sent = server.requests[0].body["input"]
    sent_texts = [t for item in sent for t in texts(item)]
    assert summary.text in sent_texts, "worksurface's summary is in the request"
    assert sent_texts[-1] == "What did you change?"
    sent_calls = {item.get("call_id") for item in sent if item.get("type") in ("function_call", "custom_tool_call")}
    kept_calls = {c.id for m in kept for c in m.tool_calls}
    assert kept_calls and kept_calls <= sent_calls, "the kept tool calls are sent"
    for m in kept:
        for t in (m.text,) if m.text else ():
            assert t in sent_texts, f"kept message {m.id} is sent"
    covered = set(report["boundary"]["covered_ids"])
    first_prompt = "Fix the failing test in test_calc.py."
    if any(m.text == first_prompt for m in read_transcript(FIXTURES / "session.jsonl").messages if m.id in covered):
        assert first_prompt not in sent_texts, "what the summary replaced is not sent again"
    # Codex went on in the same file, after worksurface's compacted record.
    after = read_transcript(rollouts(home)[0])
    assert any(m.text == "I fixed calc.add." for m in after.messages)
    assert live_slice(after.messages)[0].meta.get("made_by") == "worksurface"


def test_a_rollout_codex_compacted_itself_shows_its_compaction(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = "Summary: calc.add subtracted; patched to add."
    steps = Steps([
        Reply([message("Looking.", "msg_a")], input_tokens=1000),
        Reply([message("Still looking.", "msg_b")], input_tokens=9000),  # over the limit: compact next turn
        Reply([message("Done after compaction.", "msg_c")], input_tokens=800),
    ], summary=summary)
    with FakeResponses(steps) as server:
        write_codex_config(home, server.base_url, extra="model_auto_compact_token_limit = 4000", tables=TABLES)
        run_codex(home, ["First question."])
        session_id = json.loads(rollouts(home)[0].read_text(encoding="utf-8").split("\n", 1)[0])["payload"]["id"]
        run_codex(home, ["resume", session_id, "Second question."])
        run_codex(home, ["resume", session_id, "Third question."])
    assert "compact" in server.kinds(), f"Codex did not compact: {server.kinds()}"
    rollout = rollouts(home)[0]
    transcript = read_transcript(rollout)
    boundaries = [m for m in transcript.messages if m.meta.get("compact_boundary")]
    assert [b.meta["made_by"] for b in boundaries] == ["codex"]
    live = live_slice(transcript.messages)
    assert live[0] is boundaries[0]
    assert any(m.meta.get("is_compact_summary") and summary in m.text for m in live)

    res = runner.invoke(app, ["inspect", str(rollout), "--json"])
    assert res.exit_code == 0, res.output
    shape = json.loads(res.stdout)
    listed = shape["compaction"]["boundaries"]
    assert [b["message_id"] for b in listed] == [boundaries[0].id]
    assert listed[0]["by"] == "harness"
