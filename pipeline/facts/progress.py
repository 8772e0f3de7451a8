"""Where the work stands: test runs (summary lines verbatim), the todo list, plan mode, and commits.

Test runs, the todo list and tracker updates are read once per result by reading.py (re-exported here); the
summary line is kept exactly as printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.model import Message
from ..core.toolkinds import normalize_name
from .calls import CallRecord, tool_calls
from .testsummary import parse_test_output
from .provenance import converted_outputs, harness_tool, reminders_by_message
from .reading import Commit, TestRun, TodoState, commits, test_runs, todo_state, tracker_updates
from .todos import TodoItem
from .tracker import TRACKER_UPDATE_RE, TrackerUpdate

__all__ = ["Commit", "PlanMode", "TestRun", "TodoItem", "TodoState", "TrackerUpdate", "TRACKER_UPDATE_RE",
           "commits", "parse_test_summary", "plan_mode", "test_runs", "todo_state", "tracker_updates"]
# Claude Code's plan-mode reminder and the approval result naming the saved plan file.
PLAN_MODE_REMINDER = "plan mode is active"
PLAN_SAVED_RE = re.compile(r"saved to: (\S+)")

@dataclass(frozen=True)
class PlanMode:
    """Plan mode: on or off, and the last plan proposed or approved (with the file it was saved to)."""

    active: bool
    plan: str | None
    plan_path: str | None
    approved: bool
    message_id: str | None


def parse_test_summary(output: str) -> tuple[str, str, int | None, int | None] | None:
    """(framework, summary line, passed, failed) of the last test summary in an output, or None.
    The one parser (testsummary.parse_test_output) in the shape the summary has always used."""
    found = parse_test_output(output)
    if found is None:
        return None
    return found.runner, found.summary, found.passed, found.failed


def plan_mode(messages: Sequence[Message]) -> PlanMode:
    """Whether plan mode is on at the end of the messages, and the latest plan (proposed or approved)."""
    active, approved = False, False
    plan: str | None = None
    path: str | None = None
    where: str | None = None
    outputs = converted_outputs(messages)
    said_by_harness = reminders_by_message(messages)
    events: list[tuple[int, int, Any]] = [
        (i, 0, m) for i, m in enumerate(messages)
        if i not in outputs and any(PLAN_MODE_REMINDER in r.lower() for r in said_by_harness[i])]
    # Plan mode is the harness's: an MCP server's tool named like its plan tools neither enters it nor
    # says the user approved a plan (that answer would be the server's text).
    events += [(rec.index, 1, rec) for rec in tool_calls(messages)
               if normalize_name(rec.name) in ("enterplanmode", "exitplanmode") and harness_tool(rec.call)]
    for _, order, item in sorted(events, key=lambda e: (e[0], e[1])):
        if order == 0:
            active, where = True, item.id
            continue
        rec: CallRecord = item
        if rec.result is None or rec.failed:
            if normalize_name(rec.name) == "exitplanmode" and isinstance(rec.call.input.get("plan"), str):
                plan, where = rec.call.input["plan"], rec.message_id  # proposed, not approved
            continue
        if normalize_name(rec.name) == "enterplanmode":
            active, approved, where = True, False, rec.message_id
            continue
        if isinstance(rec.call.input.get("plan"), str):
            plan, where = rec.call.input["plan"], rec.message_id
        if "approved" in rec.output.lower():
            active, approved = False, True
            saved = PLAN_SAVED_RE.search(rec.output)
            path = saved.group(1) if saved else path
    return PlanMode(active, plan, path, approved, where)
