"""`worksurface mcp` (on the official `mcp` SDK, issue 54) in the real Claude Code (issue 31, item 1):
added with `claude mcp add` (listed as connected by `claude mcp list`) or started from `--mcp-config`,
its fetch_artifact tool is offered to the model, and a call of it (scripted in the fake Messages API)
returns what a compaction replaced, in the tool_result Claude Code sends back.

Claude Code defers MCP tools behind ToolSearch by default; ENABLE_TOOL_SEARCH=false lists the tool
with the others, so the scripted model can call it directly."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from claude_client import needs_claude, run_claude
from fake_anthropic import Answer, FakeAnthropic, tool_use
from worksurface.cli import app

TOOL = "mcp__worksurface__fetch_artifact"
CALL_ID = "toolu_ws31_fetch"
STARTUP_WAIT_MS = "60000"
BIG = "\n".join(f"line {i}: ERROR worker {i % 7} lost its lease" for i in range(2000))

pytestmark = [pytest.mark.client, pytest.mark.slow, needs_claude]
runner = CliRunner()


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body.get("messages", []) if isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_result"]


def compacted(tmp_path: Path) -> tuple[Path, str]:
    """A compacted output whose marker names an artifact kept beside it; (output, artifact id)."""
    chat = [{"role": "user", "content": "Why did the workers fail?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat log"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": BIG},
            {"role": "assistant", "content": "They lost their leases."}]
    (tmp_path / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    out = tmp_path / "out.json"
    assert runner.invoke(app, ["compact", str(tmp_path / "chat.json"), "-o", str(out)]).exit_code == 0
    return out, re.findall(r"artifact ([0-9a-f]{16})", out.read_text(encoding="utf-8"))[0]


def call_fetch_artifact(tmp_path: Path, artifact_id: str, extra_args: list[str], **extra_env: str) -> None:
    """Claude Code, told to read the artifact, calls fetch_artifact (scripted) and sends its answer back."""
    def script(body: dict[str, Any], done: int) -> Answer:
        if any(r["tool_use_id"] == CALL_ID for r in tool_results(body)):
            return Answer([{"type": "text", "text": "Fetched."}])  # the tool answered: the turn ends
        assert TOOL in [t.get("name") for t in body.get("tools", [])], "the MCP tool is offered to the model"
        return tool_use(TOOL, {"id": artifact_id, "start_line": 1, "end_line": 3}, CALL_ID)

    with FakeAnthropic(script=script) as fake:
        # The first request waits for the server to connect (it starts in a few seconds on a busy machine).
        run_claude(tmp_path, fake, ["-p", f"Read artifact {artifact_id}.", *extra_args, "--allowedTools", TOOL],
                   ENABLE_TOOL_SEARCH="false", CLAUDE_CODE_MCP_STARTUP_WAIT_MS=STARTUP_WAIT_MS, **extra_env)
        requests = fake.messages()
    answered = [r for req in requests for r in tool_results(req.body) if r["tool_use_id"] == CALL_ID]
    assert answered, f"no tool_result for the call in {len(requests)} requests"
    content = answered[0]["content"]
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    print("tool_result Claude Code sent back:", json.dumps(answered[0])[:600])
    assert not answered[0].get("is_error") and text == "\n".join(BIG.splitlines()[:3])


def test_claude_code_calls_fetch_artifact_through_the_mcp_server(tmp_path: Path) -> None:
    out, artifact_id = compacted(tmp_path)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"worksurface": {
        "command": sys.executable, "args": ["-m", "worksurface", "mcp", "--session", str(out)]}}}), encoding="utf-8")
    call_fetch_artifact(tmp_path, artifact_id, ["--mcp-config", str(config)])


def test_claude_mcp_add_lists_the_server_connected_and_the_model_calls_it(tmp_path: Path) -> None:
    out, artifact_id = compacted(tmp_path)
    with FakeAnthropic() as fake:
        run_claude(tmp_path, fake, ["mcp", "add", "worksurface", "--", sys.executable, "-m", "worksurface", "mcp",
                                    "--session", str(out)])
        listed = run_claude(tmp_path, fake, ["mcp", "list"]).stdout
    print("claude mcp list:", listed)
    line = next(line for line in listed.splitlines() if line.startswith("worksurface"))
    assert "Connected" in line and "Failed" not in line, listed
    # Servers from the user's settings connect in the background; the first request waits for them here.
    call_fetch_artifact(tmp_path, artifact_id, [], MCP_CONNECTION_NONBLOCKING="false")
