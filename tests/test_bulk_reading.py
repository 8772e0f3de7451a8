"""Reading a whole transcript at the speed of reading it (issue 28): records read as json reads them,
with their key strings shared; the cyclic collector paused while reading builds objects without
cycles; a one-shot command leaving the process's collector and memos as it found them; and one
offline command measuring a transcript's usage once for its sizes and its session's calibration."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core import memo, strictjson
from worksurface.core.calibration import MeasurementLog, measurements
from worksurface.core.collector import collection_paused
from worksurface.core.model import Message, Text
from worksurface.core.tokens import TokenCounter
from worksurface.formats import read_transcript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_JSON, st.lists(st.tuples(st.text(max_size=4), _JSON), max_size=4))
def test_a_record_reads_as_json_reads_it_keys_in_order_and_a_repeated_key_its_last_value(value, pairs) -> None:
    text = json.dumps(value)
    assert strictjson.loads(text) == json.loads(text)
    # Written by hand, keys may repeat: json keeps the first key's place and the last value.
    duplicated = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs) + "}"
    read, expected = strictjson.loads(duplicated), json.loads(duplicated)
    assert read == expected and list(read) == list(expected)


def test_records_read_one_by_one_share_their_key_strings() -> None:
    # json makes new key strings for every line; a session repeats the same keys on each of them.
    first, second = (strictjson.loads(json.dumps({"parentUuid": str(i), "message": {"content": "x"}}))
                     for i in range(2))
    assert [id(k) for k in first] == [id(k) for k in second]
    assert [id(k) for k in first["message"]] == [id(k) for k in second["message"]]


def test_the_collector_is_paused_inside_the_block_and_comes_back_as_it_was() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():           # nested: the inner block does not turn it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()           # a caller's own choice is left alone
    finally:
        gc.enable()


def test_reading_a_file_pauses_the_collector_only_while_it_reads(monkeypatch) -> None:
    seen: list[bool] = []
    from worksurface.formats import claude_code

    original = claude_code.read

    def watching(text: str, path: str | None = None):
        seen.append(gc.isenabled())
        return original(text, path)

    monkeypatch.setattr(claude_code, "read", watching)
    transcript = read_transcript(FIXTURES / "small.jsonl")
    assert transcript.messages and seen == [False]
    assert gc.isenabled()


def test_a_command_run_in_process_leaves_the_collector_on_nothing_frozen_and_no_memo_holding_its_input(
        tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["compact", str(FIXTURES / "long.jsonl"), "-o", str(out), "--no-session"])
    assert result.exit_code == 0, result.output
    assert out.read_text().strip()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    held = [entry for recent in _recent_lists() for entry in recent._recent]
    assert held == []
    result = runner.invoke(app, ["inspect", str(FIXTURES / "long.jsonl"), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["messages"] > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


def _recent_lists() -> list[memo.RecentLists]:
    return [obj for obj in gc.get_objects() if isinstance(obj, memo.RecentLists)]


def _transcript(sizes: list[tuple[int, int | None]]) -> list[Message]:
    """User turns of `size` words, each answered by an assistant turn with recorded input usage."""
    out: list[Message] = []
    for i, (size, usage) in enumerate(sizes):
        out.append(Message(f"u{i}", "user", (Text(" ".join(f"w{i}x{k}" for k in range(size))),)))
        meta = {"usage": {"input_tokens": usage, "output_tokens": 3}, "api_message_id": f"m{i}"} if usage else {}
        out.append(Message(f"a{i}", "assistant", (Text(f"answer {i}"),), meta=meta))
    return out


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.one_of(st.none(), st.integers(1, 5_000))), min_size=1, max_size=12),
       st.integers(0, 6))
def test_a_session_log_that_starts_from_a_whole_read_measures_what_a_fresh_log_measures(sizes, extra) -> None:
    counter = TokenCounter()
    messages = _transcript(sizes)
    whole = measurements(messages, counter)          # what the command read for its sizes
    taken = MeasurementLog(counter)
    assert taken.update(messages) == whole           # started from the whole read
    longer = messages + _transcript([(5, 900 + k) for k in range(extra)])
    fresh = MeasurementLog(TokenCounter())
    assert taken.update(longer) == fresh.update(longer)
    assert measurements(messages, counter) == whole  # the remembered log was copied, not extended
