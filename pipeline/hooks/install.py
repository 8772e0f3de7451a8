"""Writing worksurface's hook entries into Claude Code's settings or Codex's hooks.json.

Both files have the same shape: `{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type":
"command", "command": "..."}]}]}}`. Installing is idempotent: worksurface's own handlers (recognised
by their command, which runs `worksurface hook <client>`) are removed wherever they are and written
once in a group of their own, so a second run changes nothing and writes nothing, and an older
install (a shadowable `python -m worksurface`) is rewritten. The written command cannot be shadowed by
the project the client runs it in: this Python by absolute path in isolated mode (`-I`: no working
directory or script folder on sys.path, no user site, no PYTHON* variables), or, where worksurface is
not importable that way (a user-site install), the console script by absolute path. Everything else in
the file stays as it was; before a change the file is copied to `<file>.worksurface.bak`, and the new
file keeps the old one's permissions (a new one is private: settings can hold keys).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.config import Config
from ..core.errors import FormatError, HookError
from ..core.fileio import PRIVATE_FILE_MODE, atomic_write, read_text
from ..session import homes
from .payload import PRE_COMPACT, SESSION_START

CLIENT_NAMES = ("claude-code", "codex")
SCOPES = ("project", "local", "user")
BACKUP_SUFFIX = ".worksurface.bak"
# Seconds a client waits for the hook (it reads the transcript and folds what is new: a few seconds
# on a long session, most of it Python's start).
HOOK_TIMEOUT_SECONDS = 120
# What Claude Code passes to the model whole (its cap; a longer context becomes a 2 KB preview).
DEFAULT_MAX_CHARS = 10_000
# Codex cuts a hook's additionalContext past its handler's `additionalContextLimit` (10,000 characters
# by default): the handler raises it to what the full surface takes, at this many characters a token.
CHARS_PER_TOKEN_LIMIT = 5
# (event, matcher): SessionStart right after a compaction, and PreCompact (any trigger) to fold the
# ledger before it and note the boundaries the transcript holds.
ENTRIES: tuple[tuple[str, str | None], ...] = ((SESSION_START, "compact"), (PRE_COMPACT, None))


@dataclass
class Installed:
    """What `install_hooks` did: the settings file, whether it changed, its backup, what to do next."""

    path: Path
    changed: bool
    backup: Path | None = None
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.changed:
            kept = f" (the previous file is kept as {self.backup})" if self.backup else ""
            head = f"wrote the worksurface hooks into {self.path}{kept}"
        else:
            head = f"{self.path}: the worksurface hooks are already installed; nothing changed"
        return [head, *self.notes]


def hook_command(client: str, max_chars: int | None = None) -> str:
    """The command a client runs: this Python's worksurface, whatever PATH and working directory the
    client has (see `worksurface_argv`)."""
    limit = ["--max-chars", str(max_chars)] if max_chars is not None else []
    return shlex.join([*worksurface_argv(), "hook", client, *limit])


def mcp_command() -> str:
    """The MCP server's command line, for `claude mcp add worksurface -- ...` (see `worksurface_argv`)."""
    return shlex.join([*worksurface_argv(), "mcp"])


def worksurface_argv() -> list[str]:
    """How an installed command starts this worksurface so no project can shadow it: `python -I -m
    worksurface` by absolute path, or the console script by absolute path where isolated mode does not
    find this same package (installed in the user site); HookError when neither is there."""
    if _isolated_import_finds_this_package(sys.executable):
        return [sys.executable, "-I", "-m", "worksurface"]
    script = Path(sysconfig.get_path("scripts")) / "worksurface"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    raise HookError(f"{sys.executable} -I cannot import worksurface and there is no console script at {script}: "
                    "install worksurface into this Python's environment (not the user site)")


@lru_cache(maxsize=4)
def _isolated_import_finds_this_package(python: str) -> bool:
    # Asked once per process: a user-site or PYTHONPATH install is invisible under -I (and one that
    # resolved elsewhere would run other code than the one that wrote the command).
    from .. import __file__ as ours

    try:
        done = subprocess.run([python, "-I", "-c", "import worksurface; print(worksurface.__file__)"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == ours


def settings_path(client: str, scope: str, project: Path) -> Path:
    if client == "claude-code":
        if scope == "user":
            return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "settings.json"
        return project / ".claude" / ("settings.local.json" if scope == "local" else "settings.json")
    if client == "codex":
        if scope == "local":
            raise HookError("Codex has no local settings scope: use --scope project or --scope user")
        return homes.codex_home() / "hooks.json" if scope == "user" else project / ".codex" / "hooks.json"
    raise HookError(f"unknown hook client {client!r} (known: {', '.join(CLIENT_NAMES)})")


def install_hooks(client: str, scope: str, project: Path) -> Installed:
    """Write (or confirm) the hook entries for `client` in the settings file of `scope`."""
    path = settings_path(client, scope, project)
    existing = path.exists()
    settings = _load(path) if existing else {}
    before = json.dumps(settings, sort_keys=True)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise HookError(f"{path}: 'hooks' is {type(hooks).__name__}, not an object; nothing changed")
    handler = _handler(client, project)
    for event, matcher in ENTRIES:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise HookError(f"{path}: hooks.{event} is {type(groups).__name__}, not a list; nothing changed")
        hooks[event] = _without_ours(groups, client) + [_group(matcher, handler)]
    notes = _notes(client)
    if json.dumps(settings, sort_keys=True) == before:
        return Installed(path, False, notes=notes)
    backup = None
    mode = PRIVATE_FILE_MODE
    if existing:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        shutil.copy2(path, backup)
        mode = stat.S_IMODE(path.stat().st_mode)
    atomic_write(path, json.dumps(settings, indent=2, ensure_ascii=False) + "\n", mode)
    return Installed(path, True, backup, notes)


def _load(path: Path) -> dict[str, Any]:
    try:
        text = read_text(path, "settings file")
    except FormatError as exc:
        raise HookError(f"{exc}; nothing changed") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); nothing changed") from None
    if not isinstance(data, dict):
        raise HookError(f"{path}: settings must be a JSON object, not {type(data).__name__}; nothing changed")
    return data


def _is_ours(handler: Any, client: str) -> bool:
    """A handler whose command runs `worksurface hook <client>` (whatever the Python, the options, or
    the console script's folder)."""
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and runs_worksurface(command, ["hook", client])


def runs_worksurface(command: str, subcommand: list[str]) -> bool:
    """Whether a command line runs `worksurface <subcommand...>`: `python [-I] -m worksurface`, the
    console script by any path, or `python -m worksurface.cli`."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    names = [Path(w).name if i == 0 or words[i - 1] != "-m" else w for i, w in enumerate(words)]
    n = len(subcommand)
    return any(names[i] in WORKSURFACE_NAMES and names[i + 1:i + 1 + n] == subcommand for i in range(len(names)))


# How a command line names worksurface: the console script, or the module after `-m`.
WORKSURFACE_NAMES = ("worksurface", "worksurface.cli")


def _without_ours(groups: list[Any], client: str) -> list[Any]:
    """The event's groups with worksurface's handlers for `client` removed (a group left empty by
    that goes too; everything else stays in its place)."""
    out = []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(_is_ours(h, client) for h in handlers):
            out.append(group)
            continue
        kept = [h for h in handlers if not _is_ours(h, client)]
        if kept:
            out.append({**group, "hooks": kept})
    return out


def _group(matcher: str | None, handler: dict[str, Any]) -> dict[str, Any]:
    return {**({"matcher": matcher} if matcher is not None else {}), "hooks": [handler]}


def _handler(client: str, project: Path) -> dict[str, Any]:
    if client != "codex":
        return {"type": "command", "command": hook_command(client), "timeout": HOOK_TIMEOUT_SECONDS}
    limit = Config.load(project if project.is_dir() else None).hook.surface_tokens * CHARS_PER_TOKEN_LIMIT
    return {"type": "command", "command": hook_command(client, limit), "timeout": HOOK_TIMEOUT_SECONDS,
            "statusMessage": "worksurface: rebuilding the working surface", "additionalContextLimit": limit}


def _notes(client: str) -> list[str]:
    if client == "codex":
        return ["Codex runs a new or changed hook only once it is trusted: open /hooks in Codex to review and "
                "trust it (automation that vets its hooks can pass --dangerously-bypass-hook-trust).",
                f"To let the model fetch replaced content back: codex mcp add worksurface -- {mcp_command()}"]
    return [f"To let the model fetch replaced content back: claude mcp add worksurface -- {mcp_command()}"]
