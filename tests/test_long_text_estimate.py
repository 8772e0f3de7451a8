"""A text over EXACT_COUNT_MAX_CHARS is counted from windows cut at the tokenizer's own splits: close to
its exact count, the same on every call and in every counter, and a shorter text stays exact."""

from __future__ import annotations

from hypothesis import given, strategies as st

from worksurface.core import tokens
from worksurface.core.tokens import EXACT_COUNT_MAX_CHARS, TokenCounter, _split_at, get_encoding

CODE = "def handler_{i}(request):\n    value = request.args.get('key_{i}', {i})\n    return value * 2\n\n"
PROSE = "The migration for table number {i} finished after the retry; the index was rebuilt. "
LOG = "2026-01-01T00:00:{s:02d}Z WARN pool-{i} queue depth {i} exceeded, backing off 250ms\n"


def _mixed(chars: int) -> str:
    """Code, then prose, then a log: a text whose tokens per character change along it."""
    parts, size, i = [], 0, 0
    while size < chars:
        block = (CODE if i % 3 == 0 else PROSE if i % 3 == 1 else LOG).format(i=i, s=i % 60)
        parts.append(block * (1 + i % 5))
        size += len(parts[-1])
        i += 1
    return "".join(parts)


def _exact(text: str) -> int:
    return len(get_encoding().encode_ordinary(text))


def test_a_long_text_is_estimated_within_two_percent_and_a_shorter_one_is_exact() -> None:
    counter = TokenCounter()
    short = _mixed(EXACT_COUNT_MAX_CHARS - 2_000)[:EXACT_COUNT_MAX_CHARS]
    assert counter.text(short) == _exact(short) and counter.estimated == 0
    for size in (EXACT_COUNT_MAX_CHARS + 1, 100_000, 1_000_000):
        long = _mixed(size)
        estimate = counter.text(long)
        assert abs(estimate - _exact(long)) / _exact(long) < 0.02, size
    assert counter.estimated == 3


def test_an_estimate_is_the_same_in_every_counter_and_encodes_a_bounded_sample(monkeypatch) -> None:
    long = _mixed(2_000_000)
    first = TokenCounter().text(long)
    encoded: list[int] = []
    real = get_encoding().encode_ordinary
    monkeypatch.setattr(get_encoding(), "encode_ordinary", lambda text: encoded.append(len(text)) or real(text))
    assert TokenCounter().text(long) == first
    bound = tokens.ESTIMATE_WINDOWS * (tokens.ESTIMATE_WINDOW_CHARS + tokens.ESTIMATE_SNAP_CHARS)
    assert len(encoded) == tokens.ESTIMATE_WINDOWS and sum(encoded) <= bound


@given(st.lists(st.text(st.sampled_from("ab cd\t(){}=é中1\n"), max_size=40), min_size=2, max_size=30),
       st.integers(0, 400))
def test_a_window_starts_where_the_tokenizer_splits(lines: list[str], at: int) -> None:
    text = "\n".join(lines)
    split = _split_at(text, min(at, len(text)), len(text))
    assert 0 <= split <= len(text)
    if split > 0 and text[split - 1] == "\n":  # a line start: encoding the two parts apart loses nothing
        assert _exact(text[:split]) + _exact(text[split:]) == _exact(text)
