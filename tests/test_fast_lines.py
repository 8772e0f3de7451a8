"""Session lines read by orjson where it reads them as strictjson does, and by strictjson where it does
not (issue 51): the same record, key order, number types and damaged-line problem either way."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.core import strictjson
from worksurface.formats.damaged import FAST_MAX_DEPTH, DamagedLine, parse_line

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10 ** 40), max_value=10 ** 40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


def _same(a: object, b: object) -> bool:
    """Equal with the same types all the way down (1 and 1.0 differ) and keys in the same order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (a == b or repr(a) == repr(b))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _JSON, max_size=5), st.booleans())
def test_a_line_reads_as_strictjson_reads_it(record: dict[str, object], ascii_only: bool) -> None:
    line = json.dumps(record, ensure_ascii=ascii_only)
    assert _same(parse_line(line, 1, False), strictjson.loads(line))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=4), _JSON), max_size=4))
def test_a_repeated_key_keeps_its_first_place_and_last_value(pairs: list[tuple[str, object]]) -> None:
    line = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs) + "}"
    assert _same(parse_line(line, 1, False), json.loads(line))


def test_integers_past_64_bits_stay_integers() -> None:
    for literal in ("18446744073709551616", "-9223372036854775809", "1" * 40):
        record = parse_line(f'{{"n": {literal}}}', 1, False)
        assert isinstance(record, dict) and record["n"] == int(literal) and type(record["n"]) is int


def test_a_line_no_parser_reads_is_damaged_with_strictjsons_problem() -> None:
    for line, problem in (('{"a": 1,}', "broken JSON"), ('{"a": NaN}', "NaN is not JSON"),
                          ('{"a": 1e400}', "too large for a 64-bit float"), ("[1, 2]", "record is a JSON list"),
                          ('{"a": "\\ud800"} x', "broken JSON")):
        damaged = parse_line(line, 3, False)
        assert isinstance(damaged, DamagedLine) and problem in damaged.problem and damaged.line == 3
    cut = parse_line('{"a": ', 7, True)
    assert isinstance(cut, DamagedLine) and cut.cut


def test_a_lone_surrogate_and_deep_nesting_read_as_before() -> None:
    assert parse_line('{"a": "\\ud800"}', 1, False) == {"a": "\ud800"}
    assert parse_line('{"a": "\ud800"}', 1, False) == {"a": "\ud800"}   # not UTF-8: strictjson reads it
    deep = '{"a": ' + "[" * (FAST_MAX_DEPTH + 180) + "]" * (FAST_MAX_DEPTH + 180) + "}"
    assert parse_line(deep, 1, False) == strictjson_or_damaged(deep)


def strictjson_or_damaged(line: str) -> object:
    try:
        return strictjson.loads(line)
    except RecursionError:
        return DamagedLine(1, line, "JSON nested too deeply")


def test_records_read_one_by_one_share_their_key_strings() -> None:
    # A session repeats the same keys on every line: one copy of each keeps 100k records small.
    first, second = (parse_line(json.dumps({"parentUuid": str(i), "message": {"content": "x"}}), i, False)
                     for i in range(2))
    assert isinstance(first, dict) and isinstance(second, dict)
    assert [id(k) for k in first] == [id(k) for k in second]
    assert [id(k) for k in first["message"]] == [id(k) for k in second["message"]]
