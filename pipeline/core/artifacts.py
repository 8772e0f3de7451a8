"""Fetching back what a stage replaced: how a marker tells the model to get an artifact, and a tool a
harness can expose so that fetching always works, even for a memory-only session with no files.

Every replaced content is stored in the session (content-addressed); a directory session also writes
it to a file the model can open. A memory-only session has no file, so its markers name the tool.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, NamedTuple, Protocol

from .errors import ArtifactNotFoundError, WorksurfaceError

FETCH_TOOL_NAME = "fetch_artifact"
FETCH_TOOL_DESCRIPTION = ("Fetch the full original content that the context manager replaced with a marker "
                          "(a large tool result, a cleared old result, a reduced log). Give the artifact id the "
                          "marker names; optionally a 1-based line range.")
# A fetch returns at most this many characters (a model that needs more asks for a line range).
MAX_FETCH_CHARS = 100_000
# What an artifact id looks like (hex of the content's digest, see session/store.py): anything else is
# refused before any lookup, so an id can never be a path.
ARTIFACT_ID_RE = re.compile(r"[0-9a-f]{8,64}")
ToolStyle = Literal["anthropic", "openai", "mcp"]


class ArtifactSource(Protocol):
    def artifact(self, artifact_id: str) -> str: ...


def how_to_fetch(artifact_id: str, path: str | None) -> str:
    """The clause a marker uses to say where the original is."""
    if path:
        return f"open {path} to read it (or call {FETCH_TOOL_NAME} with id {artifact_id})"
    return f"call the {FETCH_TOOL_NAME} tool with id {artifact_id} to read it"


def fetch_tool(style: ToolStyle = "anthropic") -> dict[str, Any]:
    """The tool definition to add to the model's tools, in the provider's shape (or an MCP server's)."""
    schema = fetch_schema()
    if style == "openai":
        return {"type": "function", "function": {"name": FETCH_TOOL_NAME, "description": FETCH_TOOL_DESCRIPTION,
                                                 "parameters": schema}}
    if style == "mcp":
        return {"name": FETCH_TOOL_NAME, "description": FETCH_TOOL_DESCRIPTION, "inputSchema": schema,
                "annotations": {"readOnlyHint": True}}
    return {"name": FETCH_TOOL_NAME, "description": FETCH_TOOL_DESCRIPTION, "input_schema": schema}


def fetch_schema() -> dict[str, Any]:
    """The JSON schema of the tool's arguments."""
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The artifact id from the marker."},
            "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return (inclusive)."},
        },
        "required": ["id"],
        "additionalProperties": False,
    }


class Fetched(NamedTuple):
    """A `fetch_artifact` answer: the text for the model, and whether it is an error."""

    text: str
    is_error: bool


def fetch(session: ArtifactSource, arguments: Any) -> str:
    """Answer a `fetch_artifact` call: the content (or the asked line range), or a one-line error the
    model can act on (starting `error:`). Never raises, whatever the model sent: the answer goes back
    as a tool result."""
    return answer_fetch(session, arguments).text


def answer_fetch(session: ArtifactSource, arguments: Any) -> Fetched:
    """`fetch`, saying whether the answer is an error (for protocols that flag it, as MCP does). No
    arguments, a list, a line number that is text, a float, infinity, NaN or a store that cannot be
    read each give an error answer, never an exception."""
    if not isinstance(arguments, dict):
        return Fetched(f"error: {FETCH_TOOL_NAME} takes an object with 'id' (and optional 'start_line', "
                       "'end_line')", True)
    artifact_id = arguments.get("id")
    if not isinstance(artifact_id, str) or not artifact_id:
        return Fetched(f"error: {FETCH_TOOL_NAME} needs an 'id' (the artifact id the marker names)", True)
    first, problem = _line_number(arguments, "start_line")
    last, problem = (None, problem) if problem else _line_number(arguments, "end_line")
    if problem:
        return Fetched(problem, True)
    try:
        content = session.artifact(artifact_id)
    except ArtifactNotFoundError:
        return Fetched(f"error: no artifact {artifact_id[:200]!r} in this session", True)
    except (WorksurfaceError, OSError, ValueError) as exc:  # a damaged or vanished store: say so, as a result
        return Fetched(f"error: artifact {artifact_id[:200]!r} cannot be read: {exc}", True)
    if first is not None or last is not None:
        lines = content.splitlines()
        first = first if first is not None else 1
        last = last if last is not None else len(lines)
        if first < 1 or last < first:
            return Fetched(f"error: bad line range {first}-{last} (the artifact has {len(lines)} lines)", True)
        content = "\n".join(lines[first - 1:last])
    if len(content) > MAX_FETCH_CHARS:
        total = content.count("\n") + 1
        content = (content[:MAX_FETCH_CHARS] + f"\n[... cut at {MAX_FETCH_CHARS} characters of {len(content)}; "
                   f"ask for a line range (the artifact has {total} lines)]")
    return Fetched(content, False)


def _line_number(arguments: dict[str, Any], key: str) -> tuple[int | None, str | None]:
    """(the line number given under `key`, None) or (None, an error answer). A whole number, or text or
    a float that is one ("12", 12.0); nothing else."""
    value = arguments.get(key)
    if value is None:
        return None, None
    if isinstance(value, bool):
        value = None
    elif isinstance(value, float):
        value = int(value) if math.isfinite(value) and value.is_integer() else None
    elif isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isascii() and text.lstrip("+-").isdigit() and len(text) <= 18 else None
    if isinstance(value, int) and abs(value) < 10**18:
        return value, None
    shown = repr(arguments.get(key))
    return None, f"error: {key} must be a whole number of 1 or more, not {shown[:60]}"
