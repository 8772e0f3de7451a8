"""Failure rules: summarizer fallback, ContextOverflowError with figures, the circuit breaker."""

from __future__ import annotations

import pytest

from builders import Convo, words
from worksurface import ContextOverflowError, Session
from worksurface.core.errors import SummarizerError
from worksurface.core.model import Message, Text

# Microcompact stays out of the way (a 24k window would scale its trigger down to 12k): these tests
# are about autocompact.
SMALL = dict(window=24_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=8_000,
             microcompact={"trigger_tokens": 100_000})


class Broken:
    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request, counter):
        self.calls += 1
        raise SummarizerError("model unavailable")


class Verbose:
    """Ignores its budget: the core must not accept an over-budget summary."""

    name = "verbose"

    def summarize(self, request, counter):
        from worksurface.summarizers.base import Summary
        text = words(request.budget_tokens * 3)
        return Summary(text, self.name, counter.text(text))


def _big(n: int = 30) -> Convo:
    c = Convo().user("Do the migration. Never drop tables.")
    for i in range(n):
        c.tool("Bash", {"command": f"run {i}"}, words(900, seed=i))
    c.say("continuing")
    return c


@pytest.mark.parametrize("summarizer", [Broken(), Verbose()])
def test_a_failing_summarizer_falls_back_to_structured_and_the_report_says_so(summarizer):
    session = Session.open(None, summarizer=summarizer, **SMALL)
    prepared = session.prepare(_big().messages)
    boundary = prepared.report.boundary
    assert boundary["summarizer"] == "structured"
    assert boundary["fallback"]["from"] == summarizer.name
    assert "Never drop tables." in "\n".join(m.text for m in prepared.messages)


def test_overflow_raises_with_figures_and_the_breaker_stops_after_three():
    c = _big(10)
    session = Session.open(None, **SMALL)
    for attempt in range(3):
        # The newest user message alone is over the threshold: no compaction can fix that.
        c.messages.append(Message(f"huge{attempt}", "user", (Text(words(24_000, seed=attempt)),)))
        with pytest.raises(ContextOverflowError) as info:
            session.prepare(c.messages)
        assert info.value.threshold == session.config.threshold and info.value.tokens > info.value.threshold
        c.say(f"answer {attempt}")
    c.user("one more")
    prepared = session.prepare(c.messages)
    auto = next(s for s in prepared.report.stages if s.name == "autocompact")
    assert "stopped after 3 consecutive failed compactions" in auto.skipped
