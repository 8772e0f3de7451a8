"""Todo items: the one parser for a todo or plan tool's list; the progress reader (reading.py) reads each
call with it once, for the ledger's todo list (the summary, the plan reinjector) and the status bar.

Read from the call's own input (TodoWrite `todos`, update_plan `plan`, OpenHands `task_list`, and a
Claude Code record's `todos` field), never from a tool's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from .text import trim

# (input key of the list, keys an item's text may be under), in the order they are tried.
LIST_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("todos", ("content", "text", "title")),
    ("plan", ("step", "content", "text")),
    ("task_list", ("title", "content", "text")),
)
# Harness status words mapped onto the three states the surface knows.
STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed", "done": "completed",
          "todo": "pending", "active": "in_progress", "in-progress": "in_progress", "complete": "completed"}


# Keys under which an item carries more than its title (Claude Code's TaskCreate/TaskUpdate
# `description`): what the item involves, often the only record of a plan's details.
DETAIL_KEYS = ("description", "details", "notes")
# An item's detail is cut to this many characters: it describes the item, it is not a document.
MAX_DETAIL_CHARS = 600


@dataclass(frozen=True)
class TodoItem:
    """One todo item: what the agent's todo tools wrote (the ledger's), and what the status bar shows
    (a harness's `TaskUpdated` event carries them too, its statuses normalized)."""

    text: str
    status: str = "pending"
    detail: str = ""  # what the item involves, when the tool recorded more than its title


def normalize_status(status: Any) -> str:
    """One of pending, in_progress, completed (unknown words are pending)."""
    return STATUS.get(str(status).strip().lower(), "pending")


def items_from(value: Any, text_keys: tuple[str, ...]) -> tuple[TodoItem, ...] | None:
    """The items of one todo list value (None: not a list of items), statuses as the tool wrote them."""
    if not isinstance(value, list):
        return None
    items = []
    for entry in value:
        if not isinstance(entry, Mapping):
            return None
        text = next((entry[k] for k in text_keys if isinstance(entry.get(k), str)), None)
        if text is None:
            return None
        items.append(TodoItem(text, str(entry.get("status", "pending")), _detail(entry)))
    return tuple(items)


def todo_items(inp: Mapping[str, Any]) -> tuple[TodoItem, ...] | None:
    """The todo list a todo/plan tool call's input carries, or None when it carries none."""
    for key, text_keys in LIST_KEYS:
        items = items_from(inp.get(key), text_keys)
        if items is not None:
            return items
    return None


class TodoReplayer:
    """Replays todo-tool calls in order: whole-list tools replace the list; Claude Code's TaskCreate /
    TaskUpdate build it one item at a time. `observe` gives the list after a successful call, or
    None when the call does not touch it. The progress reader (reading.py) keeps one per transcript."""

    def __init__(self) -> None:
        self.tasks: dict[str, TodoItem] = {}

    @staticmethod
    def may_change(name: str, inp: Mapping[str, Any]) -> bool:
        """False when `observe` would surely answer None (most calls: no list, not an item tool)."""
        return any(key in inp for key, _ in LIST_KEYS) or _item_tool(name) in ("taskcreate", "taskupdate")

    def observe(self, name: str, inp: Mapping[str, Any], output: str) -> tuple[TodoItem, ...] | None:
        n = _item_tool(name)
        if n == "taskcreate" and isinstance(inp.get("subject"), str):
            m = re.search(r"#(\w+)", output)
            self.tasks[m.group(1) if m else str(len(self.tasks) + 1)] = TodoItem(inp["subject"], "pending",
                                                                                  _detail(inp))
            return tuple(self.tasks.values())
        if n == "taskupdate" and str(inp.get("taskId", "")) in self.tasks:
            key = str(inp["taskId"])
            old = self.tasks[key]
            self.tasks[key] = TodoItem(str(inp.get("subject") or old.text), str(inp.get("status") or old.status),
                                       _detail(inp) or old.detail)
            return tuple(self.tasks.values())
        return todo_items(inp)


def _item_tool(name: str) -> str:
    return name.strip().lower().split("__")[-1]


def _detail(entry: Mapping[str, Any]) -> str:
    """What an item involves beyond its title, verbatim (cut at a word boundary), or ""."""
    detail = next((entry[k].strip() for k in DETAIL_KEYS if isinstance(entry.get(k), str) and entry[k].strip()), "")
    return trim(detail, MAX_DETAIL_CHARS)
