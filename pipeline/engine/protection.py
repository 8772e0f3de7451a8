"""What every stage leaves alone (invariant 3): the newest message the user typed and everything after
the last assistant turn. Deciding what the user typed takes the fact parsers, so this sits above them."""

from __future__ import annotations

from typing import Sequence

from ..core.edits import stable_prefix_length
from ..core.model import Message
from ..facts.requests import is_user_message


def last_user_turn_index(view: Sequence[Message]) -> int | None:
    """Index of the newest message the user typed (harness notes in the user role do not count)."""
    for i in range(len(view) - 1, -1, -1):
        if is_user_message(view[i]):
            return i
    return None


def protected_ids(view: Sequence[Message]) -> frozenset[str]:
    """Invariant 3: the latest user message and everything after the last assistant message."""
    ids: set[str] = set()
    u = last_user_turn_index(view)
    if u is not None:
        ids.add(view[u].id)
    for i in range(len(view) - 1, -1, -1):
        if view[i].role == "assistant":
            break
        ids.add(view[i].id)
    ids.update(m.id for m in view[: stable_prefix_length(view)])
    return frozenset(ids)
