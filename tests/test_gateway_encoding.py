"""gateway.encoding: a conversation's forwarded bodies encoded from what changed are `dumps` byte for
byte, whatever the values, and the values shared with the previous call are not encoded again."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.gateway.apis import dumps
from worksurface.gateway.encoding import BodyEncoder

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | \
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\ud83d", "é", "\u2028", '"', "\\"]), max_size=12)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                       max_leaves=12)
_BLOCKS = st.lists(st.dictionaries(st.sampled_from(["type", "text", "id", "input", "cache_control"]), _VALUES,
                                   max_size=4) | _VALUES, max_size=4)
_TURNS = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": _BLOCKS | _SCALARS},
                                        optional={"extra": _VALUES}), max_size=5)
_DOCS = st.fixed_dictionaries({"model": st.text(max_size=8), "messages": _TURNS},
                              optional={"system": _VALUES, "tools": st.lists(_VALUES, max_size=3), "input": _TURNS,
                                        "stream": st.booleans(), "metadata": _VALUES})


@settings(max_examples=150, deadline=None)
@given(first=_DOCS, second=_DOCS, keep=st.lists(st.booleans(), min_size=8, max_size=8))
def test_successive_bodies_encode_as_dumps(first: dict[str, Any], second: dict[str, Any], keep: list[bool]) -> None:
    encoder = BodyEncoder()
    assert encoder.dumps(first) == dumps(first)
    # The next call's body: new turn dicts around some of the same blocks, some values carried over.
    turns = [{**t} for t in first["messages"]][:sum(keep)] + second["messages"]
    nxt = {**second, "messages": turns}
    if keep[0] and "tools" in first:
        nxt["tools"] = first["tools"]
    assert encoder.dumps(nxt) == dumps(nxt)
    assert encoder.dumps(nxt) == dumps(nxt)     # a repeated body, every value reused
    json.loads(encoder.dumps(nxt))


def test_blocks_kept_from_call_to_call_are_encoded_once() -> None:
    blocks = [{"type": "text", "text": f"result {i} " * 200} for i in range(30)]
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    encoder = BodyEncoder()
    for n in range(1, 30):
        doc = {"model": "m", "tools": tools,
               "messages": [{"role": "user" if i % 2 else "assistant", "content": [b]} for i, b in enumerate(blocks[:n])]}
        assert encoder.dumps(doc) == dumps(doc)
        if n > 1:   # every block but the new one, and the tool definition
            assert encoder.reused == n - 1 + 1
    # A value changed in its place is a new object: encoded anew, never the old bytes.
    blocks[3] = {**blocks[3], "cache_control": {"type": "ephemeral"}}
    doc = {"model": "m", "tools": tools, "messages": [{"role": "user", "content": blocks}]}
    assert encoder.dumps(doc) == dumps(doc)
