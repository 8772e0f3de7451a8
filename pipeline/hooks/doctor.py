"""`worksurface hook doctor`: which worksurface hooks and MCP servers are installed where, and whether
each command is safe to run in a project the user did not write.

A client runs a hook (and starts an MCP server) in the project's folder. A command is safe when no
file of that folder can change what runs: the program is named by absolute path, and a Python that
runs worksurface as a module does so in isolated mode (`-I`); `python -m worksurface` would put the
folder first on sys.path, so a repository's `typer.py` would run in place of the library's.
"""

from __future__ import annotations

import json
import os
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..session import homes
from .install import CLIENT_NAMES, SCOPES, runs_worksurface, settings_path


@dataclass(frozen=True)
class Found:
    """One installed worksurface command: the file it is written in, what it is, the command, and
    why it is unsafe (None: safe)."""

    path: Path
    what: str
    command: str
    problem: str | None

    def line(self) -> str:
        verdict = "safe" if self.problem is None else f"UNSAFE: {self.problem}"
        return f"{self.path}: {self.what}: {self.command}: {verdict}"


def command_problem(command: str) -> str | None:
    """Why running `command` in a project's folder could run the project's code instead of
    worksurface (None: it cannot)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"not a command line ({exc})"
    if not words:
        return "an empty command"
    program = words[0]
    if not os.path.isabs(program):
        return f"{program!r} is not an absolute path: which program runs depends on PATH"
    if not Path(program).is_file():
        return f"{program} does not exist"
    if Path(program).name.startswith("python") and not _isolated(words[1:]):
        return ("Python without -I puts the working directory first on sys.path: a project's module of the "
                "same name as one worksurface imports would run instead")
    return None


def _isolated(args: list[str]) -> bool:
    """Whether Python's own options (before `-m`, `-c` or a script) include -I, read as Python reads
    them: `-W` and `-X` take the next word (or the rest of their cluster) as their value."""
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word in ("-", "--"):
            return False
        if word.startswith("--"):
            i += word == "--check-hash-based-pycs"
            continue
        for n, flag in enumerate(word[1:], 1):
            if flag in "cm":
                return False
            if flag == "I":
                return True
            if flag in "WX":
                i += n == len(word) - 1     # its value is the next word unless the cluster goes on
                break
    return False


def diagnose(project: Path) -> list[Found]:
    """Every worksurface hook and MCP server command in the clients' settings for `project` and the
    user, with its verdict."""
    return [*_hooks(project), *_mcp_servers(project)]


def _hooks(project: Path) -> Iterator[Found]:
    for client in CLIENT_NAMES:
        for scope in SCOPES:
            if client == "codex" and scope == "local":
                continue
            path = settings_path(client, scope, project)
            hooks = _json(path).get("hooks")
            for event, groups in hooks.items() if isinstance(hooks, dict) else ():
                for group in groups if isinstance(groups, list) else ():
                    handlers = group.get("hooks") if isinstance(group, dict) else None
                    for handler in handlers if isinstance(handlers, list) else ():
                        command = handler.get("command") if isinstance(handler, dict) else None
                        if isinstance(command, str) and runs_worksurface(command, ["hook", client]):
                            yield Found(path, f"{client} hook {event} (scope {scope})", command,
                                        command_problem(command))


def _mcp_servers(project: Path) -> Iterator[Found]:
    claude_json = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home()) / ".claude.json"
    user = _json(claude_json)
    tables: list[tuple[Path, str, Any]] = [(project / ".mcp.json", "claude-code MCP server (scope project)",
                                            _json(project / ".mcp.json").get("mcpServers")),
                                           (claude_json, "claude-code MCP server (scope user)", user.get("mcpServers"))]
    projects = user.get("projects")
    for folder, settings in projects.items() if isinstance(projects, dict) else ():
        if isinstance(settings, dict):
            tables.append((claude_json, f"claude-code MCP server (scope local, {folder})", settings.get("mcpServers")))
    codex = homes.codex_home() / "config.toml"
    tables.append((codex, "codex MCP server", _toml(codex).get("mcp_servers")))
    for path, what, servers in tables:
        for name, server in servers.items() if isinstance(servers, dict) else ():
            command = _server_command(server)
            if command is not None and runs_worksurface(command, ["mcp"]):
                yield Found(path, f"{what} {name!r}", command, command_problem(command))


def _server_command(server: Any) -> str | None:
    """An MCP server entry's command and arguments as one command line (None: not a stdio command)."""
    if not isinstance(server, dict) or not isinstance(server.get("command"), str):
        return None
    args = server.get("args") or []
    return shlex.join([server["command"], *(str(a) for a in args)]) if isinstance(args, list) else None


def _json(path: Path) -> dict[str, Any]:
    # A settings file that is missing or unreadable holds no install to report (hook install names
    # the problem when it is asked to write there).
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


__all__ = ["Found", "command_problem", "diagnose"]
