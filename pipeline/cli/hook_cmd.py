"""`worksurface hook`: answer Claude Code's and Codex's command hooks, and install them.

`worksurface hook claude-code` and `worksurface hook codex` read the hook's JSON on stdin and print the
reply (see worksurface.hooks.run). A hook must never stop the harness: every failure is one line on
stderr and exit status 1, which both clients report without blocking (status 2 would block a
PreCompact compaction in Claude Code).
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..core.errors import WorksurfaceError
from ..hooks.install import CLIENT_NAMES, DEFAULT_MAX_CHARS, SCOPES
from .app import app, choices, fail
from .output import echo

# A hook's own failures: reported, never blocking (2 blocks a compaction in Claude Code).
EXIT_HOOK_FAILED = 1
# `hook doctor` found an installed command a project could shadow.
EXIT_UNSAFE = 1

hook_app = typer.Typer(help="Claude Code and Codex hooks: rebuild the working surface after the harness's own "
                            "compaction (run by the harness), and install them.", no_args_is_help=True)
app.add_typer(hook_app, name="hook")

SESSIONS_HELP = ("Keep the hook's session directories under this folder (default: the Claude Code session's "
                 "own folder, or $CODEX_HOME/worksurface for Codex).")
MAX_CHARS_HELP = ("Characters of additionalContext the client passes to the model whole (Claude Code: 10000; "
                  "Codex: its handler's additionalContextLimit, 10000 by default).")


@hook_app.command("claude-code")
def claude_code_hook(sessions: Optional[Path] = typer.Option(None, "--sessions", help=SESSIONS_HELP),
                     max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", min=500,
                                                   help=MAX_CHARS_HELP)) -> None:
    """Claude Code's hook (SessionStart with matcher compact, PreCompact): reads its JSON on stdin."""
    _run("claude-code", sessions, max_chars)


@hook_app.command("codex")
def codex_hook(sessions: Optional[Path] = typer.Option(None, "--sessions", help=SESSIONS_HELP),
               max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", min=500, help=MAX_CHARS_HELP)) -> None:
    """Codex's hook (SessionStart with matcher compact, PreCompact): reads its JSON on stdin."""
    _run("codex", sessions, max_chars)


def _run(client: str, sessions: Path | None, max_chars: int) -> None:
    from ..hooks.payload import parse_input
    from ..hooks.run import CLIENTS, answer

    try:
        reply = answer(CLIENTS[client], parse_input(sys.stdin.read()), sessions=sessions, max_chars=max_chars)
    except (WorksurfaceError, OSError) as exc:
        raise fail(f"hook {client}: {exc}", EXIT_HOOK_FAILED) from None
    except Exception as exc:  # a bug must not stop the harness either: report it, exit non-blocking
        raise fail(f"hook {client}: internal error: {type(exc).__name__}: {exc}", EXIT_HOOK_FAILED) from None
    if reply is not None:
        typer.echo(json.dumps(reply, ensure_ascii=False))


if TYPE_CHECKING:     # members are listed at run time; to mypy, str Enums
    class HookClient(str, Enum): ...
    class Scope(str, Enum): ...
else:
    HookClient = choices("HookClient", CLIENT_NAMES)
    Scope = choices("Scope", SCOPES)


@hook_app.command("install")
def install(
    client: HookClient = typer.Argument(..., help="The harness whose settings get the hook entries."),
    scope: Scope = typer.Option("project", "--scope",
                                help="project: <project>/.claude/settings.json (Codex: <project>/.codex/hooks.json); "
                                     "local: <project>/.claude/settings.local.json (Claude Code only); "
                                     "user: ~/.claude/settings.json (Codex: $CODEX_HOME/hooks.json)."),
    project: Path = typer.Option(Path("."), "--project", help="The project folder for --scope project or local."),
) -> None:
    """Write the hook entries (SessionStart with matcher compact, PreCompact) into the client's settings:
    idempotent, and the settings file as it was is kept as <file>.worksurface.bak."""
    from ..hooks.doctor import diagnose
    from ..hooks.install import install_hooks

    try:
        result = install_hooks(client.value, scope.value, project.absolute())
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    for line in result.lines():
        echo(line)
    # An older install in another scope still runs a command a project could shadow: say so.
    for item in diagnose(project.absolute()):
        if item.problem is not None:
            echo(f"still unsafe: {item.line()} (see worksurface hook doctor)")


@hook_app.command("doctor")
def doctor(project: Path = typer.Option(Path("."), "--project",
                                        help="The project whose settings are checked beside the user's.")) -> None:
    """Say which worksurface hooks and MCP servers are installed where, and whether each command is safe
    to run in a project you did not write (exit 1 when one is not: `hook install` rewrites hooks)."""
    from ..hooks.doctor import diagnose
    from ..hooks.install import mcp_command

    found = diagnose(project.absolute())
    if not found:
        typer.echo("no worksurface hook or MCP server is installed for this project or this user")
    for item in found:
        echo(item.line())
    unsafe = [item for item in found if item.problem is not None]
    if unsafe:
        if any(" hook " in item.what for item in unsafe):
            typer.echo("rewrite the hooks: worksurface hook install <client> --scope <scope> (as listed above)")
        if any(" MCP server" in item.what for item in unsafe):
            echo(f"re-add the MCP server: claude mcp remove worksurface; claude mcp add worksurface -- "
                 f"{mcp_command()} (Codex: codex mcp add worksurface -- ...)")
        raise typer.Exit(EXIT_UNSAFE)


__all__ = ["hook_app"]
