"""Compaction instructions shape the summary and are never replayed after the boundary: not as the
newest user message of the kept tail, not in the rebuilt surface, not as a request a later summary
lists. Both ways of giving them: worksurface's own (`Session.compact(instructions=...)`, the gateway's
context_management) and Claude Code's `/compact <instructions>` command record in the transcript."""

from __future__ import annotations

import cc_records
from builders import words
from worksurface import Session
from worksurface.core.model import Message, Origin, message_text

WORDS = "keep the SQL decisions and drop the test chatter"


def _work(s: cc_records.Session, seed: int, request: str) -> None:
    s.user(request)
    for i in range(4):
        s.call("Read", {"file_path": f"/repo/db/m{seed}{i}.sql"}, words(1_500, seed=seed * 10 + i))
    s.say(f"Step {seed} is done.")


def _outside_the_summary(view: list[Message]) -> str:
    return "\n".join(message_text(m) for m in view if m.origin is not Origin.SUMMARY)


def _summary(view: list[Message]) -> str:
    return "\n".join(message_text(m) for m in view if m.origin is Origin.SUMMARY)


def test_instructions_given_to_the_session_shape_one_summary_only() -> None:
    s = cc_records.Session()
    _work(s, 1, "migrate the orders table to the new schema")
    with Session.open(None) as session:
        first = session.compact(s.transcript(), instructions=WORDS, now=1.0)
        assert f"Focus requested for this summary (verbatim): {WORDS}" in _summary(first.messages)
        assert WORDS not in _outside_the_summary(first.messages)  # not in the tail, not reinjected
        _work(s, 2, "now add the index on orders.customer_id")
        later = session.prepare(s.transcript(), now=2.0)
        assert WORDS not in _outside_the_summary(later.messages)
        second = session.compact(s.transcript(), now=3.0)
        assert second.report.boundary is not None  # a later compaction, without instructions
        assert WORDS not in "\n".join(message_text(m) for m in second.messages)  # nor carried into the next


def test_claude_codes_compact_command_shapes_the_summary_and_leaves_with_the_span() -> None:
    s = cc_records.Session()
    _work(s, 1, "migrate the orders table to the new schema")
    s.command("/compact", WORDS)
    with Session.open(None) as session:
        first = session.compact(s.transcript(), now=1.0)  # no instructions passed: the command's words
        assert f"Focus requested for this summary (verbatim): {WORDS}" in _summary(first.messages)
        assert first.report.boundary is not None and first.report.boundary["instructions_from"]
        rest = _outside_the_summary(first.messages)
        assert WORDS not in rest and "<command-name>/compact" not in rest
        assert first.messages[-1].origin is not Origin.CONVERSATION or first.messages[-1].role == "assistant"
        # The work goes on: the command stays out of the view, and no later summary lists it as a request.
        _work(s, 2, "now add the index on orders.customer_id")
        later = session.prepare(s.transcript(), now=2.0)
        assert "<command-name>/compact" not in _outside_the_summary(later.messages)
        second = session.compact(s.transcript(), now=3.0)
        text = "\n".join(message_text(m) for m in second.messages)
        assert WORDS not in text and "/compact" not in text
        assert "now add the index on orders.customer_id" in text


def test_a_compact_command_the_agent_already_answered_is_history() -> None:
    """Only a command still waiting for its compaction is consumed: one followed by an assistant turn
    (the harness compacted, the work went on) is an ordinary part of the history."""
    s = cc_records.Session()
    _work(s, 1, "migrate the orders table to the new schema")
    s.command("/compact", WORDS)
    s.say("Compacted.")
    _work(s, 2, "now add the index on orders.customer_id")
    with Session.open(None) as session:
        prepared = session.compact(s.transcript(), now=1.0)
    assert prepared.report.boundary is not None and "instructions_from" not in prepared.report.boundary
    assert "Focus requested" not in _summary(prepared.messages)
