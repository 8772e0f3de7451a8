"""worksurface.core.usage and sizes: the provider-measured size recorded in transcripts, and reports anchored on it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from shared import LONG_CC, needs_shared
from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text
from worksurface.probes.cut import cut, cut_transcript
from worksurface.core.tokens import TokenCounter
from worksurface.core.calibration import Calibration, calibrate
from worksurface.core.sizes import call_usage, measured_usage, view_figures
from worksurface.core.usage import find_usage, message_usage, parse_usage
from worksurface.core.view import live_slice

runner = CliRunner()
# Claude Code's own figure for the context at the real compaction of 8463c716 (compactMetadata.preTokens).
PRE_TOKENS_8463 = 167_731


def msg(i: int, role: str = "assistant", **meta) -> Message:
    return Message(f"m{i}", role, (Text(f"message {i} " * 100),), meta=meta)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "expected"), [
    # Claude Code / Anthropic: cache reads and writes are counted apart from input_tokens.
    ({"input_tokens": 3, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
      "output_tokens": 50}, 1253),
    # OpenAI chat: cached tokens are inside prompt_tokens.
    ({"prompt_tokens": 3486, "completion_tokens": 1135, "prompt_tokens_details": {"cached_tokens": 3000}}, 4621),
    # Codex / Responses: cached_input_tokens is a part of input_tokens, never added.
    ({"input_tokens": 9000, "cached_input_tokens": 8000, "output_tokens": 100, "reasoning_output_tokens": 40}, 9100),
    ({"last_token_usage": {"input_tokens": 700, "cached_input_tokens": 600, "output_tokens": 5}}, 705),
    # Claude Code zeroes the usage of messages it relinks after a compaction: that measured nothing.
    ({"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 0}, None),
    ({"input_tokens": True, "output_tokens": "9"}, None),
    ("12", None),
    ({"total_tokens": 5}, None),
])
def test_parse_usage_shapes(value, expected) -> None:
    parsed = parse_usage(value)
    assert (parsed.context if parsed else None) == expected


def test_usage_inside_raw_records() -> None:
    openhands = {"tool_call_metadata": {"model_response": {"usage": {"prompt_tokens": 10, "completion_tokens": 2}}}}
    codex = {"payload": {"info": {"last_token_usage": {"input_tokens": 40, "output_tokens": 1}}}}
    assert message_usage(msg(1, raw=openhands)).context == 12
    assert message_usage(msg(2, raw=codex)).context == 41
    assert message_usage(msg(3, usage={"input_tokens": 7})).context == 7
    assert message_usage(msg(4)) is None


def test_find_usage_takes_the_newest_measurement() -> None:
    msgs = [msg(0, "user"), msg(1, usage={"input_tokens": 100}), msg(2, "user"),
            msg(3, usage={"input_tokens": 300, "output_tokens": 20}), msg(4, "user")]
    assert find_usage(msgs) == ("m3", 320)
    assert find_usage(msgs[:3]) == ("m1", 100)
    assert find_usage(msgs[:1]) is None


def test_calibration_separates_fixed_part_and_ratio() -> None:
    counter = TokenCounter()
    msgs: list[Message] = []
    for i in range(12):
        msgs.append(msg(2 * i, "user"))
        # A request's input is what came before its response, never the response itself.
        counted = counter.messages(msgs)
        msgs.append(msg(2 * i + 1, usage={"input_tokens": 20_000 + round(1.5 * counted)}))
    fitted = calibrate(msgs, counter)
    assert fitted is not None and abs(fitted.ratio - 1.5) < 0.01 and abs(fitted.fixed - 20_000) < 20
    # One measurement: a constant offset at it.
    single = calibrate(msgs[:2], counter)
    first = counter.message(msgs[0])
    assert single == Calibration(20_000 + round(1.5 * first) - first, 1.0, 1)
    assert calibrate([msg(0, "user")], counter) is None


def test_view_figures_anchor_until_the_view_changes() -> None:
    counter = TokenCounter()
    live = [msg(0, "user"), msg(1, usage={"input_tokens": 5_000, "output_tokens": 300}), msg(2, "user")]
    anchor = find_usage(live)
    same = view_figures(live, live, anchor, counter)
    assert same.measured == 5_300 + counter.message(live[2]) and same.counted == counter.messages(live)
    changed = [live[0].with_blocks([Text("short")]), *live[1:]]
    figures = view_figures(changed, live, anchor, counter, calibrate(live, counter))
    assert figures.measured < same.measured  # calibrated, not the old measurement
    assert view_figures(live, live, None, counter).measured == counter.messages(live)
    assert call_usage(live, live[:2], counter) == ("m1", 5_300)


@needs_shared()
@pytest.mark.skipif(not LONG_CC, reason="long Claude Code sessions not found")
def test_anchored_size_at_the_real_boundary_matches_claude_codes_figure() -> None:
    path = next(p for p in LONG_CC if p.name.startswith("8463c716"))
    t = read_transcript(path)
    before = live_slice(cut_transcript(t, cut(t.messages, "boundary").before).messages)
    counter = TokenCounter()
    figures = view_figures(before, before, measured_usage(before, counter).anchor, counter)
    assert abs(figures.measured - PRE_TOKENS_8463) < PRE_TOKENS_8463 * 0.001
    assert figures.counted < PRE_TOKENS_8463 * 0.7  # what text counting alone saw


@needs_shared()
@pytest.mark.skipif(not LONG_CC, reason="long Claude Code sessions not found")
def test_compact_reports_both_figures_and_no_usage_counts_text(tmp_path) -> None:
    path = next(p for p in LONG_CC if p.name.startswith("8463c716"))
    args = ["compact", str(path), "--at", "boundary", "--force", "--json", "-o"]
    anchored = json.loads(runner.invoke(app, [*args, str(tmp_path / "a.jsonl")]).stdout)["sizes"]
    plain = json.loads(runner.invoke(app, [*args, str(tmp_path / "p.jsonl"), "--no-usage"]).stdout)["sizes"]
    assert anchored["unit"] == "measured" and plain["unit"] == "counted"
    assert anchored["anchor"]["tokens"] > anchored["before"]["counted"]
    assert abs(anchored["before"]["measured"] - PRE_TOKENS_8463) < 200
    assert anchored["before"]["counted"] == plain["before"]["counted"]
    assert plain["anchor"] is None and plain["calibration"] is None
    assert plain["before"]["measured"] == plain["before"]["counted"]
    # Sized on the measured figure: the fixed part (system prompt, tools) leaves less room for text.
    assert anchored["after"]["counted"] < plain["after"]["counted"]
    assert anchored["after"]["measured"] > anchored["after"]["counted"]
    assert anchored["calibration"]["fixed"] > 20_000


def test_a_view_the_provider_measures_under_the_threshold_is_not_an_overflow() -> None:
    """The stages size the view with the provider's measurement (the usage offset); the overflow check
    after them must too: a view worksurface's own count puts over the threshold, but the provider
    measures well under it, is no failed compaction (no error, and the breaker stays closed)."""
    from worksurface import Session

    session = Session.open(None, window=20000)
    words = "the module reads its input and returns what the caller asked for".split()
    messages = [Message(f"m{i}", "user" if i % 2 == 0 else "assistant",
                        (Text(" ".join(words[(i + k) % len(words)] for k in range(900))),)) for i in range(20)]
    counted = session.counter.messages(messages)
    assert counted > session.config.threshold, counted
    # What the provider reported for this view: well under the threshold, and still a plausible whole
    # request (a figure under half the counted text is refused as only the uncached input).
    measured = counted * 6 // 10
    for _ in range(3):
        prepared = session.prepare(messages, usage=(messages[-1].id, measured))
        assert prepared.report.boundary is None
        messages = messages + [Message(f"m{len(messages)}", "user", (Text("go on"),))]
    assert session.store.get_meta("consecutive_failures", 0) == 0
