"""JSON for the ledger's typed records: the frozen dataclasses of `worksurface.facts`, rebuilt with
their tuples, frozensets and nested records, so a reopened session has the same ledger."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def to_json(record: Any) -> Any:
    """A dataclass (or a container of them) as plain JSON values."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: to_json(getattr(record, f.name)) for f in dataclasses.fields(record)}
    if isinstance(record, (list, tuple)):
        return [to_json(v) for v in record]
    if isinstance(record, (set, frozenset)):
        return sorted(to_json(v) for v in record)
    if isinstance(record, dict):
        return {k: to_json(v) for k, v in record.items()}
    return record


def from_json(cls: type[T], data: Any) -> T:
    """Rebuild a dataclass of type `cls` written by `to_json` (unknown fields are ignored, so a record
    written by an older version still loads when fields were only added)."""
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: _value(hints[k], v) for k, v in data.items() if k in names}
    return cls(**kwargs)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _value(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        item = args[0] if args else Any
        return tuple(_value(item, v) for v in value)
    if origin is frozenset:
        return frozenset(_value(args[0], v) for v in value)
    if origin is list:
        return [_value(args[0], v) for v in value]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_json(hint, value)
    return value
