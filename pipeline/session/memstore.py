"""The session store kept in memory (the one-shot `compact()`, and `Session.open(None)`): the `Store`
contract over a dict of JSON texts, with an undo journal for transactions."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..core.tokens import TokenCounter
from .store import ReentrantLock, Store


class MemoryStore(Store):
    """The same API kept in memory (the one-shot `compact()`); artifacts have no file (path None).
    A logged message, an artifact, an edit or a frozen meta record is encoded only if it is read back
    (a fork, an export, another Session object's commit): a session keeps the objects it committed, and
    encoding them was most of a one-shot compaction's commit (a 200 MB result, 100k messages)."""

    persistent = False

    def __init__(self, counter: TokenCounter | None = None) -> None:
        super().__init__(counter)
        # A text, or the function that encodes a value that cannot change (`_put_deferred`).
        self._data: dict[str, str | Callable[[], str]] = {}
        self._depth = 0
        self._locking = ReentrantLock(self.location, lambda deadline, timeout: None, lambda: None)
        # Inside a transaction: each touched key's value before it (None: absent), to roll back to.
        # An undo journal rather than a copy of everything, so a call's commit costs what it writes.
        self._undo: dict[str, str | Callable[[], str] | None] = {}

    @property
    def location(self) -> str:
        return "<memory store>"

    def _get(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is None or isinstance(value, str):
            return value
        text = self._data[key] = value()
        return text

    def _put(self, key: str, text: str) -> None:
        self._set(key, text)

    def _put_deferred(self, key: str, encode: Callable[[], str]) -> None:
        self._set(key, encode)

    def _set(self, key: str, value: str | Callable[[], str]) -> None:
        if self._depth and key not in self._undo:
            self._undo[key] = self._data.get(key)
        self._data[key] = value

    def _delete(self, key: str) -> None:
        if self._depth and key not in self._undo:
            self._undo[key] = self._data.get(key)
        self._data.pop(key, None)

    def _keys(self) -> list[str]:
        return list(self._data)

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        outermost = self._depth == 0
        self._depth += 1
        try:
            yield
        except BaseException:
            if outermost:
                for key, old in self._undo.items():
                    if old is None:
                        self._data.pop(key, None)
                    else:
                        self._data[key] = old
            raise
        finally:
            self._depth -= 1
            if outermost:
                self._undo = {}

    def _materialize(self, artifact_id: str, content: str) -> str | None:
        return None

    def lock(self, timeout: float = 30.0) -> Any:
        """A thread lock with the same timeout behaviour as the other backends' locks."""
        return self._locking.hold(timeout)
