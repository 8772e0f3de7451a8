"""The runtime and tool versions the session established: what a version query the agent ran through
the harness's own shell printed (`python3 --version` -> Python 3.11.4). The output is the world's
state, read as an observation (the tool and the version it reports), never as an instruction; an MCP
server's shell, a failed call, or a command that is not a lone version query establish nothing.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Sequence

from ..core.model import Message
from .calls import tool_calls
from .provenance import harness_tool
from .shell import simple_commands
from .text import one_line

# Flags that ask a program for its version and nothing else; `-v` only of the runtimes where it
# means that (elsewhere it is often "verbose").
VERSION_FLAGS = frozenset({"--version", "-V", "version"})
SHORT_V_PROGRAMS = frozenset({"node", "npm", "pnpm", "yarn", "bun", "deno", "ruby", "php", "perl", "java"})
# A version as programs print it: digits and dots, an optional suffix (3.11.4, v20.1.0, go1.22.3, 1.75.0-nightly).
# A prefix glued to it (`go1.22.3`, `v20.1.0`) is not part of it.
_VERSION_RE = re.compile(r"(?<![\d.])(\d+(?:\.\d+){1,3}(?:[-+][0-9A-Za-z.]+)?)(?!\d)")
MAX_LINE_CHARS = 120


@dataclass(frozen=True)
class RuntimeVersion:
    """A program and the version its own version query printed, with the line it printed."""

    tool: str
    version: str
    line: str
    message_id: str
    index: int


def runtime_versions(messages: Sequence[Message]) -> list[RuntimeVersion]:
    """The versions the version queries among `messages` printed, oldest first."""
    out = []
    for rec in tool_calls(messages):
        command = rec.command
        if not command or rec.result is None or rec.failed or not harness_tool(rec.call):
            continue
        parsed = simple_commands(command)
        if len(parsed) != 1 or len(parsed[0].words) != 2 or not _asks_version(parsed[0].words):
            continue  # one lone query: with several, which line answers which is a guess
        line = next((ln.strip() for ln in rec.output.splitlines() if ln.strip()), "")
        found = _VERSION_RE.search(line)
        if found is None:
            continue
        tool = posixpath.basename(parsed[0].program)
        out.append(RuntimeVersion(tool, found.group(1), one_line(line, MAX_LINE_CHARS),
                                  rec.result_message_id or rec.message_id, rec.index))
    return out


def _asks_version(words: tuple[str, ...]) -> bool:
    program, flag = posixpath.basename(words[0]), words[1]
    return flag in VERSION_FLAGS or (flag == "-v" and program in SHORT_V_PROGRAMS)
