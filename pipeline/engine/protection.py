"""What every stage leaves alone (invariant 3): the newest message the user typed and everything after
the last assistant turn. Deciding what the user typed takes the fact parsers, so this sits above them."""

from __future__ import annotations

from typing import Sequence

from ..core.edits import stable_prefix_length
from ..core.model import Message, begins_with
from ..facts.requests import is_user_message


class _Unknown:
    """Not worked out yet (None is an answer: the view has no user turn)."""


UNKNOWN = _Unknown()


def last_user_turn_index(view: Sequence[Message]) -> int | None:
    """Index of the newest message the user typed (harness notes in the user role do not count)."""
    for i in range(len(view) - 1, -1, -1):
        if is_user_message(view[i]):
            return i
    return None


def protected_ids(view: Sequence[Message], user_turn: int | None | _Unknown = UNKNOWN) -> frozenset[str]:
    """Invariant 3: the latest user message and everything after the last assistant message.
    `user_turn`: the view's `last_user_turn_index`, when the caller knows it."""
    ids: set[str] = set()
    u = last_user_turn_index(view) if isinstance(user_turn, _Unknown) else user_turn
    if u is not None:
        ids.add(view[u].id)
    for i in range(len(view) - 1, -1, -1):
        if view[i].role == "assistant":
            break
        ids.add(view[i].id)
    ids.update(m.id for m in view[: stable_prefix_length(view)])
    return frozenset(ids)


class ProtectedIds:
    """`protected_ids` of a session's successive views: a view that starts with the previous one (the
    same message objects, as on a call that only appended) is searched for its newest user turn only
    in the messages after it, instead of back through a long agentic run on every call."""

    def __init__(self) -> None:
        # (the previous view, its user turn, the list the caller passed for it)
        self._seen: tuple[list[Message], int | None, object] | None = None

    def __call__(self, view: Sequence[Message], extends: Sequence[Message] | None = None) -> frozenset[str]:
        """`protected_ids(view)`. `extends`: a list passed before, unchanged since, that the caller
        knows `view` begins with (not compared again when it is the previous one)."""
        seen = self._seen
        if seen is not None and ((extends is not None and seen[2] is extends) or begins_with(view, seen[0])):
            start, turn = len(seen[0]), seen[1]
        else:
            start, turn = 0, None
        found = last_user_turn_index(view[start:])
        if found is not None:
            turn = start + found
        self._seen = (list(view), turn, view)
        return protected_ids(view, turn)
