"""Stage outcomes are typed values (issue 53): a caller decides on `Skipped(kind, reason)` or
`Compacted(epoch, ...)`, never on a reason's text, and the report's JSON keeps the text as it was."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from builders import Convo, words
from worksurface import ContextOverflowError, Session
from worksurface.core.model import Message, Text
from worksurface.engine.state import Compacted, SkipKind, Skipped, StageReport
from worksurface.session.report import NOT_RUN, PrepareReport, breaker_open

SMALL = dict(window=24_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=8_000,
             microcompact={"trigger_tokens": 100_000})


def _big(n: int = 30) -> Convo:
    c = Convo().user("Do the migration. Never drop tables.")
    for i in range(n):
        c.tool("Bash", {"command": f"run {i}"}, words(900, seed=i))
    c.say("continuing")
    return c


def _stage(prepared, name: str) -> StageReport:
    return next(s for s in prepared.report.stages if s.name == name)


@given(st.sampled_from(list(SkipKind)), st.text(max_size=40))
def test_the_breaker_is_read_from_the_kind_whatever_the_reason_says(kind: SkipKind, reason: str) -> None:
    report = PrepareReport(10, 10, 10, [StageReport("autocompact", 10, 10, outcome=Skipped(kind, reason))])
    assert breaker_open(report) is (kind is SkipKind.BREAKER_OPEN)
    assert report.stages[0].skipped == reason  # the text the JSON report shows


def test_a_report_made_with_only_a_reason_is_an_unspecified_skip_not_a_breaker() -> None:
    r = StageReport("autocompact", 5, 5, skipped="stopped after 3 consecutive failed compactions")
    assert r.outcome == Skipped(SkipKind.UNSPECIFIED, "stopped after 3 consecutive failed compactions")
    assert not breaker_open(PrepareReport(5, 5, 5, [r]))


def test_the_json_of_a_report_has_the_text_and_no_outcome() -> None:
    r = StageReport("files", 1, 2, items=1, ms=1.23456, outcome=Skipped(SkipKind.NOTHING_TO_DO, "nothing to restore"))
    assert r.to_json() == {"name": "files", "tokens_before": 1, "tokens_after": 2, "items": 1, "ms": 1.235,
                           "skipped": "nothing to restore", "details": {}}
    json.dumps(r.to_json())


def test_a_compaction_reports_compacted_with_its_boundary_s_epoch_and_sizes() -> None:
    prepared = Session.open(None, **SMALL).prepare(_big().messages)
    auto = _stage(prepared, "autocompact")
    boundary = prepared.report.boundary
    assert boundary is not None and isinstance(auto.outcome, Compacted) and auto.skipped is None
    assert (auto.outcome.epoch, auto.outcome.reason, auto.outcome.pre_tokens, auto.outcome.post_tokens) == (
        boundary["epoch"], boundary["reason"], boundary["pre_tokens"], boundary["post_tokens"])


def test_a_quiet_call_and_a_repeat_say_why_as_kinds() -> None:
    c = Convo().user("hello").say("hi").user("list the files")
    session = Session.open(None, **SMALL)
    first = session.prepare(c.messages, now=1.0)
    assert _stage(first, "autocompact").skipped_as(SkipKind.NOT_RUN) and _stage(first, "autocompact").skipped == NOT_RUN
    again = session.prepare(c.messages, now=2.0)
    assert all(s.skipped_as(SkipKind.NOTHING_NEW) for s in again.report.stages)


def test_the_open_breaker_is_a_kind_and_stops_the_overflow_error() -> None:
    c = _big(10)
    session = Session.open(None, **SMALL)
    for attempt in range(3):
        c.messages.append(Message(f"huge{attempt}", "user", (Text(words(24_000, seed=attempt)),)))
        with pytest.raises(ContextOverflowError):
            session.prepare(c.messages)
        c.say(f"answer {attempt}")
    c.user("one more")
    prepared = session.prepare(c.messages)  # over the threshold, yet no error: the breaker is open
    assert _stage(prepared, "autocompact").skipped_as(SkipKind.BREAKER_OPEN) and breaker_open(prepared.report)
    assert any("autocompact is paused after 3 failed compactions" in n for n in prepared.report.notices)
