"""How much of a view a provider's prompt cache could serve: the longest common prefix, in tokens, of
consecutive views.

Providers cache by content, not by worksurface's message ids, so two messages match when their role and
blocks are equal. At the first differing message the common prefix continues token by token into its
text (a provider caches at token granularity within a message too).
"""

from __future__ import annotations

from typing import Sequence

from worksurface.model import Message, message_text
from worksurface.tokens import TokenCounter, get_encoding


def same_content(a: Message, b: Message) -> bool:
    return a is b or (a.role == b.role and a.blocks == b.blocks)


def common_prefix_tokens(previous: Sequence[Message], current: Sequence[Message], counter: TokenCounter) -> int:
    """Tokens at the start of `current` equal to the start of `previous`."""
    total = 0
    for a, b in zip(previous, current):
        if same_content(a, b):
            total += counter.message(b)
            continue
        if a.role == b.role:
            total += _common_token_prefix(message_text(a), message_text(b))
        break
    return total


def _common_token_prefix(a: str, b: str) -> int:
    enc = get_encoding()
    n = 0
    for x, y in zip(enc.encode_ordinary(a), enc.encode_ordinary(b)):
        if x != y:
            break
        n += 1
    return n
