"""Reading a Claude Code session fast (issue 51) without reading it differently: lines read by orjson
where it reads them as strictjson does, and by strictjson where it does not (the same record, key order,
number types and damaged-line problem either way), and unanswered calls marked from what the reader's
loop saw as `validate.mark_unanswered` marks them."""

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


# A session of assistant records calling tools, each call answered or not, with a compact boundary
# somewhere (calls may repeat after it): the reader marks unanswered calls from what its loop saw.
def _session(answered: list[list[bool]], boundary_at: int) -> str:
    records: list[dict[str, object]] = []
    for turn, calls in enumerate(answered):
        if turn == boundary_at:
            records.append({"type": "system", "subtype": "compact_boundary", "uuid": f"b{turn}",
                            "content": "Conversation compacted", "compactMetadata": {"trigger": "auto"}})
        records.append({"type": "user", "uuid": f"u{turn}", "message": {"role": "user", "content": f"step {turn}"}})
        ids = [f"t{turn}-{k}" for k in range(len(calls))]
        records.append({"type": "assistant", "uuid": f"a{turn}", "message": {
            "role": "assistant", "id": f"m{turn}",
            "content": [{"type": "tool_use", "id": i, "name": "Bash", "input": {"command": "ls"}} for i in ids]}})
        done = [i for i, ok in zip(ids, calls) if ok]
        if done:
            records.append({"type": "user", "uuid": f"r{turn}", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in done]}})
    return "\n".join(json.dumps(r) for r in records) + "\n"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), max_size=3), min_size=1, max_size=6), st.integers(0, 6))
def test_unanswered_calls_are_marked_as_validate_marks_them(answered: list[list[bool]], boundary_at: int) -> None:
    from dataclasses import replace

    from worksurface.formats import claude_code
    from worksurface.formats.validate import INTERRUPTED, mark_unanswered

    read = claude_code.read(_session(answered, boundary_at)).messages
    bare = [replace(m, meta={k: v for k, v in m.meta.items() if k != INTERRUPTED}) for m in read]
    expected = mark_unanswered(bare)
    assert [m.meta.get(INTERRUPTED) for m in read] == [m.meta.get(INTERRUPTED) for m in expected]
    assert any(not all(c) for c in answered if c) == any(INTERRUPTED in m.meta for m in read)
