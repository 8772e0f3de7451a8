"""Claude Code session files for tests, in the shape of the real records (user and assistant records
chained by parentUuid, meta records, tool results with `toolUseResult`, queue operations), read back
with the project's own adapter so the facts see exactly what a real session gives them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from worksurface.formats import Transcript, loads

SESSION = {"isSidechain": False, "userType": "external", "cwd": "/repo", "sessionId": "s1", "version": "2.1.39",
           "gitBranch": "main"}
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
            "edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\n")


class Session:
    """Appends records in order; `transcript()` reads them with the claude-code adapter."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.calls = 0

    def _add(self, **record: Any) -> str:
        uid = f"r{len(self.records)}"
        parent = next((r["uuid"] for r in reversed(self.records) if "uuid" in r), None)
        stamp = f"2026-02-01T10:{len(self.records) // 60:02d}:{len(self.records) % 60:02d}Z"
        self.records.append({**SESSION, "parentUuid": parent, "uuid": uid, "timestamp": stamp, **record})
        return uid

    def user(self, text: str) -> str:
        return self._add(type="user", message={"role": "user", "content": text})

    def meta(self, text: str) -> str:
        """A user-role record the harness wrote (a command's expanded prompt, a caveat)."""
        return self._add(type="user", isMeta=True, message={"role": "user", "content": [{"type": "text", "text": text}]})

    def command(self, name: str, args: str = "", message: str | None = None) -> str:
        """A slash command as Claude Code records it (the expansion or local output follows)."""
        text = (f"<command-message>{message or name.lstrip('/')}</command-message>\n<command-name>{name}</command-name>\n"
                f"<command-args>{args}</command-args>")
        return self.user(text)

    def say(self, text: str) -> str:
        return self._add(type="assistant", message={"id": f"msg{len(self.records)}", "role": "assistant",
                                                    "content": [{"type": "text", "text": text}]})

    def call(self, name: str, input: dict[str, Any], output: str | None, *, is_error: bool = False,
             tool_use_result: Any = None, text: str | None = None) -> str:
        """A tool call and (unless output is None) its result record; returns the call id."""
        self.calls += 1
        call_id = f"toolu_{self.calls:04d}"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": input})
        self._add(type="assistant", message={"id": f"msg{len(self.records)}", "role": "assistant", "content": content})
        if output is not None:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
            if is_error:
                result["is_error"] = True
            self._add(type="user", message={"role": "user", "content": [result]},
                      toolUseResult=output if tool_use_result is None else tool_use_result)
        return call_id

    def reject(self, name: str, input: dict[str, Any], words: str) -> str:
        """A call the user rejected in the permission prompt, typing `words` as the reason."""
        return self.call(name, input, REJECTED + words, is_error=True,
                         tool_use_result="Error: " + REJECTED + words)

    def queue(self, text: str) -> None:
        """Input typed while the agent was working (a queue-operation record)."""
        self.records.append({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-02-01T11:00:00Z",
                             "sessionId": "s1", "content": text})

    def transcript(self) -> Transcript:
        return loads("\n".join(json.dumps(r) for r in self.records) + "\n", "claude-code", "session.jsonl")


def subagent_pair(folder: Path, words: Callable[..., str], tokens: int = 1_500) -> tuple[Path, Path]:
    """A parent session that launched an Explore sub-agent, and that sub-agent's sidechain file, as
    Claude Code lays them out (`<id>.jsonl`, `<id>/subagents/agent-<agentId>.jsonl`): six results of
    about `tokens` each on both sides."""
    prompt = "Find where the panes are listed"
    parent = Session()
    parent.user("refactor the pane listing")
    for i in range(6):
        parent.call("Read", {"file_path": f"/repo/lib/p{i}.ex"}, words(tokens, seed=i))
    parent.call("Task", {"subagent_type": "Explore", "description": "find panes", "prompt": prompt},
                "Panes are listed in Tmux.list_panes/0.", tool_use_result={"status": "completed", "agentId": "a1b2"})
    parent.say("Found it.")
    parent.user("now fix it")
    side = Session()
    side.user(prompt)
    for i in range(6):
        side.call("Grep", {"pattern": f"pane{i}"}, words(tokens, seed=10 + i))
    side.say("Panes are listed in Tmux.list_panes/0.")
    side.user("go on")
    for r in side.records:
        r.update(isSidechain=True, agentId="a1b2")
    main_path = folder / "s1.jsonl"
    side_path = folder / "s1" / "subagents" / "agent-a1b2.jsonl"
    side_path.parent.mkdir(parents=True)
    for path, records in ((main_path, parent.records), (side_path, side.records)):
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return main_path, side_path
