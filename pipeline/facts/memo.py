"""Answers remembered for the messages they read: one fold (and one compaction) asks several extractors
and reinjectors for the same list's calls, file activity and test runs, and for the same message's
harness reminders; each is worked out once. Keyed by identity (messages are immutable, lists are not
reused once built), holding what they key so an id is never reused while remembered."""

from __future__ import annotations

import functools
from typing import Callable, Sequence, TypeVar

from ..core.model import Message

# The last few message lists read (a fold's window, a compaction's kept part, a one-shot's whole list).
RECENT_LISTS = 4
# Messages whose answers are held; past this the memo starts over (a few calls' windows need far fewer).
MAX_MESSAGES = 4096

T = TypeVar("T")


def per_message_list(read: Callable[[Sequence[Message]], list[T]]) -> Callable[[Sequence[Message]], list[T]]:
    """`read` answered once per message list (its last few lists): each caller gets its own copy of
    the list of (frozen) results."""
    recent: list[tuple[Sequence[Message], int, list[T]]] = []

    @functools.wraps(read)
    def remembered(messages: Sequence[Message]) -> list[T]:
        for seen, length, found in recent:
            if seen is messages and length == len(messages):
                return list(found)
        found = read(messages)
        recent.insert(0, (messages, len(messages), found))
        del recent[RECENT_LISTS:]
        return list(found)

    return remembered


def per_message(read: Callable[[Message], list[T]]) -> Callable[[Message], list[T]]:
    """`read` answered once per message object: each caller gets its own copy of the list."""
    known: dict[int, tuple[Message, list[T]]] = {}

    @functools.wraps(read)
    def remembered(message: Message) -> list[T]:
        hit = known.get(id(message))
        if hit is not None and hit[0] is message:
            return list(hit[1])
        if len(known) >= MAX_MESSAGES:
            known.clear()
        found = read(message)
        known[id(message)] = (message, found)
        return list(found)

    return remembered
