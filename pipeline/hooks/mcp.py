"""`worksurface mcp`: a stdio MCP server, built on the official `mcp` SDK (the `worksurface[mcp]` extra),
through which Claude Code or Codex reads back what worksurface replaced with a marker.

It offers the `fetch_artifact` tool (the definition every other surface offers, `core.artifacts`) and
the artifacts as resources `worksurface://artifact/<id>` (listed, read, and a template for any id). The
SDK speaks the protocol (initialize and version agreement, ping, method-not-found, params checked
against the request types); in front of its stdio transport, every input line that is not one JSON-RPC
message gets the specification's answer with id null instead of being dropped unanswered: invalid or
too deeply nested JSON (NaN and Infinity included, they are not JSON) is a parse error (-32700), and
valid JSON that is not a message (a batch, an id that is not a string or an integer) is an invalid
request (-32600). Logs go to stderr only.

An artifact is looked up by its id in the session directories given with `--session`, else in the
session directories worksurface keeps by default (`session.homes`): in Claude Code's session folders
under `~/.claude/projects`, in `$CODEX_HOME/worksurface`, beside files in the current folder, and in
any further roots the caller adds (the gateway's store). Each file is opened without following a
symbolic link below its root and checked against its id (`diskstore.read_artifact_file`): ids are
content digests, so the first file that holds the content its id names is the right one, and a
planted link or a changed file is refused, never served.
"""

from __future__ import annotations

import fnmatch
import io
import logging
import os
import stat
import sys
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Awaitable, BinaryIO, Callable, Iterator, Sequence

import anyio
import anyio.to_thread
import mcp_types as types
import pydantic
import pydantic_core
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.message import SessionMessage

from ..core.artifacts import ARTIFACT_ID_RE, FETCH_TOOL_NAME, answer_fetch, fetch_tool
from ..core.errors import ArtifactDamagedError, ArtifactNotFoundError, WorksurfaceError
from ..session import homes
from ..session.diskstore import read_artifact_file

log = logging.getLogger("worksurface.mcp")

INSTRUCTIONS = (f"worksurface replaces large or old tool results with a marker naming an artifact id "
                f"(`artifact 3f2a9c0d1e2b4a5c`). Call {FETCH_TOOL_NAME} with that id to read the original, "
                "or a line range of it.")
URI_PREFIX = "worksurface://artifact/"
URI_TEMPLATE = URI_PREFIX + "{id}"
MIME_TYPE = "text/plain"
# resources/list answers this many artifacts a page (the default places may hold thousands).
PAGE_SIZE = 200
# At the end of input, how long the server waits for the answers to requests still running.
DRAIN_SECONDS = 10.0
# Where an artifact file is below a root, one path component a level ("*": any real folder); the last
# component names the file ("{id}.txt").
Pattern = tuple[str, ...]
IN_SESSION: Pattern = (homes.ARTIFACTS_FOLDER, "{id}.txt")
CLAUDE_PATTERN: Pattern = ("*", "*", homes.FOLDER, *IN_SESSION)
# A store holding one session directory per id (the Codex hook's folder, the gateway's store).
STORE_PATTERN: Pattern = ("*", *IN_SESSION)
BESIDE_PATTERN: Pattern = (f"*{homes.SUFFIX}", *IN_SESSION)


class ArtifactFinder:
    """Finds an artifact's content by id: in the given session directories, else in the default places."""

    def __init__(self, sessions: Sequence[Path] = (), roots: Sequence[tuple[Path, Pattern]] | None = None) -> None:
        given = [(Path(session), IN_SESSION) for session in sessions]
        self.roots = given or (list(roots) if roots is not None else default_roots())

    def artifact(self, artifact_id: str) -> str:
        """The verified content of `artifact_id`; ArtifactNotFoundError when no place holds it, the first
        refusal (ArtifactDamagedError) when every file found for it was refused."""
        if not ARTIFACT_ID_RE.fullmatch(artifact_id):
            raise ArtifactNotFoundError(f"{artifact_id[:200]!r} is not an artifact id")
        refused: list[ArtifactDamagedError] = []
        for root, parts, _ in self._files(f"{artifact_id}.txt"):
            try:
                return read_artifact_file(root, parts, artifact_id)
            except ArtifactNotFoundError:
                continue  # removed since it was listed
            except ArtifactDamagedError as exc:
                log.warning("refused an artifact file: %s", exc)
                refused.append(exc)
        if refused:
            raise refused[0]
        raise ArtifactNotFoundError(f"no artifact {artifact_id!r} in the sessions searched")

    def artifact_ids(self) -> list[str]:
        """The ids of the artifact files in every place searched (regular files; a read checks each one)."""
        found = {parts[-1].removesuffix(".txt") for root, parts, regular in self._files("*.txt") if regular}
        return sorted(i for i in found if ARTIFACT_ID_RE.fullmatch(i))

    def _files(self, name: str) -> Iterator[tuple[Path, tuple[str, ...], bool]]:
        """(root, path components below it, whether it is a regular file) of each file named `name` (a
        glob) in the places searched."""
        for root, pattern in self.roots:
            if root.is_dir():
                yield from ((root, parts, regular) for parts, regular in _walk(root, (*pattern[:-1], name)))


def _walk(folder: Path, pattern: Sequence[str], done: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(the components below `folder` matching `pattern`, whether the last is a regular file), never going
    through a symbolic link: the last component is anything but a folder, and a link met where the rest
    of the pattern names each component is found too, so that reading it refuses it by name (a link met
    where a glob would list its folder is skipped). A glob component matches no hidden name, as in `glob`."""
    head, rest = pattern[0], pattern[1:]
    if _is_glob(head):
        try:
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries if fnmatch.fnmatchcase(e.name, head) and not e.name.startswith("."))
        except OSError:
            return
    else:
        names = [head]
    for name in names:
        try:
            mode = os.lstat(folder / name).st_mode
        except OSError:
            continue
        if rest and stat.S_ISDIR(mode):
            yield from _walk(folder / name, rest, (*done, name))
        elif not rest and not stat.S_ISDIR(mode):
            yield (*done, name), stat.S_ISREG(mode)
        elif rest and stat.S_ISLNK(mode) and not any(_is_glob(part) for part in rest):
            yield (*done, name, *rest), False


def _is_glob(part: str) -> bool:
    return any(c in part for c in "*?[")


def default_roots() -> list[tuple[Path, Pattern]]:
    """The places worksurface keeps session directories by default, and where their artifact files are."""
    claude = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "projects"
    return [(claude, CLAUDE_PATTERN), (homes.codex_home() / homes.FOLDER, STORE_PATTERN),
            (Path.cwd(), BESIDE_PATTERN)]


def build_server(finder: ArtifactFinder, version: str = "unknown") -> Server[Any]:
    """The MCP server: the fetch_artifact tool and the artifacts as resources, answered from `finder`
    (in a worker thread: reading a file must not hold up the protocol)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool.model_validate(fetch_tool("mcp"))])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != FETCH_TOOL_NAME:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool: {params.name[:200]}")
        fetched = await anyio.to_thread.run_sync(answer_fetch, finder, params.arguments or {})
        return types.CallToolResult(content=[types.TextContent(type="text", text=fetched.text)],
                                    is_error=fetched.is_error)

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        if cursor is not None and not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 12):
            raise MCPError(code=types.INVALID_PARAMS, message="unknown cursor: give the nextCursor of the last page")
        ids = await anyio.to_thread.run_sync(finder.artifact_ids)
        start = int(cursor) if cursor is not None else 0
        page = ids[start:start + PAGE_SIZE]
        following = start + PAGE_SIZE
        return types.ListResourcesResult(
            resources=[types.Resource(uri=URI_PREFIX + i, name=f"artifact {i}", mime_type=MIME_TYPE) for i in page],
            next_cursor=str(following) if following < len(ids) else None)

    async def list_templates(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=URI_TEMPLATE, name="artifact", mime_type=MIME_TYPE,
            description="The original content a worksurface marker names by its artifact id.")])

    async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        uri = params.uri
        artifact_id = uri.removeprefix(URI_PREFIX) if uri.startswith(URI_PREFIX) else ""
        try:
            if not ARTIFACT_ID_RE.fullmatch(artifact_id):
                raise ArtifactNotFoundError(f"not a worksurface artifact: {uri[:200]!r} (expected {URI_TEMPLATE})")
            content = await anyio.to_thread.run_sync(finder.artifact, artifact_id)
        except ArtifactNotFoundError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc.args[0]), data={"uri": uri[:200]}) from None
        except (WorksurfaceError, OSError) as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"artifact {artifact_id} cannot be read: {exc}",
                           data={"uri": uri}) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=MIME_TYPE,
                                                                             text=content)])

    return Server("worksurface", version=version, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


def rejection(line: str) -> types.JSONRPCError | None:
    """The answer an input line gets when it is not one JSON-RPC message (None: it is one, and goes to
    the SDK)."""
    return screen(line)[0]


def screen(line: str) -> tuple[types.JSONRPCError | None, Any]:
    """(the answer `line` gets when it is not one JSON-RPC message, else None; what it parsed to). Parsed
    as the SDK parses (pydantic's JSON parser, with its nesting limit), minus NaN and Infinity."""
    try:
        raw = pydantic_core.from_json(line, allow_inf_nan=False)
    except ValueError as exc:
        return _error(types.PARSE_ERROR, f"Parse error: not JSON ({exc})"), None
    if isinstance(raw, list):
        return _error(types.INVALID_REQUEST, "Invalid Request: batches are not accepted; send one message a line"), raw
    if not isinstance(raw, dict):
        return _error(types.INVALID_REQUEST, "Invalid Request: a message is a JSON object"), raw
    if "id" in raw and not _is_request_id(raw["id"]):
        return _error(types.INVALID_REQUEST, "Invalid Request: an id is a string or an integer"), raw
    try:
        types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except pydantic.ValidationError:
        return _error(types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, notification or "
                                             "response"), raw
    return None, raw


def _is_request_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _error(code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))


class Unanswered:
    """The requests passed on to the SDK whose answer is not written yet: at the end of input the server
    waits for them (a client may close stdin right after its last request, and the SDK drops what is
    still running when its input ends)."""

    def __init__(self) -> None:
        self._ids: set[tuple[type, str | int]] = set()
        self._none = anyio.Event()
        self._none.set()

    def asked(self, request_id: str | int) -> None:
        if not self._ids:
            self._none = anyio.Event()
        self._ids.add((type(request_id), request_id))

    def settled(self, request_id: str | int) -> None:
        """Answered, or cancelled by the client (the SDK answers no cancelled request)."""
        self._ids.discard((type(request_id), request_id))
        if not self._ids:
            self._none.set()

    async def wait(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._none.wait()


class AnswerCounter:
    """The SDK's write stream, marking each answer it carries as settled in `unanswered`."""

    def __init__(self, inner: WriteStream[SessionMessage], unanswered: Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        message = item.message
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None:
            self._unanswered.settled(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "AnswerCounter":
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None


class ScreenedInput(anyio.AsyncFile[str]):
    """Standard input as the SDK's stdio transport reads it (UTF-8, undecodable bytes replaced), minus
    the lines that are not a JSON-RPC message: each of those is answered through `answer_with`'s
    function and skipped. Blank lines are skipped unanswered. At the end of input it waits (up to
    DRAIN_SECONDS) until every request passed on is answered."""

    def __init__(self, source: BinaryIO, unanswered: Unanswered | None = None) -> None:
        self._text = io.TextIOWrapper(source, encoding="utf-8", errors="replace")
        super().__init__(self._text)
        self.unanswered = unanswered or Unanswered()
        self._answer: Callable[[types.JSONRPCError], Awaitable[None]] | None = None
        self._ready = anyio.Event()

    def answer_with(self, answer: Callable[[types.JSONRPCError], Awaitable[None]]) -> None:
        self._answer = answer
        self._ready.set()

    async def readline(self) -> str:
        while line := await super().readline():
            if not line.strip():
                continue
            refused, raw = screen(line)
            if refused is None:
                self._track(raw)
                return line
            log.warning("answered an input line that is not a JSON-RPC message: %s", refused.error.message)
            await self._ready.wait()
            if self._answer is not None:
                await self._answer(refused)
        await self.unanswered.wait(DRAIN_SECONDS)
        return ""

    def _track(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.unanswered.asked(message["id"])
        elif message.get("method") == "notifications/cancelled" and isinstance(message.get("params"), dict):
            cancelled = message["params"].get("requestId")
            if _is_request_id(cancelled):
                self.unanswered.settled(cancelled)

    def release(self) -> None:
        """Let go of the source without closing it (it is the process's stdin)."""
        with suppress(ValueError):
            self._text.detach()


async def serve(finder: ArtifactFinder, version: str, source: BinaryIO) -> None:
    """Serve MCP over the SDK's stdio transport, reading `source` through `ScreenedInput`."""
    server = build_server(finder, version)
    screened = ScreenedInput(source)
    try:
        async with stdio_server(stdin=screened) as (read_stream, write_stream):
            async def answer(error: types.JSONRPCError) -> None:
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the client is gone
                    await write_stream.send(SessionMessage(error))

            screened.answer_with(answer)
            await server.run(read_stream, AnswerCounter(write_stream, screened.unanswered),
                             server.create_initialization_options())
    finally:
        screened.release()


def serve_stdio(sessions: Sequence[Path], version: str, stores: Sequence[Path] = ()) -> None:
    """Serve on stdin/stdout; `stores` are further folders of session directories to search."""
    roots = default_roots() + [(store, STORE_PATTERN) for store in stores]
    anyio.run(serve, ArtifactFinder(sessions, roots), version, sys.stdin.buffer)
