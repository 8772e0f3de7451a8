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
from shared import TRANSCRIPTS
from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.core.model import Origin
from worksurface.core.view import pairing_problems, live_slice

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
    assert view.format == "codex" and not pairing_problems(live_slice(view.messages))
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


# --- the field rollouts (issue 24): Codex CLI 0.140-0.142, another user's sessions -----------------------

FIELD_ROLLOUTS = sorted((TRANSCRIPTS / "field" / "EntityProcess-agentv").glob("*/*/*/full.jsonl")) \
    if TRANSCRIPTS.exists() else []
# The limit a user sets; the field rollouts ran with the 258,400-token window, so it is reachable.
AUTO_COMPACT_LIMIT = 150_000


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def install_for_fake(home: Path, rollout: Path, extra: list[dict[str, Any]] = ()) -> str:
    """Install a rollout as a session of the fake provider (Codex refuses to resume a session under
    another provider than the one it ran with); `extra` records go at its end."""
    lines = jsonl(rollout) + list(extra)
    meta = lines[0]
    assert meta["type"] == "session_meta"
    lines[0] = {**meta, "payload": {**meta["payload"], "model_provider": "fake"}}
    copy = home / "rollout.jsonl"
    home.mkdir(parents=True, exist_ok=True)
    copy.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    session_id = install_rollout(home, copy)
    copy.unlink()
    return session_id


def resume_field(home: Path, session_id: str, prompt: str) -> FakeResponses:
    with FakeResponses(Steps([Reply([message("Resumed.", "msg_field")])])) as server:
        write_codex_config(home, server.base_url, extra=f"model_auto_compact_token_limit = {AUTO_COMPACT_LIMIT}",
                           tables=TABLES)
        run_codex(home, ["resume", session_id, prompt])
    return server


def is_token_count(r: dict[str, Any]) -> bool:
    return r["type"] == "event_msg" and r["payload"].get("type") == "token_count" and bool(r["payload"].get("info"))


def standing(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The developer and harness-written user items of a rollout's live part, as recorded."""
    live = live_slice(read_transcript_text(records).messages)
    return [m.meta["raw"]["payload"] if m.meta["raw"].get("type") == "response_item" else m.meta["raw"]
            for m in live if m.role == "system" and not m.meta.get("compact_boundary")]


def read_transcript_text(records: list[dict[str, Any]]) -> Any:
    from worksurface.formats import loads
    return loads("".join(json.dumps(r) + "\n" for r in records), "codex")


@pytest.mark.parametrize("rollout", FIELD_ROLLOUTS, ids=lambda p: "/".join(p.parts[-4:-1]))
def test_every_field_rollout_resumes_after_worksurface_compacts_it_without_compacting_again(
        tmp_path: Path, rollout: Path) -> None:
    compacted = tmp_path / "compacted.jsonl"
    res = runner.invoke(app, ["compact", str(rollout), "--force", "--json", "-o", str(compacted)])
    assert res.exit_code == 0, res.output
    source, written = jsonl(rollout), jsonl(compacted)
    # One token_count, after everything, measuring the compacted view; the window stays the rollout's.
    counts = [r for r in written if is_token_count(r)]
    assert len(counts) == 1 and written[-1] is counts[0]
    info = counts[0]["payload"]["info"]
    assert info["last_token_usage"]["input_tokens"] == json.loads(res.stdout)["sizes"]["after"]["measured"]
    assert info["model_context_window"] == [r for r in source if is_token_count(r)][-1]["payload"]["info"][
        "model_context_window"]
    # The standing context is carried verbatim, and the latest turn_context follows the compaction.
    at = max(i for i, r in enumerate(written) if r["type"] == "compacted")
    history = written[at]["payload"]["replacement_history"]
    # (in the replacement history, or verbatim in the kept tail that follows it when it is that recent)
    kept = [r.get("payload") for r in written[at + 1:]]
    assert standing(source) and all(item in history or item in kept for item in standing(source))
    contexts = [r for r in source if r["type"] == "turn_context"]
    assert any(r["type"] == "turn_context" and r["payload"] == contexts[-1]["payload"] for r in written[at:])

    home = tmp_path / "home"
    server = resume_field(home, install_for_fake(home, compacted), "WS24: what is the state?")
    print("requests on resume:", json.dumps(describe(server.requests)))
    assert server.kinds() == ["turn"], f"Codex compacted the compacted rollout again: {server.kinds()}"
    sent = server.requests[0].body["input"]
    summary = written[at]["payload"]["message"]
    assert summary and summary in [t for item in sent for t in texts(item)]
    # The reasoning of the kept turns goes back to the model with its encrypted content intact.
    kept = [r["payload"] for r in written[at + 1:] if r["type"] == "response_item"
            and r["payload"]["type"] == "reasoning"]
    sent_reasoning = [i for i in sent if i.get("type") == "reasoning"]
    assert kept and len(sent_reasoning) >= len(kept)
    assert [i.get("encrypted_content") for i in sent_reasoning[-len(kept):]] == [r.get("encrypted_content") for r in kept]


def test_a_stale_token_count_would_make_codex_compact_again(tmp_path: Path) -> None:
    """The control for the check above: the same compacted rollout, with the measurement it had
    before the compaction as its last token_count, makes Codex compact before answering."""
    rollout = next((p for p in FIELD_ROLLOUTS if any(
        is_token_count(r) and r["payload"]["info"]["last_token_usage"]["total_tokens"] > AUTO_COMPACT_LIMIT
        for r in jsonl(p))), None)
    if rollout is None:
        pytest.skip("no field rollout measured more than the auto-compact limit")
    compacted = tmp_path / "compacted.jsonl"
    assert runner.invoke(app, ["compact", str(rollout), "--force", "-o", str(compacted)]).exit_code == 0
    stale = max((r for r in jsonl(rollout) if is_token_count(r)),
                key=lambda r: r["payload"]["info"]["last_token_usage"]["total_tokens"])
    home = tmp_path / "home"
    server = resume_field(home, install_for_fake(home, compacted, [stale]), "WS24: what is the state?")
    assert server.kinds()[0] in ("compact", "remote-compact"), server.kinds()
