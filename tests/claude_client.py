"""Driving the real Claude Code (installed by .ci/install-claude-code.sh) in tests: HOME in a temporary
folder, ANTHROPIC_BASE_URL at a fake Messages API on 127.0.0.1 (tests/fake_anthropic.py), and any other
traffic sent to a dead loopback proxy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropic, LoggedRequest

CLIENTS = Path(os.environ.get("WORKSURFACE_CLIENTS", Path.home() / ".cache" / "worksurface" / "clients"))
CLAUDE = CLIENTS / "claude-code" / "node_modules" / ".bin" / "claude"
# One resume takes 1-3 s (a compaction and its hooks a few more); a hung client must not hang the suite.
CLIENT_TIMEOUT = 120
# Nothing but the fake API may be reached: other traffic goes to a port nothing listens on.
DEAD_PROXY = "http://127.0.0.1:9"
needs_claude = pytest.mark.skipif(not CLAUDE.exists(), reason=f"Claude Code is not installed at {CLAUDE}: run "
                                  ".ci/install-claude-code.sh (needs npm), or set WORKSURFACE_CLIENTS")


def claude_env(home: Path, url: str, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-ant-worksurface-test", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "HTTPS_PROXY": DEAD_PROXY, "HTTP_PROXY": DEAD_PROXY,
            "NO_PROXY": "127.0.0.1,localhost", **extra}


def run_claude(home: Path, fake: FakeAnthropic, args: list[str], **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run `claude ARGS` in `home/work` against `fake`; fails the test on a non-zero exit."""
    work = home / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run([str(CLAUDE), *args], cwd=work, env=claude_env(home, fake.url, **extra_env),
                          capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
    assert done.returncode == 0, f"claude failed ({done.returncode}): {done.stderr[-2000:]}"
    assert all(r.path.startswith("/v1/messages") for r in fake.requests), [r.path for r in fake.requests]
    return done


def resume(home: Path, session_id: str, prompt: str, **extra_env: str) -> list[LoggedRequest]:
    """Run `claude -p PROMPT --resume ID` against a fresh fake API; the Messages requests it sent."""
    with FakeAnthropic() as fake:
        run_claude(home, fake, ["-p", prompt, "--resume", session_id], **extra_env)
        return fake.messages()
