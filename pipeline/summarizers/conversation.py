"""The conversation as a summary quotes it: the assistant's reports the user replied to, each user
message once (where it was said last), and how a message was given."""

from __future__ import annotations

from typing import Sequence

from ..core.model import Message
from ..ledger.views import UserMessage, user_turns


def replied_reports(messages: Sequence[Message], limit: int) -> list[tuple[int, str]]:
    """(index, text) of the assistant's last words before each of the newest `limit` messages the
    user typed, newest first (none when the agent said nothing since the previous one). A harness's
    notice (a background task ending, an interrupt marker) replies to nothing."""
    out: list[tuple[int, str]] = []
    user_at = user_turns(messages)
    for k in range(len(user_at) - 1, -1, -1):
        if len(out) >= limit:
            break
        start = user_at[k - 1] if k else -1
        said = next((j for j in range(user_at[k] - 1, start, -1)
                     if messages[j].role == "assistant" and messages[j].text.strip()), None)
        if said is not None:
            out.append((said, messages[said].text.strip()))
    return out


def newest_of_each(users: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each message said once, where it was said last: a harness that carries the user's messages
    into its own compacted history (Codex) repeats them all."""
    seen: set[str] = set()
    out = []
    for text, how in reversed(users):
        key = " ".join(text.split()).casefold()
        if key not in seen:
            seen.add(key)
            out.append((text, how))
    return out[::-1]


def given_how(u: UserMessage) -> str:
    """How a user message was given, when not typed as a message in its turn."""
    if u.via:
        return f"via {u.via}"
    return "typed while the agent was working" if u.queued else ""
