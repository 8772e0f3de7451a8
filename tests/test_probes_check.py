"""`check` and `curve`: worksurface's view scored against baselines of the same size, and along a replay."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from probes_samples import long_session, session
from worksurface.formats.base import Transcript
from worksurface.model import Message, Origin, Text, is_user_turn, orphans
from worksurface.probes import ProbeError, derive
from worksurface.probes import check as check_module
from worksurface.probes import curve as curve_module
from worksurface.probes.baselines import split_prefix
from worksurface.probes.check import check
from worksurface.probes.curve import curve
from worksurface.tokens import TokenCounter

COUNTER = TokenCounter()


def stand_in_compact(calls: list):
    """A compaction with the real one's contract: system prefix, a summary quoting the user, newest
    message if it is plain text. Records what it was called with."""
    def compact(transcript, *, force=False, **overrides):
        messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
        calls.append(SimpleNamespace(transcript=transcript, messages=messages, force=force, overrides=overrides))
        prefix, rest = split_prefix(messages)
        said = " | ".join(m.text for m in rest if is_user_turn(m))
        summary = Message("summary", "user", (Text(f"Summary. The user said: {said}"),), Origin.SUMMARY)
        tail = rest[-1:] if rest and not rest[-1].tool_calls and not rest[-1].tool_results else []
        return SimpleNamespace(messages=prefix + [summary] + tail,
                               report=SimpleNamespace(boundary={"epoch": 1}), cache_edits=[])
    return compact


@pytest.fixture
def compactions(monkeypatch):
    calls: list = []
    monkeypatch.setattr(check_module, "compact", stand_in_compact(calls))
    return calls


def with_claude_code_boundary() -> list[Message]:
    """session() compacted by Claude Code after a8: marker, summary, then the work goes on."""
    return session() + [
        Message("b", "system", (Text("Conversation compacted"),), meta={"compact_boundary": True}),
        Message("cs", "user", (Text("This session is being continued. Summary: fixed the login test."),),
                meta={"is_compact_summary": True}),
        Message("a9", "assistant", (Text("Continuing."),)),
    ]


def test_methods_share_worksurface_budget_and_keep_pairs(compactions):
    messages = session() + long_session(40, seed=1, tag="x", users=False)[1:]
    probes = derive(messages)
    result = check(messages, probes)
    ws = result.methods["worksurface"]
    assert compactions[0].force is True and compactions[0].overrides == {}
    assert result.tokens_before == COUNTER.messages(messages)
    assert {"worksurface", "truncate", "mask"} <= set(result.methods)
    for name, m in result.methods.items():
        assert m.tokens == COUNTER.messages(m.view)
        assert m.tokens <= ws.tokens
        assert orphans(m.view) == (set(), set())
        assert m.view[0] == messages[0]
        assert m.score.total == len(probes)
    assert "claude-code: skipped" in result.notes[0]
    data = result.to_json()
    assert set(data) == {"tokens_before", "methods", "notes"}
    assert set(data["methods"]["truncate"]) == {"tokens", "retained", "total", "by_category", "forgotten"}
    # The stand-in quotes every user message, so worksurface keeps the request; truncation lost it.
    assert "request-1" not in data["methods"]["worksurface"]["forgotten"]
    assert "request-1" in data["methods"]["truncate"]["forgotten"]


def test_claude_code_baseline_is_its_real_summary_at_the_boundary(compactions):
    messages = with_claude_code_boundary()
    result = check(messages, derive(messages[:18]), baselines=["claude-code"])
    assert [m.id for m in compactions[0].messages] == [m.id for m in messages[:18]]  # cut before "b"
    cc = result.methods["claude-code"]
    assert [m.id for m in cc.view] == ["s0", "cs"]
    assert set(result.methods) == {"worksurface", "claude-code"} and not result.notes


def test_cut_options_and_overrides(compactions):
    messages = with_claude_code_boundary()
    check(messages, [], at="5", window=50_000, target=9_000, baselines=[])
    assert len(compactions[0].messages) == 5
    assert compactions[0].overrides == {"window": 50_000, "post_compact_target_tokens": 9_000}
    for at in ("0", "999", "later"):
        with pytest.raises(ProbeError):
            check(messages, [], at=at)
    with pytest.raises(ProbeError, match="no compact boundary"):
        check(session(), [], at="boundary")
    with pytest.raises(ProbeError, match="unknown baseline"):
        check(session(), [], baselines=["summary"])


def test_queued_inputs_reach_the_compaction_only_once_arrived(compactions):
    transcript = Transcript(session(), "claude-code", queued_inputs=[("a2", "early note"), ("a8", "late note")])
    check(transcript, [], at=6, baselines=[])
    assert compactions[0].transcript.queued_inputs == [("a2", "early note")]


def test_trim_is_skipped_with_a_note_without_langchain(compactions, monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)  # makes the import fail
    result = check(session(), [], baselines=["trim", "truncate"])
    assert set(result.methods) == {"worksurface", "truncate"}
    assert result.notes == ["trim: skipped, langchain-core is not installed (pip install 'worksurface[langchain]')"]


class StandInSession:
    """Compacts on every third call, keeping the system prefix and the newest message."""

    opened: list = []

    def __init__(self, config):
        self.config, self.calls = config, []

    @classmethod
    def open(cls, path=None, **config):
        session = cls(config)
        cls.opened.append(session)
        return session

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def prepare(self, messages, usage=None, now=None):
        self.calls.append((len(messages), now))
        compacted = len(self.calls) % 3 == 0
        view = messages[:1] + messages[-1:] if compacted else list(messages)
        return SimpleNamespace(messages=view, cache_edits=[], report=SimpleNamespace(
            boundary={"epoch": len(self.calls)} if compacted else None,
            tokens_before=COUNTER.messages(messages), tokens_after=COUNTER.messages(view)))


def test_curve_scores_after_each_compaction_only_what_was_established(monkeypatch):
    monkeypatch.setattr(curve_module, "Session", StandInSession)
    messages = session()
    probes = derive(messages)
    points = curve(messages, probes, window=8_000)
    session_used = StandInSession.opened[-1]
    assert session_used.config == {"window": 8_000}
    calls = [n for n, _ in session_used.calls]
    assert calls == [i for i, m in enumerate(messages) if m.role == "assistant"] + [len(messages)]
    assert [p.messages for p in points] == calls[2::3]
    position = {m.id: i for i, m in enumerate(messages)}
    for p in points:
        assert p.score.total == sum(position[q.established_at] < p.messages for q in probes)
    clock = [now for _, now in session_used.calls]
    assert clock == sorted(clock) and len(set(clock)) == len(clock)  # no wall clock, always forward
    assert points[-1].to_json()["messages"] == points[-1].messages
