"""`check` and `curve`: worksurface's view scored against baselines of the same size, and along a replay."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from probes_samples import PROBES, TRANSCRIPTS, long_session, session
from worksurface import Config, Session
from worksurface.offline.sizing import prepare_once
from worksurface.formats import read_transcript
from worksurface.formats.base import Transcript
from worksurface.core.model import Message, Text, orphans
from worksurface.probes import ProbeError, ProbeSet, derive, score
from worksurface.probes.cut import cut
from worksurface.offline.replay import call_points
from worksurface.probes.check import check
from worksurface.probes.curve import curve
from worksurface.core.tokens import TokenCounter

COUNTER = TokenCounter()


@pytest.fixture
def compactions(monkeypatch):
    """The real compaction (the one every command makes, `prepare_once`), with each call recorded."""
    calls: list = []

    def spy(session, transcript, *, use_usage=True, force=False, instructions=None):
        messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
        calls.append(SimpleNamespace(transcript=transcript, messages=messages, force=force,
                                     config=session.config, use_usage=use_usage))
        return prepare_once(session, transcript, use_usage=use_usage, force=force, instructions=instructions)

    monkeypatch.setattr("worksurface.probes.check.prepare_once", spy)
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
    assert compactions[0].force is True and compactions[0].config == Config()
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
    assert set(data) == {"tokens_before", "methods", "notes", "usage"}
    assert data["usage"]["unit"] == "counted" and data["usage"]["anchor"] is None  # nothing measured
    assert set(data["methods"]["truncate"]) == {"tokens", "retained", "total", "by_category", "forgotten"}
    # The summary quotes the user's messages, so worksurface keeps the request; truncation lost it.
    assert "request-1" not in data["methods"]["worksurface"]["forgotten"]
    assert "request-1" in data["methods"]["truncate"]["forgotten"]


def test_claude_code_baseline_is_its_real_summary_at_the_boundary(compactions):
    messages = with_claude_code_boundary()
    result = check(messages, derive(messages[:18]), baselines=["claude-code"])
    assert [m.id for m in compactions[0].messages] == [m.id for m in messages[:18]]  # cut before "b"
    cc = result.methods["claude-code"]
    assert [m.id for m in cc.view] == ["s0", "cs"]
    assert set(result.methods) == {"worksurface", "claude-code"} and not result.notes


@pytest.mark.skipif(not (TRANSCRIPTS.is_dir() and PROBES.is_dir()), reason="shared data not available")
@pytest.mark.parametrize("session_id, kept", [("258c7280-ae70-4798-800f-63464d01a85d", 21),
                                              ("8463c716-a2ea-4c14-9efa-87158ebd9f20", 27)])
def test_claude_code_real_summary_scores_as_the_labelers_counted(session_id, kept):
    # ../shared/probes/README.md: Claude Code's own summary keeps 21/35 and 27/35 of the hand probes.
    transcript = read_transcript(TRANSCRIPTS / "claude-code" / f"{session_id}.jsonl")
    view = cut(transcript.messages, "boundary").claude_code_view
    assert view is not None and view[-1].meta["is_compact_summary"]
    assert len(score(view, ProbeSet.load(PROBES / f"{session_id[:8]}.json")).retained) == kept


def test_cut_options_and_overrides(compactions):
    messages = with_claude_code_boundary()
    check(messages, [], at="5", window=50_000, target=9_000, baselines=[])
    assert len(compactions[0].messages) == 5
    config = compactions[0].config
    assert (config.window, config.post_compact_target) == (50_000, 9_000)
    for at in ("0", "999", "later"):
        with pytest.raises(ProbeError):
            check(messages, [], at=at)
    with pytest.raises(ProbeError, match="no compact boundary"):
        check(session(), [], at="boundary")
    with pytest.raises(ProbeError, match="unknown baseline"):
        check(session(), [], baselines=["summary"])


def test_queued_inputs_reach_the_compaction_only_once_arrived(compactions):
    transcript = Transcript(session(), "claude-code",
                            queued_inputs=[("a2", "early note"), ("a8", "late note")])
    check(transcript, [], at=6, baselines=[])
    assert compactions[0].transcript.queued_inputs == [("a2", "early note")]


def test_trim_is_skipped_with_a_note_without_langchain(compactions, monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)  # makes the import fail
    result = check(session(), [], baselines=["trim", "truncate"])
    assert set(result.methods) == {"worksurface", "truncate"}
    assert result.notes == [
        "trim: skipped, langchain-core is not installed (pip install 'worksurface[langchain]')"]


class RecordingSession(Session):
    """The real session, recording each replayed call (messages sent, clock) and its config."""

    opened: list = []

    @classmethod
    def open(cls, path=None, **config):
        session = super().open(path, **config)
        session.calls, session.overrides = [], config
        cls.opened.append(session)
        return session

    def prepare(self, messages, usage=None, now=None, **kw):
        self.calls.append((len(messages), now))
        return super().prepare(messages, usage, now, **kw)


# A small window so that a short replay compacts several times: threshold 3,000 tokens.
SMALL = {"window": 4_000, "max_output": 500, "autocompact_buffer": 500}


def test_curve_scores_after_each_compaction_only_what_was_established(monkeypatch):
    monkeypatch.setattr("worksurface.session.session.Session", RecordingSession)  # curve imports it at call time
    messages = session() + long_session(35, seed=2, tag="x", users=False)[1:]
    probes = derive(messages)
    points = curve(messages, probes, **SMALL)
    replay = RecordingSession.opened[-1]
    assert (replay.config.window, replay.config.max_output, replay.config.autocompact_buffer) == tuple(SMALL.values())
    calls = [n for n, _ in replay.calls]
    # One call per assistant turn (not per record of a split turn), and one at the end.
    assert calls == call_points(messages)
    assert len(points) >= 3
    assert {p.messages for p in points} <= set(calls)
    position = {m.id: i for i, m in enumerate(messages)}
    for p in points:
        assert p.score.total == sum(position[q.established_at] < p.messages for q in probes)
        assert p.tokens_after < p.tokens_before
    clock = [now for _, now in replay.calls]
    assert clock == sorted(clock) and len(set(clock)) == len(clock)  # no wall clock, always forward
    again = curve(messages, probes, **SMALL)
    assert [p.to_json() for p in again] == [p.to_json() for p in points]  # deterministic
