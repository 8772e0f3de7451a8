"""Answers remembered for the messages they read: one fold (and one compaction) asks several extractors
and reinjectors for the same list's calls, file activity and test runs, and for the same message's
harness reminders, and one offline command measures the same transcript's usage for its sizes, its
calibration and its writer; each is worked out once. Keyed by identity (messages are immutable, lists
are not reused once built), holding what they key so an id is never reused while remembered."""

from __future__ import annotations

import functools
from typing import Any, Callable, Generic, Sequence, TypeVar

from .model import Message

# The last few message lists read (a fold's window, a compaction's kept part, a one-shot's whole list).
RECENT_LISTS = 4
# Messages whose answers are held; past this the memo starts over (a few calls' windows need far fewer).
MAX_MESSAGES = 4096

T = TypeVar("T")


# Every memo's forget(), for `forget_all` (memos are made at import, so this list does not grow).
_MEMOS: list[Callable[[], None]] = []


def forgotten_with_the_others(forget: Callable[[], None]) -> None:
    """Have `forget_all` call `forget` too (a memo kept by other means, such as an lru_cache's
    `cache_clear`)."""
    _MEMOS.append(forget)


def forget_all() -> None:
    """Drop every memo's answers and the lists they hold: a command that read a transcript frees it
    when it ends (the interpreter's exit frees a transcript still held far more slowly than this)."""
    for forget in _MEMOS:
        forget()


class RecentLists(Generic[T]):
    """The answers for the last few message lists read (RECENT_LISTS), by the list's identity and
    length, and a `key` for what else the answer depends on; each caller gets its own copy."""

    def __init__(self) -> None:
        self._recent: list[tuple[Sequence[Message], int, Any, list[T]]] = []
        _MEMOS.append(self._recent.clear)

    def get(self, messages: Sequence[Message], key: Any = None) -> list[T] | None:
        for seen, length, known, found in self._recent:
            if seen is messages and length == len(messages) and known == key:
                return list(found)
        return None

    def put(self, messages: Sequence[Message], found: list[T], key: Any = None) -> list[T]:
        self._recent.insert(0, (messages, len(messages), key, found))
        del self._recent[RECENT_LISTS:]
        return list(found)


def per_message_list(read: Callable[[Sequence[Message]], list[T]]) -> Callable[[Sequence[Message]], list[T]]:
    """`read` answered once per message list (its last few lists): each caller gets its own copy of
    the list of (frozen) results."""
    recent: RecentLists[T] = RecentLists()

    @functools.wraps(read)
    def remembered(messages: Sequence[Message]) -> list[T]:
        found = recent.get(messages)
        return found if found is not None else recent.put(messages, read(messages))

    return remembered


def per_message(read: Callable[[Message], list[T]]) -> Callable[[Message], list[T]]:
    """`read` answered once per message object: each caller gets its own copy of the list."""
    known: dict[int, tuple[Message, list[T]]] = {}
    _MEMOS.append(known.clear)

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
