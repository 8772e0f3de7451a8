"""Keeping provider blocks byte-exact through a round trip.

A request adapter maps each provider block (content part, tool call, ...) to exactly one model block.
When the provider's own JSON for it differs from what the writer would generate (`cache_control`,
`detail`, the exact `arguments` string, unknown keys), it is remembered in the message's meta under
the block's content key; on write, a block whose content is unchanged gets its original JSON back,
and a new or edited block is generated afresh.
Keyed by content rather than position, so it survives stages that drop or insert blocks.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from ..core.model import Block, Message, block_key

# The writer for a block kind takes that kind: `make(block)` is always handed the block it writes.
B = TypeVar("B", bound=Block)


def raw_meta_key(format_name: str) -> str:
    """The meta key under which a format keeps its raw blocks (namespaced: formats never mix)."""
    return f"{format_name}.raw"


def remember(raws: dict[str, list[Any]], block: B, raw: Any, make: Callable[[B], Any]) -> None:
    """Record `raw` as the provider JSON of `block` unless `make` (the writer) gives it back anyway,
    so the meta stays small. A list per key: identical blocks may differ in their raw JSON."""
    if raw != make(block):
        raws.setdefault(block_key(block), []).append(raw)


class Recall:
    """Hands out a message's remembered raw blocks in their original order of occurrence."""

    def __init__(self, message: Message, format_name: str) -> None:
        self._raws: Mapping[str, list[Any]] = message.meta.get(raw_meta_key(format_name)) or {}
        self._used: dict[str, int] = {}

    def get(self, block: B, make: Callable[[B], Any]) -> Any:
        """The remembered JSON for `block`, or `make(block)` when there is none (left)."""
        key = block_key(block)
        options = self._raws.get(key, ())
        n = self._used.get(key, 0)
        if n < len(options):
            self._used[key] = n + 1
            return options[n]
        return make(block)
