"""`worksurface mcp` (issue 31, item 1): a real JSON-RPC exchange over stdio with the server process, as
Claude Code or Codex would have it: initialize, the initialized notification, tools/list, tools/call of
fetch_artifact on an artifact a compaction kept, and the protocol's errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core.artifacts import FETCH_TOOL_NAME, fetch_tool

runner = CliRunner()
BIG = "\n".join(f"line {i}: ERROR worker {i % 7} lost its lease" for i in range(2000))
TIMEOUT = 60


class Server:
    """`python -m worksurface mcp ...` as a subprocess, spoken to one JSON line at a time."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "worksurface", "mcp", *args], cwd=cwd,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.next_id = 0

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the server closed stdout: {self.process.stderr.read() if self.process.stderr else ''}"
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params else {})})
        reply = self.receive()
        assert reply["jsonrpc"] == "2.0" and reply["id"] == self.next_id
        return reply

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=TIMEOUT)


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, str]:
    """A compacted output whose marker names an artifact kept beside it; (output, artifact id)."""
    chat = [{"role": "user", "content": "Why did the workers fail?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat log"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": BIG},
            {"role": "assistant", "content": "They lost their leases."}]
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(chat), encoding="utf-8")
    out = tmp_path / "out.json"
    res = runner.invoke(app, ["compact", str(source), "-o", str(out)])
    assert res.exit_code == 0, res.output
    ids = set(__import__("re").findall(r"artifact ([0-9a-f]{16})", out.read_text(encoding="utf-8")))
    assert len(ids) == 1
    return out, ids.pop()


def test_a_client_lists_and_calls_fetch_artifact_over_stdio(tmp_path: Path, compacted: tuple[Path, str]) -> None:
    out, artifact_id = compacted
    server = Server(tmp_path)  # the default lookup: sessions kept beside files in the current folder
    try:
        init = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "test", "version": "1"}})
        result = init["result"]
        assert result["protocolVersion"] == "2025-06-18" and result["serverInfo"]["name"] == "worksurface"
        assert result["capabilities"] == {"tools": {"listChanged": False}}
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # no answer to a notification
        assert server.request("ping")["result"] == {}
        tools = server.request("tools/list")["result"]["tools"]
        assert tools == [fetch_tool("mcp")] and tools[0]["name"] == FETCH_TOOL_NAME

        called = server.request("tools/call", {"name": FETCH_TOOL_NAME, "arguments": {"id": artifact_id}})["result"]
        assert called["isError"] is False and called["content"] == [{"type": "text", "text": BIG}]
        part = server.request("tools/call", {"name": FETCH_TOOL_NAME,
                                             "arguments": {"id": artifact_id, "start_line": 3, "end_line": 4}})
        assert part["result"]["content"][0]["text"] == "\n".join(BIG.splitlines()[2:4])

        missing = server.request("tools/call", {"name": FETCH_TOOL_NAME, "arguments": {"id": "0" * 16}})["result"]
        assert missing["isError"] is True and "no artifact" in missing["content"][0]["text"]
        climbing = server.request("tools/call", {"name": FETCH_TOOL_NAME, "arguments": {"id": "../../etc/passwd"}})
        assert climbing["result"]["isError"] is True
        assert server.request("tools/call", {"name": "rm_rf", "arguments": {}})["error"]["code"] == -32602
        assert server.request("resources/list")["error"]["code"] == -32601
        server.send("{not json")
        assert server.receive()["error"]["code"] == -32700
    finally:
        assert server.close() == 0


def test_session_option_limits_the_lookup_and_unknown_versions_get_the_newest(tmp_path: Path,
                                                                              compacted: tuple[Path, str]) -> None:
    out, artifact_id = compacted
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = Server(elsewhere, "--session", str(out))  # the compacted file names its session
    try:
        init = server.request("initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})
        assert init["result"]["protocolVersion"] == "2025-11-25"
        called = server.request("tools/call", {"name": FETCH_TOOL_NAME, "arguments": {"id": artifact_id}})
        assert called["result"]["content"][0]["text"] == BIG
    finally:
        assert server.close() == 0
    bad = runner.invoke(app, ["mcp", "--session", str(tmp_path / "nothing.json")])
    assert bad.exit_code == 2 and "no session is kept for it" in bad.stderr


def test_the_finder_looks_in_each_default_place_and_refuses_ids_that_are_paths(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from worksurface.core.errors import ArtifactNotFoundError
    from worksurface.hooks.mcp import ArtifactFinder, STORE_PATTERN, default_roots

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    places = {
        "1" * 16: tmp_path / "home" / ".claude" / "projects" / "-work-app" / "sid" / "worksurface",
        "2" * 16: tmp_path / "codex" / "worksurface" / "codex-session",
        "3" * 16: tmp_path / "gateway" / "conversation-1",
    }
    for artifact_id, home in places.items():
        (home / "artifacts").mkdir(parents=True)
        (home / "artifacts" / f"{artifact_id}.txt").write_text(f"content {artifact_id}", encoding="utf-8")
    finder = ArtifactFinder(roots=default_roots() + [(tmp_path / "gateway", STORE_PATTERN)])
    for artifact_id in places:
        assert finder.artifact(artifact_id) == f"content {artifact_id}"
    for bad in ("4" * 16, "../../etc/passwd", "*"):
        with pytest.raises(ArtifactNotFoundError):
            finder.artifact(bad)
