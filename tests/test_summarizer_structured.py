"""The structured summarizer: fixed sections in order, verbatim user words, the budget always held."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worksurface.core.errors import ConfigError, SummarizerError
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.summarizers import StructuredSummarizer, Summarizer, SummaryRequest, get_summarizer
from worksurface.summarizers.structured import HEADINGS, TITLE
from worksurface.core.tokens import TokenCounter

from facts_transcripts import CLAUDE_CODE, LONG_SESSIONS, Chat, before_compaction

COUNTER = TokenCounter()
BUDGETS = (200, 500, 1_000, 2_000, 4_000, 8_000)


def summarize(messages, budget=8_000, **kw) -> str:
    summary = StructuredSummarizer().summarize(SummaryRequest(messages=messages, budget_tokens=budget, **kw), COUNTER)
    assert summary.tokens == COUNTER.text(summary.text) <= budget
    assert summary.summarizer == "structured"
    return summary.text


def headings_in_order(text: str) -> bool:
    positions = [text.find(f"\n## {h}\n") for h in HEADINGS]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


def session() -> Chat:
    c = Chat(cwd="/repo")
    c.user("Add CSV export to the report page. Don't change the public API.")
    c.say("Reading the exporter first.")
    c.call("Read", {"file_path": "/repo/src/export.py"}, "     1→def export(rows):\n     2→    return rows\n")
    c.call("Edit", {"file_path": "/repo/src/export.py", "old_string": "return rows", "new_string": "return to_csv(rows)"},
           "The file /repo/src/export.py has been updated successfully.")
    c.bash("pytest -q", "Exit code 1\nFAILED tests/test_export.py::test_csv - NameError: to_csv\n1 failed, 4 passed in 0.3s", True)
    c.call("Edit", {"file_path": "/repo/src/export.py", "old_string": "def export", "new_string": "from .csv import to_csv\n\ndef export"},
           "ok")
    c.bash("pytest -q", "5 passed in 0.3s")
    c.call("TodoWrite", {"todos": [{"content": "CSV export", "status": "completed"},
                                   {"content": "Excel export", "status": "in_progress"}]}, "ok")
    c.user("also add Excel, but use openpyxl not xlsxwriter")
    c.bash("git commit -m 'csv'", "[main 1a2b3c4] add csv export")
    c.say("Now adding the Excel exporter.")
    return c


def test_sections_present_in_order_with_title_first():
    text = summarize(session().messages)
    assert text.startswith(TITLE + "\n")
    assert headings_in_order(text)


def test_user_messages_verbatim_and_latest_request_first():
    c = session()
    c.user("third message: keep the CLI flags as they are")
    text = summarize(c.messages)
    for m in c.messages:
        if m.role == "user" and m.text:
            assert m.text in text
    request = text.split("\n## ")[1]
    assert request.startswith("Active request") and "third message: keep the CLI flags as they are" in request


def test_facts_reach_their_sections():
    text = summarize(session().messages)
    section = {part.split("\n", 1)[0]: part for part in text.split("\n## ")}
    assert "Don't change the public API." in section["Decisions and standing constraints"]
    assert "use openpyxl not xlsxwriter" in section["Decisions and standing constraints"]
    assert "NameError: to_csv" in section["Errors and fixes"] and "fixed by Edit src/export.py" in section["Errors and fixes"]
    assert "5 passed in 0.3s" in section["Progress"] and "[in_progress] Excel export" in section["Progress"]
    assert "1a2b3c4" in section["Progress"] and "1a2b3c4" in section["Identifiers"]
    # A changed file is named with its changes; that it was read too says nothing more.
    assert "- src/export.py (edited)" in section["Files and artifacts"]
    assert "Now adding the Excel exporter." in section["Current work"]
    assert "Continue the in-progress item: Excel export" in text
    assert "cwd: /repo" in section["Identifiers"]


def test_instructions_become_a_focus_note_at_the_top():
    text = summarize(session().messages, instructions="focus on the exporter")
    assert text.split("\n")[1] == "Focus requested for this summary (verbatim): focus on the exporter"


def test_queued_inputs_and_newer_user_turns_in_the_tail():
    c = session()
    tail = [Message("t0", "user", (Text("one more thing"),))]
    text = summarize(c.messages, tail=tail, queued_inputs=[("m1", "typed while busy: skip docs")])
    assert "typed while busy: skip docs" in text
    assert "Newer user messages follow in the kept recent conversation" in text


def test_huge_earlier_user_message_is_elided_and_budget_holds():
    c = Chat()
    c.user("start " + "word " * 6000 + "THE END")
    c.say("ok")
    c.user("now the tests")
    c.say("ok")
    text = summarize(c.messages, budget=1_000)
    assert "start word" in text and "THE END" in text and " […] " in text


def test_the_latest_user_message_is_quoted_whole_or_not_at_all():
    """Never cut in the middle: when it does not fit, the kept tail starts at it instead."""
    c = Chat()
    c.user("start " + "word " * 6000 + "THE END")
    c.say("ok")
    text = summarize(c.messages, budget=1_000)
    assert " […] " not in text and "THE END" not in text


def test_deterministic_same_bytes():
    messages = session().messages
    first = StructuredSummarizer().summarize(SummaryRequest(messages=messages, budget_tokens=600), TokenCounter())
    second = StructuredSummarizer().summarize(SummaryRequest(messages=list(messages), budget_tokens=600), TokenCounter())
    assert first.text == second.text and first.tokens == second.tokens


def test_empty_input_and_tiny_budgets():
    assert headings_in_order(summarize([]))
    for budget in (5, 20, 60):
        summarize(session().messages, budget=budget)
    with pytest.raises(SummarizerError):
        StructuredSummarizer().summarize(SummaryRequest(messages=[], budget_tokens=2), COUNTER)


def test_earlier_structured_summary_is_carried_forward():
    first = session()
    earlier = summarize(first.messages)
    c = Chat(cwd="/repo")
    c.messages.append(Message("sum", "user", (Text("This session is being continued...\n\n" + earlier),),
                              Origin.SUMMARY))
    c.say("Continuing.")
    c.bash("ls", "a")
    text = summarize(c.messages)
    assert "Add CSV export to the report page. Don't change the public API." in text
    assert "also add Excel, but use openpyxl not xlsxwriter" in text.split("## Active request")[1].split("\n## ")[0]
    assert "Carried from the earlier summary:" in text


def test_foreign_summary_is_kept_as_text():
    c = Chat()
    c.messages.append(Message("cc", "user", (Text("Summary: the user wants X."),), meta={"is_compact_summary": True}))
    assert "Earlier summary (verbatim):\nSummary: the user wants X." in summarize(c.messages)


def test_get_summarizer():
    s = get_summarizer("structured")
    assert isinstance(s, StructuredSummarizer) and isinstance(s, Summarizer)
    with pytest.raises(ConfigError):
        get_summarizer("no-such-summarizer")
    with pytest.raises(ConfigError):
        get_summarizer("structured", model="x")


# ---------------------------------------------------------------- real sessions


@pytest.fixture(scope="module")
def real():
    if not CLAUDE_CODE.exists():
        pytest.skip("shared transcripts not available")
    return [before_compaction(name) for name in LONG_SESSIONS]


@pytest.mark.parametrize("budget", BUDGETS)
def test_real_sessions_fit_every_budget(real, budget):
    for messages, queued in real:
        text = summarize(messages, budget=budget, queued_inputs=queued)
        if budget >= 500:
            assert headings_in_order(text)
            assert "Latest user request (verbatim" in text


def test_real_session_keeps_exact_facts(real):
    messages, queued = real[0]
    text = summarize(messages, budget=8_000, queued_inputs=queued)
    section = {part.split("\n", 1)[0]: part for part in text.split("\n## ")}
    assert "From task spec `bd show" in section["Decisions and standing constraints"]
    assert "(rejected) user rejected" in section["Tried and excluded approaches"]
    assert "Latest test run: `" in section["Progress"]
    assert "cwd: /" in section["Identifiers"] and "branches: " in section["Identifiers"]


# ---------------------------------------------------------------- random transcripts

FRAGMENTS = ["don't touch src/", "must", "Error: boom", "3 failed, 1 passed in 0.1s", "commit abc1234",
             "- bullet rule: never push", "```\ncode\n```", "<system-reminder>always lint</system-reminder>",
             "[Request interrupted by user]", "ABC-12", "https://x.io/a", "     1→line", "\n", "## heading", "…"]
TOOLS = ["Read", "Edit", "Write", "Bash", "Grep", "TodoWrite", "Skill", "mcp__srv__do", "str_replace_editor",
         "ExitPlanMode", "weird tool"]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=6).map(" ".join)
inputs = st.fixed_dictionaries({}, optional={
    "file_path": st.sampled_from(["/r/a.py", "b.txt", "/r/AGENTS.md", ""]),
    "command": texts, "old_string": texts, "new_string": texts, "content": texts,
    "todos": st.lists(st.fixed_dictionaries({"content": texts, "status": st.sampled_from(["pending", "in_progress"])}),
                      max_size=3),
    "plan": texts,
})


@st.composite
def transcripts(draw) -> list[Message]:
    messages: list[Message] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "pending"]))
        if kind in ("user", "assistant"):
            messages.append(Message(f"m{n}", kind, (Text(draw(texts)),)))
            continue
        call = ToolCall(f"c{n}", draw(st.sampled_from(TOOLS)), draw(inputs))
        messages.append(Message(f"m{n}", "assistant", (call,)))
        if kind == "call":
            result = ToolResult(call.id, draw(texts), draw(st.booleans()))
            messages.append(Message(f"r{n}", "user", (result,)))
    return messages


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(200, 8_000), st.one_of(st.none(), texts))
def test_random_transcripts_fit_and_are_deterministic(messages, budget, instructions):
    text = summarize(messages, budget=budget, instructions=instructions)
    assert text == summarize(messages, budget=budget, instructions=instructions)
    if budget >= 500:
        assert headings_in_order(text)
