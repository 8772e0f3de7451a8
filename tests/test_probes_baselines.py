"""Baselines: each keeps the system prefix, fits the budget and never splits a tool call from its result."""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes_samples import TRANSCRIPTS, long_session, session
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text, orphans
from worksurface.probes.baselines import BASELINES, MASK_KEEP_TURNS, clean_starts, codex, mask, truncate
from worksurface.core.tokens import TokenCounter

COUNTER = TokenCounter()
NO_LANGCHAIN = importlib.util.find_spec("langchain_core") is None
# The baselines that keep a suffix of the transcript; `codex` keeps a selection (the user's messages).
NAMES = [n for n in BASELINES if n not in ("trim", "codex")] + [
    pytest.param("trim", marks=pytest.mark.skipif(NO_LANGCHAIN, reason="langchain-core not installed"))]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(rounds=st.integers(5, 60), seed=st.integers(0, 10_000), share=st.floats(0.05, 1.2))
def test_budget_prefix_and_pairs(name, rounds, seed, share):
    messages = long_session(rounds, seed)
    budget = int(COUNTER.messages(messages) * share)
    view = BASELINES[name](messages, budget, COUNTER)
    assert view[0] is messages[0]  # the system prefix is kept as is
    assert COUNTER.messages(view) <= max(budget, COUNTER.messages(messages[:1]))
    assert orphans(view) == (set(), set())
    # Nothing reordered or invented: the view is the prefix plus a suffix (masked for `mask`).
    tail_ids = [m.id for m in view[1:]]
    assert tail_ids == [m.id for m in messages[len(messages) - len(tail_ids):]]


@pytest.mark.parametrize("name", NAMES)
def test_a_budget_that_holds_everything_keeps_everything(name):
    messages = session()
    view = BASELINES[name](messages, 10**6, COUNTER)
    assert [m.id for m in view] == [m.id for m in messages]


def test_truncate_never_starts_between_parallel_calls_and_their_results():
    messages = session()
    a6 = next(i for i, m in enumerate(messages) if m.id == "a6")
    # A budget that would fit from a7 on (a7, r6, r7, a8) but not a6: r6 would lose its call.
    budget = COUNTER.messages(messages[:1]) + COUNTER.messages(messages[a6 + 1:])
    view = truncate(messages, budget, COUNTER)
    assert [m.id for m in view] == ["s0", "a8"]
    assert clean_starts(messages[1:])[a6 - 1] and not clean_starts(messages[1:])[a6]


def test_mask_replaces_only_old_observations():
    messages = long_session(80, seed=3)
    view = mask(messages, 10**7, COUNTER)
    turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
    horizon = turns[-MASK_KEEP_TURNS]
    for before, after in zip(messages, view):
        if before.tool_results and messages.index(before) < horizon:
            assert after.tool_results[0].content.startswith("[Old tool output omitted:")
            assert after.tool_results[0].call_id == before.tool_results[0].call_id
        else:
            assert after == before
    assert COUNTER.messages(view) < COUNTER.messages(messages)


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="shared transcripts not available")
@pytest.mark.parametrize("name", NAMES)
def test_on_a_real_claude_code_session(name):
    path = TRANSCRIPTS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    messages = read_transcript(path).messages
    before = messages[:next(i for i, m in enumerate(messages) if m.meta.get("compact_boundary"))]
    for budget in (5_000, 20_000, 40_000):
        view = BASELINES[name](before, budget, COUNTER)
        assert 0.5 * budget < COUNTER.messages(view) <= budget
        assert orphans(view) == (set(), set())


@settings(max_examples=25, deadline=None)
@given(rounds=st.integers(5, 60), seed=st.integers(0, 10_000), share=st.floats(0.05, 1.2))
def test_codex_keeps_the_newest_user_messages_in_order_within_the_budget(rounds, seed, share):
    messages = long_session(rounds, seed)
    budget = int(COUNTER.messages(messages) * share)
    view = codex(messages, budget, COUNTER)
    assert view[0] is messages[0]
    assert COUNTER.messages(view) <= max(budget, COUNTER.messages(messages[:1]))
    users = [m for m in messages if m.role == "user" and not m.tool_results]
    kept = view[1:]
    assert all(not m.tool_results and m.role == "user" for m in kept)
    # Newest first: what is kept is the newest run of user messages (the oldest of them possibly cut).
    assert [m.id for m in kept] == [m.id for m in users[len(users) - len(kept):]]
    assert all(m == u for m, u in zip(kept[1:], users[len(users) - len(kept) + 1:]))
    if kept and kept[0] != users[len(users) - len(kept)]:
        assert users[len(users) - len(kept)].text.startswith(kept[0].text)


def test_codex_never_keeps_tool_output_or_harness_notes():
    messages = session() + [Message("n1", "user", (Text("<task-notification>\n<task-id>b1</task-id>\n"
                                                             "</task-notification>"),)),
                            Message("n2", "user", (Text("[Request interrupted by user]"),))]
    view = codex(messages, 10**6, COUNTER)
    assert [m.id for m in view] == ["s0", "u1", "u2"]
    assert orphans(view) == (set(), set())
