"""Reading successive requests of one conversation: a harness sends the whole history on every call,
so a raw message equal to the one at its place in the previous request is the Message read from it
last time (the same object: no new parse, no new digest, and the session sees the objects it saw
before). Per-request reading then follows what is new; only a conversation's first request is read
whole. Used by the request adapters' `read_doc` (anthropic_messages, openai_chat, openai_responses)."""

from __future__ import annotations

from typing import Any, Callable, Hashable, TypeVar

from ..core.errors import FormatError
from .jsondoc import MAX_DEPTH, too_deep

T = TypeVar("T")


class Reuse:
    """The raw messages of the last request read whole, with the Messages read from them."""

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[Any, Any]] = {}
        self._next: dict[Hashable, tuple[Any, Any]] = {}
        self.read_count = 0     # raw messages read anew (not reused) by the last request

    def message(self, key: Hashable, raw: Any, read: Callable[[], T], path: str | None) -> T:
        """What was read at `key` (its place in the request: a Message, or the Messages one API
        turn splits into): the previous one when `raw` is equal to what was there, else `read()`
        (after the depth check whole-document reads make)."""
        old = self._last.get(key)
        message: T
        if old is not None and (old[0] is raw or old[0] == raw):
            message = old[1]
        else:
            if too_deep(raw, MAX_DEPTH - 2):
                raise FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path,
                                  record=str(key))
            message = read()
            self.read_count += 1
        self._next[key] = (raw, message)
        return message

    def keep(self, key: Hashable, value: Any) -> None:
        """What the next request reuses at `key` is `value` (what reading made of the raw message
        after the whole request was seen: a Responses item grouped with its response)."""
        self._next[key] = (self._next[key][0], value)

    def check_fields(self, fields: Any, path: str | None) -> None:
        """The depth check of a whole-document read, for the request's other fields (tools ...)."""
        if too_deep(fields, MAX_DEPTH - 1):
            raise FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path)

    def begin(self) -> None:
        self._next, self.read_count = {}, 0

    def commit(self) -> None:
        """The request was read whole: its messages are what the next one is compared with."""
        self._last, self._next = self._next, {}


def read_fresh(key: Hashable, raw: Any, read: Callable[[], T], path: str | None) -> T:
    """What `Reuse.message` does with nothing to reuse (a whole-document read has checked the depth)."""
    return read()


class Memo:
    """What a writer made of each message on the previous call, by identity: a view that keeps its
    message objects from call to call (the session's do) is written anew only where it changed.
    Keeps the results for the objects of the last call only (`rotate` after each)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._next: dict[tuple[str, int], tuple[Any, Any]] = {}

    def get(self, kind: str, obj: Any, make: Callable[[Any], T]) -> T:
        key = (kind, id(obj))
        hit = self._next.get(key) or self._last.get(key)
        value: T = hit[1] if hit is not None and hit[0] is obj else make(obj)
        self._next[key] = (obj, value)
        return value

    def rotate(self) -> None:
        self._last, self._next = self._next, {}


def made(memo: Memo | None, kind: str, obj: Any, make: Callable[[Any], T]) -> T:
    """`make(obj)`, remembered in `memo` when there is one."""
    return make(obj) if memo is None else memo.get(kind, obj, make)
