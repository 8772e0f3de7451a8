"""`cached`: a property worked out once per object, for immutable objects read in hot loops."""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar, overload

T = TypeVar("T")


class cached(Generic[T]):  # noqa: N801 - used as a decorator, like property
    """Like `functools.cached_property` (the value is stored in the instance's `__dict__`, so later
    reads never reach the descriptor) without its lock: on Python 3.11 taking that lock on each
    first read cost more than computing a message's tool calls. Two threads computing the same
    value at once both get an equal value, which is all an immutable object needs."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> "cached[T]": ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> "T | cached[T]":
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value
