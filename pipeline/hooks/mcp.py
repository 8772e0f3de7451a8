"""`worksurface mcp`: a stdio MCP server offering `fetch_artifact`, so Claude Code or Codex can read back
what worksurface replaced with a marker.

JSON-RPC 2.0, one message per line on stdin and stdout (MCP's stdio transport); logs go to stderr
only. It answers `initialize` (agreeing on the client's protocol version when it knows it), `ping`,
`tools/list` and `tools/call`; notifications (`notifications/initialized`, cancellations) get no
answer, and any other method is "method not found". The tool's definition is the one every other
surface offers (`core.artifacts.fetch_tool`).

An artifact is looked up by its id in the session directories given with `--session`, else in the
session directories worksurface keeps by default (`session.homes`): in Claude Code's session folders
under `~/.claude/projects`, in `$CODEX_HOME/worksurface`, beside files in the current folder, and in
any further roots the caller adds (the gateway's store).
Ids are content digests: the first session holding one holds the right content.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TextIO

from ..core.artifacts import ARTIFACT_ID_RE, FETCH_TOOL_NAME, answer_fetch, fetch_tool
from ..core.errors import ArtifactNotFoundError, FormatError
from ..core.fileio import read_text
from ..session import homes

log = logging.getLogger("worksurface.mcp")

JSONRPC = "2.0"
# Protocol revisions this server speaks, newest first: a client asking for one of them gets it, any
# other client gets the newest (and may then disconnect, as the specification says).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INSTRUCTIONS = (f"worksurface replaces large or old tool results with a marker naming an artifact id "
                f"(`artifact 3f2a9c0d1e2b4a5c`). Call {FETCH_TOOL_NAME} with that id to read the original, "
                "or a line range of it.")
# Where the default session directories are, as (folder, glob of an artifact file below it).
CLAUDE_PATTERN = f"*/*/{homes.FOLDER}/{homes.ARTIFACTS_FOLDER}/{{id}}.txt"
CODEX_PATTERN = f"*/{homes.ARTIFACTS_FOLDER}/{{id}}.txt"
# A store holding one session directory per id (the Codex hook's folder, the gateway's store).
STORE_PATTERN = CODEX_PATTERN
BESIDE_PATTERN = f"*{homes.SUFFIX}/{homes.ARTIFACTS_FOLDER}/{{id}}.txt"


class ArtifactFinder:
    """Finds an artifact's content by id: in the given session directories, else in the default ones."""

    def __init__(self, sessions: Sequence[Path] = (), roots: Sequence[tuple[Path, str]] | None = None) -> None:
        self.sessions = list(sessions)
        self.roots = list(roots) if roots is not None else default_roots()

    def artifact(self, artifact_id: str) -> str:
        if not ARTIFACT_ID_RE.fullmatch(artifact_id):
            raise ArtifactNotFoundError(f"{artifact_id!r} is not an artifact id")
        for path in self._files(artifact_id):
            try:
                return read_text(path, "artifact")
            except FormatError:
                continue
        raise ArtifactNotFoundError(f"no artifact {artifact_id!r} in the sessions searched")

    def _files(self, artifact_id: str) -> Iterable[Path]:
        for session in self.sessions:
            yield session / homes.ARTIFACTS_FOLDER / f"{artifact_id}.txt"
        if self.sessions:
            return
        for folder, pattern in self.roots:
            if folder.is_dir():
                yield from sorted(folder.glob(pattern.format(id=artifact_id)))


def default_roots() -> list[tuple[Path, str]]:
    claude = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "projects"
    return [(claude, CLAUDE_PATTERN), (homes.codex_home() / homes.FOLDER, STORE_PATTERN),
            (Path.cwd(), BESIDE_PATTERN)]


class McpServer:
    """The protocol: `handle(message)` -> the response to send (None for a notification)."""

    def __init__(self, finder: ArtifactFinder, version: str = "unknown") -> None:
        self.finder = finder
        self.version = version
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "initialize": self._initialize, "ping": lambda params: {}, "tools/list": self._tools_list,
            "tools/call": self._tools_call}

    def handle(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != JSONRPC:
            return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method, request_id = message.get("method"), message.get("id")
        if method is None:
            return None  # a response to a request of ours: this server sends none
        if "id" not in message:
            return None  # a notification (initialized, cancelled, ...): never answered
        if not isinstance(method, str):
            return _error(request_id, INVALID_REQUEST, "method must be a string")
        handler = self._methods.get(method)
        if handler is None:
            return _error(request_id, METHOD_NOT_FOUND, f"method not found: {method}")
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return _error(request_id, INVALID_PARAMS, "params must be an object")
        try:
            return {"jsonrpc": JSONRPC, "id": request_id, "result": handler(params)}
        except _InvalidParams as exc:
            return _error(request_id, INVALID_PARAMS, str(exc))

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "worksurface", "version": self.version}, "instructions": INSTRUCTIONS}

    def _tools_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [fetch_tool("mcp")]}

    def _tools_call(self, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if name != FETCH_TOOL_NAME:
            raise _InvalidParams(f"unknown tool: {name}")
        if not isinstance(arguments, dict):
            raise _InvalidParams("arguments must be an object")
        fetched = answer_fetch(self.finder, arguments)
        return {"content": [{"type": "text", "text": fetched.text}], "isError": fetched.is_error}

    def serve(self, stdin: TextIO, stdout: TextIO) -> None:
        """Answer messages from `stdin` until it closes."""
        for line in stdin:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                _send(stdout, _error(None, PARSE_ERROR, f"parse error: {exc}"))
                continue
            batch = message if isinstance(message, list) else [message]
            replies = [r for r in (self.handle(m) for m in batch) if r is not None]
            if isinstance(message, list) and replies:
                _send(stdout, replies)
            for reply in ([] if isinstance(message, list) else replies):
                _send(stdout, reply)


class _InvalidParams(Exception):
    pass


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": request_id, "error": {"code": code, "message": message}}


def _send(stdout: TextIO, payload: Any) -> None:
    stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    stdout.flush()


def serve_stdio(sessions: Sequence[Path], version: str, stores: Sequence[Path] = ()) -> None:
    """Serve on stdin/stdout; `stores` are further folders of session directories to search."""
    roots = default_roots() + [(store, STORE_PATTERN) for store in stores]
    McpServer(ArtifactFinder(sessions, roots), version).serve(sys.stdin, sys.stdout)
