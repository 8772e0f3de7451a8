"""Tool names across harnesses mapped to what the tool does (its kind) and what it targets.

Claude Code says `Read`, OpenAI-style agents `read_file`, SWE-agent `open`, OpenHands
`str_replace_editor view`: stages and fact extraction reason about kinds, not names.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from functools import lru_cache
from typing import Any, Mapping

from .model import ToolCall

# Stages ask about every call on every prepare; calls are hashable by content, so answer once.
CALL_CACHE_SIZE = 65_536

# Kinds: read, edit, write, shell, grep, glob, search, fetch, list, todo, plan, skill, memory, agent, ask
# (a question to the user), other.
_ALIASES: dict[str, str] = {
    # Claude Code
    "read": "read", "edit": "edit", "multiedit": "edit", "write": "write", "notebookedit": "edit",
    "notebookread": "read", "bash": "shell", "bashoutput": "shell", "killshell": "shell",
    "grep": "grep", "glob": "glob", "ls": "list", "websearch": "search", "webfetch": "fetch",
    "todowrite": "todo", "todoread": "todo", "exitplanmode": "plan", "enterplanmode": "plan",
    "skill": "skill", "task": "agent", "agent": "agent", "toolsearch": "search", "askuserquestion": "ask",
    # Claude Code's MCP browser tools (claude-in-chrome, Playwright MCP): the ones that read a page
    "navigate": "fetch", "read_page": "fetch", "get_page_text": "fetch", "browser_navigate": "fetch",
    "browser_snapshot": "fetch",
    # OpenAI-style / Codex / generic function-calling agents
    "read_file": "read", "view_file": "read", "open_file": "read", "cat": "read",
    "write_file": "write", "create_file": "write", "apply_patch": "edit", "edit_file": "edit",
    "replace_in_file": "edit", "str_replace": "edit", "shell": "shell", "run_command": "shell",
    "execute_command": "shell", "exec_command": "shell", "terminal": "shell", "run_terminal_cmd": "shell",
    "execute_bash": "shell", "run": "shell", "grep_search": "grep", "search_files": "grep",
    "codebase_search": "search", "file_search": "glob", "find_file": "glob", "list_dir": "list",
    "list_files": "list", "list_directory": "list", "web_search": "search", "fetch_url": "fetch",
    "browser": "fetch", "update_plan": "plan", "todo_write": "todo", "memory": "memory",
    "save_memory": "memory", "read_memory": "memory", "request_user_input": "ask", "ask_user": "ask",
    "ask_followup_question": "ask",
    # SWE-agent / mini-swe-agent
    "open": "read", "goto": "read", "scroll_up": "read", "scroll_down": "read", "create": "write",
    "search_dir": "grep", "search_file": "grep", "submit": "other",
    # OpenHands (str_replace_editor is resolved by its `command` argument below)
    "execute_ipython_cell": "shell", "think": "other", "finish": "other",
}

_EDITOR_COMMANDS = {"view": "read", "create": "write", "str_replace": "edit", "insert": "edit",
                    "undo_edit": "edit"}
_PATH_KEYS = ("file_path", "path", "filename", "file", "notebook_path", "target_file")
# The files an apply_patch patch (Codex) names: `*** Add File: p`, `*** Update File: p`, `*** Delete File: p`.
_PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_SHELL_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat"}
_SHELL_SEARCHERS = {"grep", "rg", "ag", "ack", "find", "fd", "git grep"}


def normalize_name(name: str) -> str:
    """Lower-case, and drop an MCP prefix (`mcp__server__tool` -> `tool`)."""
    n = name.strip().lower()
    if n.startswith("mcp__"):
        n = n.split("__")[-1]
    return n


@lru_cache(maxsize=CALL_CACHE_SIZE)
def tool_kind(call: ToolCall) -> str:
    n = normalize_name(call.name)
    if n in ("str_replace_editor", "file_editor", "text_editor", "str_replace_based_edit_tool"):
        return _EDITOR_COMMANDS.get(str(call.input.get("command", "")), "edit")
    kind = _ALIASES.get(n)
    if kind is not None:
        return kind
    if "memory" in n:
        return "memory"
    if "skill" in n:
        return "skill"
    return "other"


def shell_command(call: ToolCall) -> str | None:
    """The command line of a shell-like call, if it has one."""
    for key in ("command", "cmd", "code", "script"):
        value = call.input.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return " ".join(value)
    return None


# Where a shell call says it runs (Codex exec_command / shell: `workdir`), over the session's cwd.
_WORKDIR_KEYS = ("workdir", "cwd")


def call_cwd(call: ToolCall, cwd: str | None) -> str | None:
    """The directory a call runs in: its own `workdir` argument (joined onto `cwd` when relative),
    else `cwd`."""
    for key in _WORKDIR_KEYS:
        value = call.input.get(key)
        if isinstance(value, str) and value.strip():
            value = value.strip()
            if value.startswith("/") or cwd is None:
                return value
            return posixpath.normpath(posixpath.join(cwd, value))
    return cwd


@lru_cache(maxsize=CALL_CACHE_SIZE)
def call_target(call: ToolCall) -> str:
    """A short human-readable target: the path, pattern, URL or command the call is about."""
    inp: Mapping[str, Any] = call.input
    for key in _PATH_KEYS:
        if isinstance(inp.get(key), str):
            return inp[key]
    patched = _patch_paths(call)
    if patched:
        return _one_line(", ".join(patched))
    for key in ("pattern", "query", "url", "description", "skill", "prompt"):
        if isinstance(inp.get(key), str):
            return _one_line(inp[key])
    cmd = shell_command(call)
    if cmd:
        return _one_line(cmd)
    return ""


@lru_cache(maxsize=CALL_CACHE_SIZE)
def call_path(call: ToolCall) -> str | None:
    """The file a read/edit/write call is about (including `cat FILE` style shell reads)."""
    for key in _PATH_KEYS:
        if isinstance(call.input.get(key), str):
            return call.input[key]
    patched = _patch_paths(call)
    if len(patched) == 1:
        return patched[0]
    cmd = shell_command(call)
    if cmd and tool_kind(call) in ("shell", "read"):
        try:
            words = shlex.split(cmd)
        except ValueError:
            return None
        if len(words) == 2 and words[0] in _SHELL_READERS | {"open"}:
            return words[1]
    return None


@lru_cache(maxsize=CALL_CACHE_SIZE)
def effective_kind(call: ToolCall) -> str:
    """Like `tool_kind`, but a shell call that only reads or searches counts as read or grep."""
    kind = tool_kind(call)
    if kind != "shell":
        return kind
    cmd = shell_command(call) or ""
    first = cmd.strip().split(" ", 1)[0] if cmd.strip() else ""
    if first in _SHELL_READERS:
        return "read"
    if first in _SHELL_SEARCHERS or cmd.startswith("git grep"):
        return "grep"
    if first in ("ls", "tree"):
        return "list"
    return "shell"


def _patch_paths(call: ToolCall) -> list[str]:
    """The files an apply_patch call's patch names, in order, each once (none for other tools)."""
    if normalize_name(call.name) != "apply_patch":
        return []
    patch = next((v for v in call.input.values() if isinstance(v, str) and "*** " in v), "")
    return list(dict.fromkeys(p.strip() for p in _PATCH_FILE_RE.findall(patch)))


def _one_line(text: str, limit: int = 120) -> str:
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"
