"""What the summarizers read of the working state beside the records (`FactSource`): the vocabulary
the records are written in (their types and the constants of their `kind`/`via` fields), and the
views over the summarized span itself (the current work, where the user spoke, the issue states a
task text lists, the forms of the commands run), each answered here by the facts/ parsers, so no
summarizer imports facts/ or parses a message itself.
"""

from __future__ import annotations

from typing import Sequence

from ..core.model import Message
from ..facts.answers import Decision
from ..facts.findings import COMPLAINT
from ..facts.followups import FOLLOW_UP, VERIFIED
from ..facts.identifiers import command_forms
from ..facts.plans import is_plan_document
from ..facts.requests import VIA_ANSWERS, CurrentWork, UserMessage, current_work, user_message_flags
from ..facts.shell import first_line
from ..facts.text import one_line
from ..facts.tracker import IssueChange, issue_changes

__all__ = ["COMPLAINT", "CurrentWork", "Decision", "FOLLOW_UP", "IssueChange", "UserMessage", "VERIFIED",
           "VIA_ANSWERS", "command_forms", "current_work", "first_line", "is_plan_document", "listed_issues",
           "one_line", "user_turns"]


def user_turns(messages: Sequence[Message]) -> list[int]:
    """Where the user typed a message of their own (harness notes and tool outputs are not), by index."""
    return [i for i, typed in enumerate(user_message_flags(messages)) if typed]


def listed_issues(text: str) -> list[IssueChange]:
    """The issues, with their states, that a tracker's issue text lists (read as `bd show` prints it)."""
    return issue_changes("bd show", text)
