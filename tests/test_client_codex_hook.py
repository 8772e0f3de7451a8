"""The worksurface hook in the real Codex CLI (issue 31, item 1). Codex 0.169 has SessionStart with the
`compact` source (run once its own compaction is written to the rollout, before the next model request)
besides PreCompact and PostCompact: `worksurface hook install codex` writes the SessionStart (matcher
compact) and PreCompact entries into $CODEX_HOME/hooks.json; a session over Codex's auto-compact limit
compacts on its own, runs the hook, and the next request carries worksurface's surface (a developer
message) after Codex's summary: the plan and the file the compaction dropped, not the user's rule
that Codex's compacted history keeps.

Codex runs against the fake Responses API on 127.0.0.1 (tests/fake_responses.py) with HOME and
CODEX_HOME in a temporary folder; `--dangerously-bypass-hook-trust` stands for the user trusting the
new hook in /hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fake_responses import (FakeResponses, Reply, Steps, codex_env, find_codex, function_call, message, rollouts,
                            write_codex_config)
from worksurface.cli import app
from worksurface.hooks.run import HEADER
from worksurface.session import homes

CODEX = find_codex()
RUN_TIMEOUT = 120
NEVER_VENDOR = "Never edit the files under vendor/."
SUMMARY = "The user wants calc.add fixed. Work so far: read calc.py."
# Long enough that the surface is over Codex's default 10,000 characters of hook context: the
# installer raises the handler's additionalContextLimit, so it arrives whole.
HELPERS = "".join(f"def helper_{n}(x):\n    return x + {n}  # a helper the tests import\n\n" for n in range(180))
CALC = f"{HELPERS}def add(a, b):\n    return a - b  # WS31-CALC-BODY\n"
PLAN = [{"step": "Read calc.py", "status": "completed"}, {"step": "Make calc.add add", "status": "in_progress"},
        {"step": "Run pytest -q", "status": "pending"}]

pytestmark = [
    pytest.mark.client, pytest.mark.slow,
    pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed: run .ci/install-codex.sh "
                                             "(or set WORKSURFACE_CODEX_BIN to a codex binary)"),
]
runner = CliRunner()


def run_codex(home: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    work = home / "work"
    work.mkdir(exist_ok=True)
    assert CODEX is not None
    done = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                           "--dangerously-bypass-hook-trust", "-C", str(work), *args],
                          env=codex_env(home, dict(os.environ)), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def input_texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message item of a Responses request, in order."""
    return [(item.get("role", ""), part.get("text", "")) for item in body.get("input", [])
            if item.get("type") == "message" for part in item.get("content") or [] if isinstance(part, dict)]


def test_codex_compacts_then_sends_worksurface_surface_after_its_summary(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    res = runner.invoke(app, ["hook", "install", "codex", "--scope", "user"])
    assert res.exit_code == 0, res.output
    hooks = json.loads((home / ".codex" / "hooks.json").read_text(encoding="utf-8"))
    assert set(hooks) == {"hooks"} and set(hooks["hooks"]) == {"SessionStart", "PreCompact"}
    assert "trust" in res.stdout  # the install says Codex asks the user to trust a new hook

    (home / "work").mkdir(parents=True)
    (home / "work" / "calc.py").write_text(CALC, encoding="utf-8")
    steps = Steps([Reply([function_call("update_plan", {"plan": PLAN}, "call_plan")]),
                   Reply([function_call("exec_command", {"cmd": "cat calc.py", "yield_time_ms": 5000}, "call_cat")]),
                   Reply([message("calc.add subtracts.", "msg_a")], input_tokens=1000),
                   Reply([message("Still looking.", "msg_b")], input_tokens=9000),  # over the limit: compact next
                   Reply([message("Done after compaction.", "msg_c")], input_tokens=800)], summary=SUMMARY)
    with FakeResponses(steps) as server:
        # Over the limit only once a reply reports 9000 tokens (the file read alone stays under it).
        write_codex_config(home, server.base_url, extra="model_auto_compact_token_limit = 8000",
                           tables="[tools.update_plan]\nenabled = true\n")
        run_codex(home, [f"Fix calc.add in calc.py. {NEVER_VENDOR}"])
        session_id = json.loads(rollouts(home)[0].read_text(encoding="utf-8").split("\n", 1)[0])["payload"]["id"]
        run_codex(home, ["resume", session_id, "Second question."])
        run_codex(home, ["resume", session_id, "Third question."])
    kinds = server.kinds()
    assert "compact" in kinds, f"Codex did not compact: {kinds}"
    after = server.requests[kinds.index("compact") + 1]
    sent = input_texts(after.body)
    print("request after the compaction:", json.dumps([(role, text[:160]) for role, text in sent]))
    summary_at = next(i for i, (_, text) in enumerate(sent) if SUMMARY in text)
    surface_at = next(i for i, (_, text) in enumerate(sent) if HEADER in text)
    asked_at = max(i for i, (_, text) in enumerate(sent) if text == "Third question.")
    assert summary_at < surface_at < asked_at
    role, surface = sent[surface_at]
    print("surface sent:", json.dumps(surface))
    assert role == "developer"
    assert "<plan>" in surface and "[in_progress] Make calc.add add" in surface
    assert '/calc.py" source="workspace">' in surface and "WS31-CALC-BODY" in surface
    assert len(surface) > 10_000 and "hook output saved" not in surface, "whole, past Codex's default limit"
    assert any(NEVER_VENDOR in text for _, text in sent[:surface_at]), "Codex keeps the user's messages"
    restored = surface.split("<agent-status", 1)[0]  # the status bar names the goal, which quotes it
    assert NEVER_VENDOR not in restored, "so the surface does not restore the rule again"
    assert '<agent-status kind="baseline"' in surface
    assert homes.is_session_dir(homes.codex_session_folder(session_id))
