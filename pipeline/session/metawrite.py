"""A commit's writes of the session's small meta values, skipping those the store already holds: on
a call where nothing changed they are most of the commit's writes (and on PostgreSQL, round trips)."""

from __future__ import annotations

from typing import Any, Callable

from ..status import PublisherState
from .store import Store


class MetaWriter:
    """A commit's meta writes that skip a value the store already holds: the one this session object
    committed last, as long as no write came in between (`held` is stamped with the generation its
    commit made; any other write, this object's `snip` or `emit` or another process, moves it on).
    Only values equal in type and value are skipped, so the stored text stays what it was."""

    def __init__(self, store: Store, held: tuple[int, dict[str, Any]], generation: int) -> None:
        self.store = store
        self.held = held[1] if held[0] == generation else {}
        self.written: dict[str, Any] = {}

    def set(self, key: str, value: Any, to_json: Callable[[Any], Any] | None = None) -> None:
        """`store.set_meta(key, to_json(value))` unless the store holds it already (`value` is then
        a frozen record, compared as given, and its JSON made when the store needs it)."""
        known = self.held.get(key, _UNSET)
        if type(known) is type(value) and known == value and _scalar_or_record(value):
            return
        if to_json is not None:
            self.store.set_meta_record(key, value, to_json)
        else:
            self.store.set_meta(key, value)
        self.written[key] = value

    def committed(self, generation: int) -> tuple[int, dict[str, Any]]:
        """What the store holds once the transaction committed, stamped with its generation."""
        return generation, {**self.held, **self.written}


_UNSET = object()


def held_value(held: tuple[int, dict[str, Any]], generation: int, key: str) -> Any:
    """The value under `key` the store holds because this session object committed it (None when
    that is not known: not committed by it, or another write came in between)."""
    return held[1].get(key) if held[0] == generation else None


def _scalar_or_record(value: Any) -> bool:
    """A value whose equality says its JSON is the same: a scalar, an empty list, a frozen record."""
    return value is None or isinstance(value, (str, int, float, bool)) or value == [] or isinstance(value, PublisherState)
