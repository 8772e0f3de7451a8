"""gateway.bodyparse and recognize.PrefixMemo: successive bodies parse to what json.loads gives (its
error for what it refuses), values whose text is unchanged are the previous body's objects, and a
stable prefix is read once per conversation, never taken from a body whose prefix differs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.gateway.anthropic import AnthropicMessages
from worksurface.gateway.bodyparse import BodyParser
from worksurface.gateway.recognize import PrefixMemo, read_head

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | \
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\ud83d", '"', "\\", "\u2028"]), max_size=10)
_VALUES = st.recursive(_SCALARS, lambda v: st.lists(v, max_size=3) | st.dictionaries(st.text(max_size=4), v, max_size=3),
                       max_leaves=10)
_DOCS = st.fixed_dictionaries({"system": _VALUES, "messages": st.lists(_VALUES, max_size=6)},
                              optional={"model": _SCALARS, "input": st.lists(_VALUES, max_size=3), "tools": _VALUES})


def _text(doc: Any, spaced: bool) -> bytes:
    return json.dumps(doc, indent=1 if spaced else None, ensure_ascii=spaced).encode("utf-8", "surrogatepass")


@settings(max_examples=200, deadline=None)
@given(first=_DOCS, more=st.lists(_VALUES, max_size=4), changed=_VALUES, spaced=st.booleans(), edit=st.booleans())
def test_successive_bodies_parse_as_json_loads(first: dict[str, Any], more: list[Any], changed: Any,
                                               spaced: bool, edit: bool) -> None:
    parser = BodyParser()
    raw = _text(first, spaced)
    assert parser.parse(raw) == json.loads(raw)
    nxt = {**first, "messages": [*first["messages"], *more]}
    if edit:
        nxt["system"] = changed
    raw2 = _text(nxt, spaced)
    got = parser.parse(raw2)
    assert got == json.loads(raw2)
    assert json.dumps(got, sort_keys=True) == json.dumps(json.loads(raw2), sort_keys=True)


@pytest.mark.parametrize("raw", [b"", b"{", b'{"a": 1,}', b'{"a": [1, 2,]}', b'{"a": 1} x', b"[1, 2]", b'"text"',
                                 b'{"messages": [{"role": "user"}]', b"\xff\xfe{", b'{"a": NaN}', b'{"a": 01}'])
def test_what_json_loads_refuses_is_refused_alike(raw: bytes) -> None:
    parser = BodyParser()
    parser.parse(b'{"messages": [{"role": "user", "content": "hi"}], "a": 1}')
    try:
        expected: Any = json.loads(raw)
    except ValueError as exc:
        with pytest.raises(type(exc)):
            parser.parse(raw)
    else:
        assert parser.parse(raw) == expected


def _body(turns: int, tag: str = "") -> bytes:
    messages = [{"role": "user", "content": [{"type": "text", "text": f"{tag}Fix the parser."}]}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read",
                                                           "input": {"file_path": f"src/m{i}.py"}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                      "content": f"line of m{i}\n" * 50}]})
    return json.dumps({"model": "claude-x", "max_tokens": 64, "system": "You are careful. " * 40,
                       "tools": [{"name": "Read", "input_schema": {"type": "object"}}], "messages": messages}).encode()


def test_unchanged_values_are_the_previous_objects_and_only_new_turns_are_parsed() -> None:
    parser = BodyParser()
    a = parser.parse(_body(5))
    b = parser.parse(_body(6))
    assert b == json.loads(_body(6))
    assert b["system"] is a["system"] and b["tools"] is a["tools"]
    assert all(x is y for x, y in zip(a["messages"], b["messages"]))
    assert b["messages"][-1] is not a["messages"][-1] and len(b["messages"]) == 13
    assert parser.reused == 3 + 11      # model, system and tools, and the eleven turns the first body had


def test_a_stable_prefix_is_read_once_and_never_taken_from_another_conversation() -> None:
    api, parser, prefixes = AnthropicMessages(), BodyParser(), PrefixMemo()
    calls = []
    original = api.stable_prefix

    def counting(body: Any) -> Any:
        calls.append(1)
        return original(body)
    api.stable_prefix = counting  # type: ignore[method-assign]
    first = [read_head(api, {}, _body(n), parser, prefixes).recognized for n in range(1, 6)]
    assert len({r.session_id for r in first if r}) == 1 and len(calls) == 1
    other = read_head(api, {}, _body(3, tag="[another] "), parser, prefixes).recognized
    assert other is not None and other.session_id != first[0].session_id and len(calls) == 2
    # Same first message, another system prompt: another conversation, read again.
    changed = json.loads(_body(4))
    changed["system"] = "You are brief."
    third = read_head(api, {}, json.dumps(changed).encode(), parser, prefixes).recognized
    assert third is not None and third.session_id != first[0].session_id and len(calls) == 3
    # The same as without the memo and the parser.
    assert read_head(AnthropicMessages(), {}, _body(7)).recognized == first[0]
