"""One parser per kind of fact (issue 11 item 2): test runs, tracker updates and todo items are read
once, by one parser, and the status bar and the summary agree on every shared transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared import TRANSCRIPTS, needs_shared
from worksurface import facts
from worksurface.facts.testsummary import TestRunWatcher, is_test_command, parse_test_output
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.status import VerificationFinished, derive_events, reduce
from worksurface.status.events import TaskUpdated

SUFFIXES = (".jsonl", ".json", ".traj", ".md")


def shared_transcripts() -> list[Path]:
    if not TRANSCRIPTS.exists():
        return []
    found = [p for p in sorted(TRANSCRIPTS.rglob("*")) if p.is_file() and p.suffix in SUFFIXES
             and p.name not in ("README.md", "manifest.json") and "subagents" not in p.parts
             and p.parent.name != "website_examples"]
    return found


FILES = shared_transcripts()


@needs_shared()
def test_every_format_is_covered():
    formats = {read_transcript(p).format for p in FILES}
    assert {"claude-code", "swe-agent", "openhands", "mini-swe-agent", "aider"} <= formats


@needs_shared()
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_status_bar_and_summary_read_the_same_test_runs_todos_and_tracker(path: Path):
    messages = list(read_transcript(path).messages)
    events = derive_events(messages)
    bar = [(e.runner, e.passed, e.failed, e.failing) for e in events if isinstance(e, VerificationFinished)]
    runs = facts.test_runs(messages)
    assert bar == [(r.framework, r.passed, r.failed, r.failing) for r in runs]
    snap = reduce(events)
    if runs:
        last = runs[-1]
        shown = snap.sections["verification"][last.framework].value
        assert (shown["passed"], shown["failed"]) == (last.passed, last.failed)
    # Todo items: the summary's latest todo list is what the bar's last todo-tool update showed.
    todo = facts.todo_state(messages)
    changes = [c for u in facts.tracker_updates(messages) for c in u.changes]
    todo_events = [e.todos for e in events if isinstance(e, TaskUpdated) and e.todos is not None]
    if todo is not None and not changes:
        assert [(t.text, t.status) for t in todo_events[-1]] == [
            (" ".join(i.text.split())[:200], facts.normalize_status(i.status)) for i in todo.items]
    if changes:
        bar_todos = todo_events[-1]
        for change in changes:
            assert any(t.text.startswith(change.issue) for t in bar_todos), change


def _call(command: str, output: str, n: int = 0) -> list[Message]:
    return [Message(f"a{n}", "assistant", (ToolCall(f"c{n}", "Bash", {"command": command}),)),
            Message(f"r{n}", "user", (ToolResult(f"c{n}", output),))]


@pytest.mark.parametrize("output, runner, summary, counts, failing", [
    ("FAILED tests/t.py::test_a - x\n=== 1 failed, 41 passed, 2 warnings in 2.31s ===", "pytest",
     "1 failed, 41 passed, 2 warnings in 2.31s", (41, 1, 0), ("tests/t.py::test_a",)),
    ("  ● Sig › rejects\n\nTests:       1 failed, 5 passed, 6 total", "jest", "Tests:       1 failed, 5 passed, 6 total",
     (5, 1, 0), ("Sig › rejects",)),
    ("  1) test bad sig (PayTest)\n\n14 doctests, 65 tests, 1 failure, 2 skipped", "exunit",
     "14 doctests, 65 tests, 1 failure, 2 skipped", (76, 1, 2), ("test bad sig",)),
    ("FAIL: test_x (pkg.T)\nRan 12 tests in 0.003s\n\nFAILED (failures=2)", "unittest",
     "Ran 12 tests in 0.003s FAILED (failures=2)", (10, 2, 0), ("test_x (pkg.T)",)),
    ("10 examples, 2 failures\nrspec ./spec/a_spec.rb:4", "rspec", "10 examples, 2 failures", (8, 2, 0),
     ("./spec/a_spec.rb:4",)),
])
def test_one_parser_gives_the_line_the_counts_and_the_failing_names(output, runner, summary, counts, failing):
    found = parse_test_output(output)
    assert (found.runner, found.summary, (found.passed, found.failed, found.skipped), found.failing) == (
        runner, summary, counts, failing)
    # The summary's tuple and the bar's fields come from this one result.
    assert facts.parse_test_summary(output) == (runner, summary, counts[0], counts[1])


@pytest.mark.parametrize("command, is_test", [
    ("pytest -q", True), ("cd app && python -m pytest tests/ 2>&1 | tail -5", True), ("mix test 2>&1", True),
    ("npm test", True), ("npm run test:unit", True), ("cargo test --all", True), ("go test ./...", True),
    ("uv run pytest", True), ("bundle exec rspec", True), ("./scripts/run_tests.sh", True), ("make test", True),
    ("cat notes.txt", False), ("echo '5 passed in 1s'", False), ("git log", False), ("npm install", False),
    ("grep -r pytest .", False), ("mix compile", False),
])
def test_test_commands_are_recognised_from_the_command_line(command, is_test):
    assert is_test_command(command) is is_test


def test_output_written_to_a_file_counts_where_it_is_printed_or_read():
    msgs = _call("pytest -q > /tmp/out.txt 2>&1; echo done", "done", 0)
    msgs += _call("tail -5 /tmp/out.txt", "== 2 failed, 3 passed in 1.0s ==", 1)
    msgs += [Message("a2", "assistant", (ToolCall("c2", "Read", {"file_path": "/tmp/out.txt"}),)),
             Message("r2", "user", (ToolResult("c2", "     1→== 5 passed in 1.0s ==\n"),))]
    msgs += _call("cat other.txt", "== 9 passed in 1.0s ==", 3)
    runs = facts.test_runs(msgs)
    assert [(r.command, r.summary) for r in runs] == [
        ("pytest -q > /tmp/out.txt 2>&1; echo done", "2 failed, 3 passed in 1.0s"),
        ("pytest -q > /tmp/out.txt 2>&1; echo done", "5 passed in 1.0s")]
    events = [e for e in derive_events(msgs) if isinstance(e, VerificationFinished)]
    assert [(e.passed, e.failed) for e in events] == [(3, 2), (5, 0)]
    assert reduce(derive_events(msgs)).sections["verification"]["pytest"].value["passed"] == 5


def test_tee_and_same_call_printing_count():
    w = TestRunWatcher()
    tee = ToolCall("c", "Bash", {"command": "mix test 2>&1 | tee test.log | tail -3"})
    assert w.observe(tee, "73 tests, 0 failures") is not None
    later = ToolCall("d", "Bash", {"command": "grep failures test.log"})
    assert w.observe(later, "73 tests, 0 failures")[0] == "mix test 2>&1 | tee test.log | tail -3"


def test_tracker_updates_carry_the_changes_the_bar_uses():
    msgs = _call("bd update p-1 --status in_progress && bd close p-2", "✓ Updated issue: p-1\n✓ Closed p-2: done")
    ups = facts.tracker_updates(msgs)
    assert [(u.command, [(c.issue, c.status) for c in u.changes]) for u in ups] == [
        ("bd update p-1 --status in_progress", [("p-1", "in_progress")]),
        ("bd close p-2", [("p-2", "completed")])]
    todos = reduce(derive_events(msgs)).sections["task"]["todos"].value
    assert [(t["content"], t["status"]) for t in todos] == [("p-1", "in_progress"), ("p-2", "completed")]


def test_todo_tools_replayed_the_same_way_for_bar_and_summary():
    msgs = [Message("u", "user", (Text("go"),))]
    for n, (name, inp, out) in enumerate([
            ("TaskCreate", {"subject": "write tests"}, "Task #1 created successfully: write tests"),
            ("TaskCreate", {"subject": "ship"}, "Task #2 created successfully: ship"),
            ("TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1")]):
        msgs += [Message(f"a{n}", "assistant", (ToolCall(f"c{n}", name, inp),)),
                 Message(f"r{n}", "user", (ToolResult(f"c{n}", out),))]
    summary = [(i.text, i.status) for i in facts.todo_state(msgs).items]
    bar = [(t["content"], t["status"]) for t in reduce(derive_events(msgs)).sections["task"]["todos"].value]
    assert summary == bar == [("write tests", "completed"), ("ship", "pending")]
