"""`worksurface mcp` on the official `mcp` SDK (issue 54): the SDK's own stdio client lists and calls
fetch_artifact and lists and reads the artifacts as resources; and, as a hostile client (issue 50),
raw bytes on the server's stdin: invalid or too deeply nested JSON is a parse error (-32700), ids that
are not strings or integers are refused (-32600), NaN and Infinity are never echoed, and the server
answers the next request after every one of them."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import anyio
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core.artifacts import FETCH_TOOL_NAME, fetch_tool

mcp = pytest.importorskip("mcp")
import mcp_types as types  # noqa: E402  (after the skip: the SDK's own types package)
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from worksurface.hooks.mcp import ScreenedInput, URI_PREFIX, URI_TEMPLATE, rejection  # noqa: E402

runner = CliRunner()
BIG = "\n".join(f"line {i}: ERROR worker {i % 7} lost its lease" for i in range(2000))
TIMEOUT = 60
PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose default places (Claude Code, Codex, the gateway's store) are empty folders."""
    return {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}


def compact_chat(folder: Path, content: str = BIG) -> tuple[Path, str]:
    """A compacted output in `folder` whose marker names an artifact kept beside it; (output, artifact id)."""
    chat = [{"role": "user", "content": "Why did the workers fail?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat log"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": content},
            {"role": "assistant", "content": "They lost their leases."}]
    source = folder / "chat.json"
    source.write_text(json.dumps(chat), encoding="utf-8")
    out = folder / "out.json"
    res = runner.invoke(app, ["compact", str(source), "-o", str(out)])
    assert res.exit_code == 0, res.output
    ids = set(re.findall(r"artifact ([0-9a-f]{16})", out.read_text(encoding="utf-8")))
    assert len(ids) == 1
    return out, ids.pop()


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, str]:
    return compact_chat(tmp_path)


def with_client(tmp_path: Path, cwd: Path, args: list[str], check: Callable[[ClientSession], Awaitable[None]]) -> None:
    """Start `python -m worksurface mcp ARGS` through the SDK's stdio client and run `check` on its session."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "worksurface", "mcp", *args], cwd=cwd,
                                   env=isolated_env(tmp_path))

    async def main() -> None:
        with anyio.fail_after(TIMEOUT):
            with open(tmp_path / "server-stderr.txt", "w", encoding="utf-8") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as session:
                        await check(session)

    anyio.run(main)


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


def test_the_sdk_client_lists_and_calls_fetch_artifact_and_reads_the_artifacts_as_resources(
        tmp_path: Path, compacted: tuple[Path, str]) -> None:
    out, artifact_id = compacted

    async def check(session: ClientSession) -> None:
        init = await session.initialize()
        assert init.server_info.name == "worksurface" and FETCH_TOOL_NAME in (init.instructions or "")
        assert init.capabilities.tools is not None and init.capabilities.resources is not None
        await session.send_ping()

        tools = (await session.list_tools()).tools
        assert [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools] == [fetch_tool("mcp")]
        called = await session.call_tool(FETCH_TOOL_NAME, {"id": artifact_id})
        assert called.is_error is False and text_of(called) == BIG
        part = await session.call_tool(FETCH_TOOL_NAME, {"id": artifact_id, "start_line": 3, "end_line": 4})
        assert text_of(part) == "\n".join(BIG.splitlines()[2:4])
        # Line numbers as text, as some models send them: the same semantics as every other surface.
        assert text_of(await session.call_tool(FETCH_TOOL_NAME, {"id": artifact_id, "start_line": "2",
                                                                  "end_line": 2})) == BIG.splitlines()[1]
        for arguments, says in (({"id": "0" * 16}, "no artifact"), ({"id": "../../etc/passwd"}, "no artifact"),
                                ({}, "needs an 'id'"), ({"id": artifact_id, "start_line": 5, "end_line": 2},
                                                        "bad line range")):
            wrong = await session.call_tool(FETCH_TOOL_NAME, arguments)
            assert wrong.is_error is True and says in text_of(wrong), (arguments, text_of(wrong))
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("rm_rf", {})
        assert unknown.value.code == types.INVALID_PARAMS

        listed = await session.list_resources()
        assert [(r.uri, r.mime_type) for r in listed.resources] == [(URI_PREFIX + artifact_id, "text/plain")]
        assert listed.next_cursor is None
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [URI_TEMPLATE]
        read = await session.read_resource(URI_PREFIX + artifact_id)
        assert [(c.uri, getattr(c, "text", None)) for c in read.contents] == [(URI_PREFIX + artifact_id, BIG)]
        for uri in (URI_PREFIX + "0" * 16, URI_PREFIX + "../../etc/passwd", "file:///etc/passwd"):
            with pytest.raises(MCPError) as missing:
                await session.read_resource(uri)
            assert missing.value.code == types.INVALID_PARAMS, uri

    with_client(tmp_path, tmp_path, [], check)  # the default lookup: sessions kept beside files in the cwd


def test_session_option_limits_the_lookup(tmp_path: Path, compacted: tuple[Path, str]) -> None:
    out, artifact_id = compacted
    other_folder = tmp_path / "other"
    other_folder.mkdir()
    _, other_id = compact_chat(other_folder, BIG.replace("ERROR", "WARN"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def check(session: ClientSession) -> None:
        await session.initialize()
        assert text_of(await session.call_tool(FETCH_TOOL_NAME, {"id": artifact_id})) == BIG
        outside = await session.call_tool(FETCH_TOOL_NAME, {"id": other_id})
        assert outside.is_error is True and "no artifact" in text_of(outside)
        assert [r.uri for r in (await session.list_resources()).resources] == [URI_PREFIX + artifact_id]

    with_client(tmp_path, elsewhere, ["--session", str(out)], check)  # the compacted file names its session
    bad = runner.invoke(app, ["mcp", "--session", str(tmp_path / "nothing.json")])
    assert bad.exit_code == 2 and "no session is kept for it" in bad.stderr


def test_without_the_sdk_the_command_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an environment without the package finds
    res = runner.invoke(app, ["mcp"])
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "pip install 'worksurface[mcp]'" in lines[0]


def test_resources_are_listed_a_page_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from worksurface.hooks import mcp as server_module

    monkeypatch.setattr(server_module, "PAGE_SIZE", 2)
    session_dir = tmp_path / "s"
    (session_dir / "artifacts").mkdir(parents=True)
    ids = sorted(f"{n:016x}" for n in range(5))
    for artifact_id in ids:
        (session_dir / "artifacts" / f"{artifact_id}.txt").write_text("x", encoding="utf-8")
    (session_dir / "artifacts" / "notes.txt").write_text("not an artifact", encoding="utf-8")
    server = server_module.build_server(server_module.ArtifactFinder([session_dir]))

    async def pages() -> list[list[str]]:
        handler = server.get_request_handler("resources/list")
        assert handler is not None
        got, cursor = [], None
        while True:
            result = await handler.handler(None, types.PaginatedRequestParams(cursor=cursor))
            got.append([r.uri.removeprefix(URI_PREFIX) for r in result.resources])
            if (cursor := result.next_cursor) is None:
                return got
    assert anyio.run(pages) == [ids[0:2], ids[2:4], ids[4:5]]


# --- a hostile client: raw bytes on stdin ------------------------------------------------------------

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
DEEP = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"
ATTACKS: list[tuple[bytes, int]] = [
    (b"{not json", PARSE_ERROR),
    (b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR),
    (DEEP, PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":Infinity,"method":"ping"}', PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":-Infinity,"method":"tools/list"}', PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fetch_artifact","arguments":{"id":NaN}}}',
     PARSE_ERROR),
    (b"\xff\xfe\x00 not utf-8", PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":1} trailing', PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', INVALID_REQUEST),
    (b'[{"jsonrpc":"2.0","id":2,"method":"ping"}]', INVALID_REQUEST),
    (b'"just a string"', INVALID_REQUEST),
    (b"42", INVALID_REQUEST),
    (b'{"jsonrpc":"1.0","id":3,"method":"ping"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":4,"method":17}', INVALID_REQUEST),
]


class RawServer:
    """`python -m worksurface mcp` spoken to in raw bytes, one line at a time, stdin kept open."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "worksurface", "mcp"], cwd=cwd,
                                        env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.pings = 1000

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def receive(self) -> bytes:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the server closed stdout: {self.process.stderr.read() if self.process.stderr else b''!r}"
        return line

    def answers_until_ping(self) -> list[bytes]:
        """Send a ping; every line written before its answer (the answers to what was sent before it)."""
        self.pings += 1
        self.send(json.dumps({"jsonrpc": "2.0", "id": self.pings, "method": "ping"}).encode())
        lines = []
        while True:
            line = self.receive()
            if json.loads(line).get("id") == self.pings:
                return lines
            lines.append(line)

    def close(self) -> tuple[int, bytes]:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=TIMEOUT)
        return code, self.process.stderr.read()


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    folder = tmp_path_factory.mktemp("raw")
    server = RawServer(folder, isolated_env(folder))
    server.send(json.dumps(INIT).encode())
    assert json.loads(server.receive())["result"]["serverInfo"]["name"] == "worksurface"
    server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield server
    code, stderr = server.close()
    assert code == 0 and b"Traceback" not in stderr, stderr.decode(errors="replace")[-2000:]


def strict_json(line: bytes) -> Any:
    """`line` parsed as JSON that holds no NaN or Infinity (what a spec-following client reads)."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"the server wrote {constant}, which is not JSON: {line[:200]!r}")
    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("attack, code", ATTACKS, ids=[f"{a[:30]!r}" for a, _ in ATTACKS])
def test_each_malformed_line_gets_the_spec_error_and_the_server_goes_on(raw_server: RawServer, attack: bytes,
                                                                       code: int) -> None:
    raw_server.send(attack)
    answers = [strict_json(line) for line in raw_server.answers_until_ping()]
    assert len(answers) == 1, answers
    assert set(answers[0]) == {"jsonrpc", "id", "error"} and answers[0]["id"] is None
    assert answers[0]["error"]["code"] == code


def test_a_well_formed_request_after_the_attacks_is_still_answered_with_its_own_id(raw_server: RawServer) -> None:
    for request_id in ("a string id", 2**80):  # any string, any integer (however large) is an id
        raw_server.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}).encode())
        answer = strict_json(raw_server.receive())
        assert answer["id"] == request_id and answer["result"]["tools"][0]["name"] == FETCH_TOOL_NAME
    raw_server.send(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch_artifact","arguments":[1]}}')
    assert strict_json(raw_server.receive())["error"]["code"] == -32602  # arguments must be an object
    raw_server.send(b'{"jsonrpc":"2.0","id":8,"method":"no/such/method"}')
    assert strict_json(raw_server.receive())["error"]["code"] == -32601


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300).filter(lambda b: b"\n" not in b and b"\r" not in b))
def test_any_bytes_on_a_line_never_kill_the_server_nor_get_non_json_back(raw_server: RawServer, line: bytes) -> None:
    raw_server.send(line)
    for answer in raw_server.answers_until_ping():
        parsed = strict_json(answer)
        assert parsed["jsonrpc"] == "2.0" and ("error" in parsed or "result" in parsed)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=4), max_leaves=20)


@given(JSON_VALUES)
def test_an_id_that_is_not_a_string_or_an_integer_is_an_invalid_request(request_id: Any) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    answer = rejection(line)
    valid_id = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    if valid_id:
        assert answer is None
    else:
        assert answer is not None and answer.id is None and answer.error.code == INVALID_REQUEST


@given(st.text(max_size=200))
def test_every_answered_line_is_answered_with_id_null_and_a_spec_code(line: str) -> None:
    answer = rejection(line)
    if answer is not None:
        assert answer.id is None and answer.error.code in (PARSE_ERROR, INVALID_REQUEST)
        strict_json(answer.model_dump_json(by_alias=True, exclude_unset=True).encode())
    else:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # the SDK takes what passes


def test_screened_input_passes_messages_on_and_answers_the_rest() -> None:
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    answered: list[types.JSONRPCError] = []

    async def read() -> list[str]:
        screened = ScreenedInput(io.BytesIO(b"{bad\n\n   \n" + ping + b"[]\n" + ping))

        async def answer(error: types.JSONRPCError) -> None:
            answered.append(error)

        screened.answer_with(answer)
        return [line async for line in screened]

    assert anyio.run(read) == [ping.decode(), ping.decode()]
    assert [a.error.code for a in answered] == [PARSE_ERROR, INVALID_REQUEST]


def test_the_finder_looks_in_each_default_place_and_refuses_ids_that_are_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from worksurface.core.errors import ArtifactNotFoundError
    from worksurface.hooks.mcp import STORE_PATTERN, ArtifactFinder, default_roots
    from worksurface.session.store import ARTIFACT_ID_CHARS, content_digest

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.chdir(tmp_path)  # files compacted here keep <file>.worksurface beside them
    places = {
        "claude": tmp_path / "home" / ".claude" / "projects" / "-work-app" / "sid" / "worksurface",
        "codex": tmp_path / "codex" / "worksurface" / "codex-session",
        "gateway": tmp_path / "gateway" / "conversation-1",
        "beside": tmp_path / "out.json.worksurface",
    }
    ids = {}
    for place, home in places.items():
        content = f"what the {place} session kept"
        ids[place] = content_digest(content)[:ARTIFACT_ID_CHARS]
        (home / "artifacts").mkdir(parents=True)
        (home / "artifacts" / f"{ids[place]}.txt").write_text(content, encoding="utf-8")
    finder = ArtifactFinder(roots=default_roots() + [(tmp_path / "gateway", STORE_PATTERN)])
    for place, artifact_id in ids.items():
        assert finder.artifact(artifact_id) == f"what the {place} session kept"
    assert finder.artifact_ids() == sorted(ids.values())
    for bad in ("4" * 16, "../../etc/passwd", "*", ""):
        with pytest.raises(ArtifactNotFoundError):
            finder.artifact(bad)


def test_a_client_that_closes_stdin_right_after_its_requests_still_gets_every_answer(tmp_path: Path) -> None:
    """`printf ... | worksurface mcp`: the end of input waits for the answers still being worked out."""
    requests = [json.dumps(INIT).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    requests += [json.dumps({"jsonrpc": "2.0", "id": n, "method": method}).encode()
                 for n, method in enumerate(["tools/list", "resources/list", "resources/templates/list", "ping"], 1)]
    requests.insert(3, b"{not json")
    done = subprocess.run([sys.executable, "-m", "worksurface", "mcp"], cwd=tmp_path,
                          env={**os.environ, **isolated_env(tmp_path)}, input=b"\n".join(requests) + b"\n",
                          capture_output=True, timeout=TIMEOUT)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    answered = [strict_json(line) for line in done.stdout.splitlines()]
    assert sorted((a["id"] is None, a["id"] or 0) for a in answered) == [(False, n) for n in range(5)] + [(True, 0)]
