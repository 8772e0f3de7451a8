"""worksurface.core.calibration and the sizes built on it: what a request measured versus the text
counted, segmented where the harness cleared, compacted or sent what the transcript does not show."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worksurface import Config, Session
from worksurface.core.calibration import Calibration, fit_measurements, measurements
from worksurface.core.clearing import HARNESS_CLEARING
from worksurface.core.errors import ContextOverflowError
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.core.sizes import measured_usage
from worksurface.core.tokens import TokenCounter
from worksurface.engine.state import StageContext, text_room
from worksurface.formats.base import Transcript
from worksurface.offline.sizing import OVERFLOW_NOTICE, prepare_once

COUNTER = TokenCounter()
# The configured share of the target the text keeps at least (autocompact.text_floor).
TEXT_FLOOR = Config().autocompact.text_floor


def text(i: int, size: int = 100) -> str:
    return " ".join(f"w{i}x{k}" for k in range(size))


class Harness:
    """Builds a transcript whose usage follows measured = fixed + ratio * counted (the request's input:
    the text before its response), with optional clearing and hidden additions."""

    def __init__(self, fixed: int, ratio: float) -> None:
        self.fixed, self.ratio = fixed, ratio
        self.messages: list[Message] = []
        self.hidden = 0  # what the harness sends or has removed that the text does not show

    def turn(self, size: int, *, meta: dict | None = None, records: int = 1) -> None:
        i = len(self.messages)
        self.messages.append(Message(f"u{i}", "user", (Text(text(i, size)),), meta=meta or {}))
        measured = self.fixed + round(self.ratio * COUNTER.messages(self.messages)) + self.hidden
        usage = {"input_tokens": max(0, measured), "output_tokens": 5}
        for r in range(records):  # one response written as several records, as Claude Code does
            self.messages.append(Message(f"a{i}-{r}", "assistant", (Text(text(i + 1000 + r, 20)),),
                                         meta={"usage": usage, "api_message_id": f"msg{i}"}))


def test_a_request_is_placed_before_its_response_and_counted_once() -> None:
    h = Harness(20_000, 1.3)
    for _ in range(6):
        h.turn(400, records=3)
    found = measurements(h.messages, COUNTER)
    assert len(found) == 6  # three records of one response are one measurement
    first_user = COUNTER.message(h.messages[0])
    assert found[0].counted == first_user and found[0].index == 1
    fit = fit_measurements(h.messages, COUNTER)
    assert fit is not None
    assert abs(fit.calibration.ratio - 1.3) < 0.01 and abs(fit.calibration.fixed - 20_000) < 10
    assert max(abs(e) for e in fit.errors()) < 0.001


def test_harness_clearing_and_drops_start_segments_and_the_fixed_part_stays_the_first_requests() -> None:
    # The regression: one line through every point made the fixed part 67k on a session whose first
    # request measured 28k, because harness-side clearing dropped the measurement while the text grew.
    h = Harness(28_000, 1.2)
    h.turn(30)
    for _ in range(10):
        h.turn(3_000)
    h.hidden = -45_000  # Claude Code cleared old tool results (marked)...
    h.turn(300, meta={"harness_clearing": {"trigger": "auto", "pre_tokens": 65_000, "tokens_saved": 45_000,
                                           "cleared_call_ids": []}})
    for _ in range(6):
        h.turn(3_000)
    h.hidden -= 20_000  # ...and later cleared again without saying so (another harness)
    h.turn(300)
    for _ in range(6):
        h.turn(3_000)
    fit = fit_measurements(h.messages, COUNTER)
    assert fit is not None
    cal = fit.calibration
    assert abs(cal.fixed - 28_000) < 100 and abs(cal.ratio - 1.2) < 0.02
    assert cal.segments == 3 and list(fit.starts)[1:] == [11, 18]
    assert max(abs(e) for e in fit.errors()) < 0.01
    assert fit.measurements[11].marked and not fit.measurements[18].marked


def test_a_clearing_marked_on_a_measured_response_starts_the_segment_after_it() -> None:
    # The reader marks a clearing on the message its record follows: when that is a response, its own
    # usage was measured before the clearing and belongs to the segment that ends there.
    h = Harness(20_000, 1.1)
    h.turn(30)
    for _ in range(6):
        h.turn(3_000)
    last = h.messages[-1]
    h.messages[-1] = dataclasses.replace(last, meta={**last.meta, HARNESS_CLEARING: {
        "trigger": "auto", "pre_tokens": None, "tokens_saved": 15_000, "cleared_call_ids": []}})
    h.hidden = -15_000
    for _ in range(6):
        h.turn(3_000)
    found = measurements(h.messages, COUNTER)
    assert [m.marked for m in found] == [False] * 7 + [True] + [False] * 5
    fit = fit_measurements(h.messages, COUNTER)
    assert fit is not None and list(fit.starts) == [0, 7]
    assert max(abs(e) for e in fit.errors()) < 0.01


def test_two_responses_measuring_the_same_input_are_two_requests() -> None:
    # Records of one response share its id and are one measurement; two responses with their own ids
    # are two, even with equal usage (a harness recording only a constant uncached input).
    h = Harness(0, 1.0)
    for _ in range(4):
        h.turn(1_500, records=2)
    constant = {"input_tokens": 9, "output_tokens": 4}
    h.messages = [dataclasses.replace(m, meta={**m.meta, "usage": constant}) if m.role == "assistant" else m
                  for m in h.messages]
    found = measurements(h.messages, COUNTER)
    assert len(found) == 4
    assert [m.plausible for m in found] == [False] * 4


def test_content_the_text_does_not_show_starts_a_segment_instead_of_bending_the_ratio() -> None:
    # A Codex rollout's web searches (or thinking sent whole but stored summarized): measured tokens
    # the transcript's text does not show. The ratio stays the tokenizer's, the fixed part the first's.
    h = Harness(9_000, 1.05)
    h.turn(50)
    for k in range(12):
        if k in (3, 7):
            h.hidden += 15_000
        h.turn(2_000)
    cal = fit_measurements(h.messages, COUNTER).calibration  # type: ignore[union-attr]
    assert abs(cal.ratio - 1.05) < 0.02 and abs(cal.fixed - 9_000) < 100 and cal.segments == 3


def test_an_implausible_measurement_is_refused_and_named() -> None:
    # Only the uncached input recorded: a few tokens for a context of thousands.
    messages = [Message("u0", "user", (Text(text(0, 3_000)),)),
                Message("a0", "assistant", (Text("ok"),), meta={"usage": {"input_tokens": 8, "output_tokens": 3}}),
                Message("u1", "user", (Text(text(1, 300)),))]
    usage = measured_usage(messages, COUNTER)
    assert usage.anchor is None and usage.fit is None and len(usage.refused) == 1
    notice = usage.notices("session.jsonl")[0]
    assert notice.startswith("session.jsonl: the usage recorded at message a0") and "not used" in notice


def forced(messages: list[Message], target: int | None = None, path: str = "t.jsonl", text_floor_tokens: int | None = None):
    config = Config().with_overrides(post_compact_target_tokens=target,
                                     autocompact=None if text_floor_tokens is None else
                                     {"text_floor_tokens": text_floor_tokens})
    with Session.open(None, config=config) as session:
        return prepare_once(session, Transcript(messages, "claude-code", path), force=True)


def test_regression_uncached_usage_never_gives_a_negative_size() -> None:
    # Recorded usage far under worksurface's own count used to size the compacted view negative
    # (the status bar refused `tokens_used -1607`, naming no file).
    messages: list[Message] = []
    for i in range(30):
        messages.append(Message(f"u{i}", "user", (Text(text(i, 400)),)))
        messages.append(Message(f"a{i}", "assistant", (Text("done"),),
                                meta={"usage": {"input_tokens": 10 + i, "output_tokens": 4}}))
    prepared = forced(messages)
    sizes = prepared.report.sizes
    assert prepared.report.boundary is not None
    assert sizes["unit"] == "counted" and sizes["after"]["measured"] == sizes["after"]["counted"] > 0
    assert any(n.startswith("t.jsonl: the usage recorded at message") for n in prepared.report.notices)
    # A harness passing such a figure itself gets the same: not used, and said.
    with Session.open(None) as session:
        again = session.prepare(messages, usage=("a29", 39), force=True)
    assert any("cannot be the whole request" in n for n in again.report.notices)
    assert again.report.sizes["unit"] == "counted"


def test_regression_a_measured_drop_never_sizes_the_compacted_view_negative() -> None:
    # After harness-side clearing the measured figure is under the text worksurface counts; the
    # offset taken there (-16,658) used to be carried into the compacted view and the status bar.
    h = Harness(2_000, 1.0)
    for _ in range(12):
        h.turn(1_500)
    h.hidden = -16_658
    h.turn(200)
    prepared = forced(h.messages, target=10_000)  # a compacted view smaller than what was cleared
    sizes = prepared.report.sizes
    assert prepared.report.boundary is not None
    assert sizes["after"]["measured"] >= sizes["after"]["counted"] > 0  # the fixed part stays, nothing less
    status = [m.text for m in prepared.messages if m.origin.value == "status"]
    used = re.search(r'tokens-used="([^"]+)"', status[-1])
    assert used is not None and not used.group(1).startswith("-")


def test_regression_a_result_budgeted_away_is_sized_by_the_calibration_not_the_old_offset() -> None:
    # The usage offset measured over a huge result (its text 20% under the count here) used to be
    # carried to the view the budget left: a 200 MB result's view was reported measured at 0 tokens,
    # and every later stage judged it so.
    h = Harness(2_000, 0.8)
    for _ in range(5):
        h.turn(1_500)
    call = {"usage": {"input_tokens": h.fixed + round(h.ratio * COUNTER.messages(h.messages)), "output_tokens": 5},
            "api_message_id": "msg-call"}
    h.messages.append(Message("a-call", "assistant", (ToolCall("c1", "Bash", {"command": "cat build.log"}),), meta=call))
    h.messages.append(Message("u-res", "user", (ToolResult("c1", "\n".join(f"line {k}: {text(k, 12)}" for k in range(1_500))),)))
    last = {"usage": {"input_tokens": h.fixed + round(h.ratio * COUNTER.messages(h.messages)), "output_tokens": 5},
            "api_message_id": "msg-last"}
    h.messages += [Message("a-last", "assistant", (Text("the log is long"),), meta=last),
                   Message("u-last", "user", (Text("what failed?"),))]
    with Session.open(None) as session:
        prepared = prepare_once(session, Transcript(h.messages, "claude-code", "t.jsonl"))
    sizes, budget = prepared.report.sizes, next(s for s in prepared.report.stages if s.name == "budget")
    assert prepared.report.boundary is None and budget.skipped is None
    assert sizes["after"]["counted"] * 2 < sizes["before"]["counted"]  # the budget took out most of the view
    expected = h.fixed + h.ratio * sizes["after"]["counted"]
    assert abs(sizes["after"]["measured"] - expected) < 0.02 * expected
    assert abs(budget.tokens_after - expected) < 0.05 * expected  # what the later stages judged


def test_the_floor_keeps_a_summary_when_the_fixed_part_fills_the_target() -> None:
    h = Harness(42_000, 1.3)  # FSM1-like: system prompt and tools alone are over the 40k target
    h.turn(30)
    for _ in range(40):
        h.turn(2_500)
    prepared = forced(h.messages)
    boundary = prepared.report.boundary
    assert boundary is not None and boundary["text_floor"]["room"] == 0
    floor = boundary["text_floor"]["floor"]
    assert floor == int(TEXT_FLOOR * 40_000 / boundary_ratio(prepared)) and boundary["text_budget"] >= floor
    assert boundary["summary_budget"] >= 0.5 * floor
    assert any("kept the floor" in n for n in prepared.report.notices)
    assert prepared.report.sizes["after"]["counted"] > 0.5 * floor


def test_a_view_the_fixed_part_keeps_over_the_threshold_is_returned_offline_and_refused_live() -> None:
    """Claude Code's compaction agent records the parent's whole context as its usage (167k measured
    over 6k of text): no compaction of its messages gets under the threshold. Offline the compacted
    view comes back with a notice (the file is still compacted and written); a live call raises."""
    h = Harness(170_000, 1.0)
    for _ in range(6):
        h.turn(1_000)
    prepared = forced(h.messages)
    overflow = [n for n in prepared.report.notices if n.startswith(OVERFLOW_NOTICE)]
    assert len(overflow) == 1 and "threshold 167000" in overflow[0]
    assert prepared.report.boundary is not None and prepared.messages
    assert prepared.report.sizes["after"]["measured"] > Config().threshold
    with Session.open(None) as live, pytest.raises(ContextOverflowError) as info:
        live.prepare(h.messages, usage=h.fixed + COUNTER.messages(h.messages), force=True)
    assert info.value.prepared is not None and info.value.tokens > info.value.threshold


def boundary_ratio(prepared) -> float:
    return prepared.report.sizes["calibration"]["ratio"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 200_000), st.floats(0.01, 10.0), st.integers(500, 400_000), st.floats(0.0, 1.0),
       st.integers(0, 100_000))
def test_text_room_never_under_the_floor_and_sizes_never_negative(fixed, ratio, target, share, counted) -> None:
    config = Config(post_compact_target_tokens=target).model_copy(
        update={"autocompact": Config().autocompact.model_copy(update={"text_floor": share})})
    ctx = StageContext(config=config, counter=COUNTER, artifacts=None, now=0.0,  # type: ignore[arg-type]
                       calibration=Calibration(fixed, ratio, 2))
    room = text_room(ctx)
    share_floor = int(share * target / ratio)
    assert room.counted >= room.floor >= share_floor >= 0
    if room.room >= share_floor:  # a target the fixed part leaves its share in: met as before
        assert room.floor == share_floor
    else:  # out of reach: the text keeps text_floor_tokens of the target too
        assert room.floor == max(share_floor, int(min(config.autocompact.text_floor_tokens, target) / ratio))
    assert Calibration(fixed, ratio, 2).size(counted) >= 0


def test_a_small_target_the_fixed_part_fills_still_keeps_a_summary() -> None:
    """At --target 4000 a share of the target is 1-2k: the floor keeps text_floor_tokens instead (the
    summary starved to a few hundred tokens on Claude Code sessions whose fixed part is 25k)."""
    h = Harness(25_000, 1.2)
    h.turn(30)
    for _ in range(40):
        h.turn(2_500)
    prepared = forced(h.messages, target=4_000)
    boundary = prepared.report.boundary
    assert boundary is not None and boundary["text_floor"]["room"] == 0
    assert boundary["text_floor"]["floor"] > 0.6 * 4_000 / boundary_ratio(prepared)  # the share alone would be less
    assert boundary["summary_budget"] >= 1_500
    assert any("kept the floor" in n for n in prepared.report.notices)
    # Off, the share alone decides: the summary gets much less.
    starved = forced(h.messages, target=4_000, text_floor_tokens=0).report.boundary
    assert starved is not None and starved["text_floor"]["floor"] == int(TEXT_FLOOR * 4_000 / boundary_ratio(prepared))
    assert starved["summary_budget"] < 0.6 * boundary["summary_budget"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(50, 3_000), st.integers(-5_000, 300_000)), min_size=2, max_size=14))
def test_any_usage_sequence_compacts_with_non_negative_sizes_and_the_floor(steps) -> None:
    messages: list[Message] = []
    for i, (size, measured) in enumerate(steps):
        messages.append(Message(f"u{i}", "user", (Text(text(i, size)),)))
        call = ToolCall(f"c{i}", "Read", {"file_path": f"/r/f{i}.py"})
        messages.append(Message(f"a{i}", "assistant", (call,), meta={"usage": {"input_tokens": measured}}))
        messages.append(Message(f"r{i}", "user", (ToolResult(f"c{i}", text(i + 500, size)),)))
    prepared = forced(messages)
    report = prepared.report
    for part in ("before", "after"):
        assert report.sizes[part]["counted"] >= 0 and report.sizes[part]["measured"] >= 0
    if report.boundary is not None:
        # The floor is a share of the target, which a view already under it caps (a compaction never grows it).
        auto = next(s for s in report.stages if s.name == "autocompact")
        target = min(40_000, auto.tokens_before)
        floor = int(TEXT_FLOOR * target / (report.sizes["calibration"] or {"ratio": 1.0})["ratio"])
        assert report.boundary["text_budget"] >= floor - 1  # the report's ratio is rounded
