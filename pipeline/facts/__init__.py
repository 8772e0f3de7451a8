"""Facts extracted from a transcript: pure, deterministic functions of a list of `Message`s.

Shared by the structured summarizer and the reinjectors, so both agree on what the session did:
files touched, standing constraints and excluded approaches, errors, progress, identifiers,
requests and tools.
"""

from .calls import CallRecord, tool_calls, tool_label
from .approaches import Approach, excluded_approaches
from .constraints import Constraint, TaskSpec, standing_constraints, task_specs
from .errors import ErrorFact, error_line, tool_errors
from .files import FileFact, file_activity
from .fileviews import edit_gist
from .findings import Finding, findings
from .identifiers import Identifiers, command_forms, command_gist, identifiers
from .observations import Outcome, output_gist, recent_outcomes
from .progress import (Commit, PlanMode, TestRun, TodoItem, TodoState, TrackerUpdate, commits,
                       parse_test_summary, plan_mode, test_runs, todo_state, tracker_updates)
from .requests import CurrentWork, UserMessage, current_work, latest_request, user_messages
from .testsummary import TestRunWatcher, TestSummary, is_test_command, parse_test_output
from .todos import normalize_status, todo_items
from .tracker import IssueChange, issue_changes
from .tools import (AgentUse, Announcement, SkillUse, ToolUsage, agents_used, announced_tools, mcp_servers,
                    skills_invoked, tool_usage)

__all__ = [
    "Finding", "IssueChange", "Outcome", "output_gist", "recent_outcomes", "TestRunWatcher", "TestSummary", "command_forms", "command_gist", "findings", "is_test_command",
    "issue_changes", "normalize_status", "parse_test_output", "todo_items",
    "AgentUse", "Announcement", "Approach", "CallRecord", "Commit", "Constraint", "CurrentWork", "ErrorFact",
    "FileFact", "Identifiers", "PlanMode", "SkillUse", "TaskSpec", "TestRun", "TodoItem", "TodoState", "ToolUsage", "TrackerUpdate",
    "UserMessage", "agents_used", "announced_tools", "commits", "current_work", "error_line",
    "edit_gist", "excluded_approaches", "file_activity", "identifiers", "latest_request", "mcp_servers",
    "parse_test_summary", "plan_mode", "skills_invoked", "standing_constraints", "task_specs", "test_runs", "todo_state",
    "tool_calls", "tool_errors", "tool_label", "tool_usage", "tracker_updates", "user_messages",
]
