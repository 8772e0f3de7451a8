"""The progress reader: each tool result is read once, when its message arrives, for test runs, todo
lists, tracker changes and git state; the ledger folds its readings and the status bar shows them, so
neither parses a result itself, and a fact that spans calls does not depend on where a fold cut."""

from __future__ import annotations

from typing import Any

import pytest

from builders import Convo
from worksurface import Session
from worksurface.facts import testsummary
from worksurface.facts.reading import ProgressReader, read_all
from worksurface.ledger import Ledger
from worksurface.status import derive_events, reduce


def _spanning() -> Convo:
    """Facts whose parts come calls apart: a background test run read later, a todo list built item
    by item, a tracker issue created and then closed."""
    c = Convo()
    c.user("Make the parser handle empty files, and keep the plan in tasks.")
    c.tool("TaskCreate", {"subject": "handle empty files", "description": "the parser crashes on b''"},
           "Task #1 created successfully: handle empty files")
    c.tool("Bash", {"command": "pytest -q tests/", "run_in_background": True},
           "Command running in background with ID: b7f3a1")
    c.tool("Bash", {"command": "bd create 'Empty files crash the parser'"},
           "✓ Created issue: ws-12\n  Title: Empty files crash the parser")
    c.say("Waiting for the tests.")
    c.tool("BashOutput", {"bash_id": "b7f3a1"}, "....F\nFAILED tests/test_parse.py::test_empty\n1 failed, 4 passed in 0.52s")
    c.tool("TaskUpdate", {"taskId": "1", "status": "in_progress"}, "Updated task #1 status")
    c.tool("Bash", {"command": "git status --short"}, " M src/parse.py\n")
    c.tool("Bash", {"command": "bd close ws-12"}, "✓ Closed ws-12: Empty files crash the parser")
    return c


def _by_windows(messages: list, cuts: list[int]) -> Ledger:
    ledger = Ledger()
    for n in cuts + [len(messages)]:
        ledger.update(messages[:n])
        ledger.settle()
    return ledger


@pytest.mark.parametrize("cuts", [[4], [5, 9], [3, 6, 12], list(range(1, 17))])
def test_facts_that_span_calls_are_the_same_however_the_folds_cut_the_transcript(cuts: list[int]) -> None:
    messages = _spanning().messages
    whole = Ledger.over(messages).upto()
    cut = _by_windows(messages, cuts).upto()
    assert [(r.command, r.failed, r.passed) for r in whole.test_runs()] == [("pytest -q tests/", 1, 4)]
    assert cut.test_runs() == whole.test_runs()
    todo = whole.todo_state()
    assert todo is not None and [(i.text, i.status) for i in todo.items] == [("handle empty files", "in_progress")]
    assert cut.todo_state() == todo
    assert [u.command for u in whole.tracker_updates()] == ["bd create 'Empty files crash the parser'", "bd close ws-12"]
    assert cut.tracker_updates() == whole.tracker_updates()


@pytest.mark.parametrize("cuts", [[], [7], list(range(2, 40, 3))])
def test_identifier_lists_are_capped_alike_however_the_folds_cut_the_transcript(cuts: list[int]) -> None:
    # The first fold's lists went uncapped, so a ledger folded at once held more branches than one
    # folded call by call (a field session: 14 test results against 12).
    c = Convo().user("Try each feature branch in turn.")
    for n in range(18):
        c.tool("Bash", {"command": f"git checkout -b feature-{n}"}, f"Switched to a new branch 'feature-{n}'")
    messages = c.messages
    branches = _by_windows(messages, cuts).upto().identifiers().branches
    assert branches == Ledger.over(messages).upto().identifiers().branches
    assert len(branches) == 12 and branches[0] == "feature-17"  # the newest, capped


def test_the_status_bar_shows_what_the_ledger_holds() -> None:
    messages = _spanning().messages
    with Session.open(None) as session:
        for n in range(2, len(messages) + 1, 2):
            session.prepare(messages[:n])
    snapshot = session.status_bar.derived.reducer.snapshot()
    view = session.ledger.upto()
    run = view.test_runs()[-1]
    verification = snapshot.sections["verification"][run.framework].value
    assert (verification["passed"], verification["failed"]) == (run.passed, run.failed)
    assert snapshot.sections["repository"]["changed_files"].value == ["src/parse.py"]
    # The agent keeps its own list with task tools; closing a tracked issue is a change it made, so
    # the tracker's issues become the list, as the tracker updates the ledger holds say.
    assert snapshot.sections["task"]["todos"].value == [{"content": "ws-12: Empty files crash the parser",
                                                         "status": "completed"}]
    assert snapshot == reduce(derive_events(messages))


def test_a_session_parses_each_result_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    observe = testsummary.TestRunWatcher.observe

    def counted(self: Any, call: Any, output: str) -> Any:
        seen.append(call.id)
        return observe(self, call, output)

    monkeypatch.setattr(testsummary.TestRunWatcher, "observe", counted)
    c = _spanning()
    with Session.open(None) as session:
        for n in range(2, len(c.messages) + 1, 2):
            session.prepare(c.messages[:n])
        session.ledger.settle()
    assert session.ledger.upto().test_runs()  # the fold has read them
    results = [r.call_id for m in c.messages for r in m.tool_results]
    assert seen == results  # the status bar and the fold share one reading of each


def test_a_reader_reads_each_message_once_in_order_and_gives_its_facts_again() -> None:
    messages = _spanning().messages
    reader = ProgressReader()
    firsts = [reader.read(m, i) for i, m in enumerate(messages)]
    assert [reader.at(i) for i in range(len(messages))] == firsts
    assert reader.between(0, len(messages)) == read_all(messages)
    assert reader.between(9, 11) == [f for fs in firsts[9:11] for f in fs.results]
    # A result with no call before it says nothing (nothing names what produced it).
    assert ProgressReader().read(messages[10], 10).results == ()


def test_a_message_carries_its_measured_context_and_recorded_todo_list_and_a_plain_one_nothing() -> None:
    from worksurface.core.model import Message, Text
    from worksurface.facts.reading import NOTHING
    measured = Message("a1", "assistant", (Text("On it."),),
                       meta={"usage": {"input_tokens": 10, "cache_read_input_tokens": 1200, "output_tokens": 5},
                             "todos": [{"content": "add retries", "status": "in_progress"}]})
    reader = ProgressReader()
    progress = reader.read(measured, 0)
    # The context the request and its answer fill, as the one usage parser reads it (Anthropic's cache
    # reads count as input).
    assert progress.context_tokens == 10 + 1200 + 5
    assert progress.todos is not None and [(t.text, t.status) for t in progress.todos] == [("add retries", "in_progress")]
    zeroed = Message("a2", "assistant", (Text("Done."),), meta={"usage": {"input_tokens": 0, "output_tokens": 0}})
    assert reader.read(zeroed, 1) is NOTHING and reader.at(1) is NOTHING
