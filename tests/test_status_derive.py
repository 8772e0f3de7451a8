"""Deriving status events from transcripts: hand-made ones, then the real Claude Code sessions."""

from __future__ import annotations

import pytest

from status_helpers import CLAUDE_CODE, LONG_SESSIONS, Chat
from worksurface.core.model import Message, Origin, Text
from worksurface.status import (EnvironmentChanged, RepositoryChanged, TaskUpdated, TodoItem,
                                VerificationFinished, derive_events, reduce, render)
from worksurface.facts.git import parse_git
from worksurface.facts.testsummary import parse_test_output as parse_test_summary
from worksurface.facts.tracker import issue_changes as tracker_updates
from worksurface.status.replay import replay
from worksurface.core.tokens import TokenCounter

# Seed 000: a typical coding session's baseline stays under this many tokens.
BASELINE_TOKEN_LIMIT = 300


def of_type(events, cls):
    return [e for e in events if isinstance(e, cls)]


# ------------------------------------------------------------------------------ test summaries

@pytest.mark.parametrize("output, expected", [
    ("....F\nFAILED tests/test_pay.py::test_invalid_signature - assert False\n"
     "========= 1 failed, 41 passed, 2 skipped, 3 warnings in 1.20s =========",
     ("pytest", 41, 1, 2, ("tests/test_pay.py::test_invalid_signature",))),
    ("41 passed in 0.12s", ("pytest", 41, 0, 0, ())),
    ("1 passed, 2 errors in 0.5s\nERROR tests/test_db.py::test_x", ("pytest", 1, 2, 0, ("tests/test_db.py::test_x",))),
    ("  ● Signature › rejects a bad signature\n\nTests:       1 failed, 41 passed, 42 total\n",
     ("jest", 41, 1, 0, ("Signature › rejects a bad signature",))),
    ("\x1b[31m FAIL \x1b[39m test/sig.test.js > rejects\n      Tests  1 failed | 41 passed (42)\n",
     ("vitest", 41, 1, 0, ("test/sig.test.js > rejects",))),
    ("=== RUN   TestSign\n--- FAIL: TestSign (0.00s)\n--- PASS: TestVerify (0.00s)\nFAIL\tpay\t0.01s",
     ("go", 1, 1, 0, ("TestSign",))),
    ("ok  \tgithub.com/x/pay\t0.01s\nFAIL\tgithub.com/x/api\t0.02s", ("go", 1, 1, 0, ())),
    ("test sig::bad ... FAILED\ntest result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured\n"
     "test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured", ("cargo", 5, 1, 1, ("sig::bad",))),
    ("  1) test rejects bad signature (PayTest)\n\n14 doctests, 65 tests, 1 failure, 2 skipped",
     ("exunit", 76, 1, 2, ("test rejects bad signature",))),
])
def test_test_runner_summaries_are_parsed_into_counts(output, expected):
    s = parse_test_summary(output)
    assert (s.runner, s.passed, s.failed, s.skipped, s.failing) == expected


@pytest.mark.parametrize("output", ["All 49 tests pass, zero credo issues.", "compiled 3 files",
                                    " create mode 100644 test/pay_test.exs", ""])
def test_text_that_only_mentions_tests_is_not_a_summary(output):
    assert parse_test_summary(output) is None


def test_the_summary_printed_last_wins():
    out = "41 passed in 0.1s\n...\nTests:       2 failed, 3 passed, 5 total"
    assert parse_test_summary(out).runner == "jest"


# --------------------------------------------------------------------------------------- git

def test_git_status_long_form_gives_branch_and_changed_files():
    out = ("On branch fix/signature\nChanges to be committed:\n\tnew file:   pay/new.py\n\n"
           "Changes not staged for commit:\n  (use \"git add <file>...\")\n\tmodified:   pay/sign.py\n"
           "\trenamed:    old.py -> pay/moved.py\n\nUntracked files:\n\tnotes.md\n")
    facts = parse_git("git status", out)
    assert facts.branch == "fix/signature"
    assert facts.changed_files == ("pay/new.py", "pay/sign.py", "pay/moved.py", "notes.md")
    assert parse_git("git status", "On branch main\nnothing to commit, working tree clean").changed_files == ()


def test_git_short_status_commit_log_and_switch():
    assert parse_git("git status --porcelain", " M a.py\n?? b.py\n").changed_files == ("a.py", "b.py")
    commit = parse_git('git add a.py && git commit -m "fix"', "[fix/sig 1a2b3c4] fix signature\n 1 file changed")
    # A commit takes what was staged: without a `git status` the changed set is unknown, not "none".
    assert (commit.branch, commit.last_commit, commit.changed_files, commit.changed_unknown) == (
        "fix/sig", "1a2b3c4 fix signature", None, True)
    after = parse_git("git commit -m x && git status", "[m 1a2b3c4] x\nOn branch m\nnothing to commit, working tree clean")
    assert after.changed_files == () and not after.changed_unknown
    assert parse_git("git log --oneline -3", "9f8e7d6 latest\n1a2b3c4 older").last_commit == "9f8e7d6 latest"
    assert parse_git("git switch -c feat", "Switched to a new branch 'feat'").branch == "feat"
    assert parse_git("git push", "Everything up-to-date").empty


# ---------------------------------------------------------------------------- beads tracker

def test_beads_confirmations_become_todo_updates():
    assert [(u.issue, u.status) for u in tracker_updates(
        "bd update p-1 --status in_progress && bd update p-2 --status=in_progress",
        "✓ Updated issue: p-1\n✓ Updated issue: p-2\n")] == [("p-1", "in_progress"), ("p-2", "in_progress")]
    assert [(u.issue, u.status) for u in tracker_updates("bd close p-1 p-2", "✓ Closed p-1: Closed\n"
                                                        "✓ Closed p-2: done")] == [("p-1", "completed"),
                                                                                   ("p-2", "completed")]
    created = tracker_updates('bd create --title="Fix it"', "✓ Created issue: p-3\n  Title: Fix it\n")
    assert [(u.issue, u.status, u.title) for u in created] == [("p-3", "pending", "Fix it")]
    shown = tracker_updates("bd show p-1", "○ p-1 [EPIC] · Make it work   [● P2 · IN_PROGRESS]\nOwner: x")
    assert [(u.issue, u.status, u.title) for u in shown] == [("p-1", "in_progress", "Make it work")]
    assert tracker_updates("bd ready", "1. [● P2] [task] p-9: Other work") == []


# ------------------------------------------------------------------------ hand-made transcripts

def test_environment_from_meta_and_cd_commands():
    chat = Chat()
    first = chat.user("fix the payment callback", cwd="/repo", git_branch="main")
    chat.bash("cd services/payment && pytest -q", "1 failed, 41 passed in 0.3s", is_error=True)
    cd_id = chat.bash("cd services/payment", "")
    chat.bash("cd /nonexistent", "no such directory", is_error=True)
    events = derive_events(chat.messages)
    cwds = [(e.cwd, e.message_id) for e in of_type(events, EnvironmentChanged) if e.cwd]
    assert cwds == [("/repo", first), ("/repo/services/payment", cd_id)]
    assert of_type(events, RepositoryChanged)[0].branch == "main"
    assert all(e.source == "transcript" for e in events)


def test_todo_tools_become_todo_items():
    chat = Chat()
    chat.tool("TodoWrite", {"todos": [{"content": "Read callback", "status": "completed", "activeForm": "x"},
                                      {"content": "Fix check", "status": "in_progress", "activeForm": "y"}]},
              "Todos have been modified successfully")
    chat.tool("update_plan", {"plan": [{"step": "Run tests", "status": "pending"}]}, "Plan updated")
    todos = [e.todos for e in of_type(derive_events(chat.messages), TaskUpdated) if e.todos]
    assert todos == [(TodoItem("Read callback", "completed"), TodoItem("Fix check", "in_progress")),
                     (TodoItem("Run tests", "pending"),)]


def test_goal_then_latest_request_and_harness_text_is_not_a_request():
    chat = Chat()
    chat.user("Implement the signature check")
    chat.user("<task-notification>done</task-notification>")
    chat.user("[Request interrupted by user]")
    chat.user("now push it")
    snap = reduce(derive_events(chat.messages))
    assert snap.value("task", "goal") == "Implement the signature check"
    assert snap.value("task", "request") == "now push it"


def test_verification_edits_and_usage_are_derived_with_their_message_ids():
    chat = Chat()
    chat.user("go", cwd="/repo")
    run = chat.bash("pytest", "FAILED t.py::test_a - boom\n1 failed, 3 passed in 0.2s", is_error=True)
    edit = chat.tool("Edit", {"file_path": "/repo/pay/sign.py", "old_string": "a", "new_string": "b"}, "ok")
    chat.assistant("done", usage={"input_tokens": 10, "cache_read_input_tokens": 150_000, "output_tokens": 90})
    events = derive_events(chat.messages, window=200_000)
    run_event = of_type(events, VerificationFinished)[0]
    assert (run_event.failed, run_event.failing, run_event.message_id) == (1, ("t.py::test_a",), run)
    snap = reduce(events)
    assert snap.value("repository", "changed_files") == ["pay/sign.py"]
    assert snap.field("repository", "changed_files").message_id == edit
    assert snap.value("resources", "tokens_left") == 200_000 - 150_100
    assert "fix_verification" in snap.signals


def test_worksurface_messages_are_not_read_so_the_bar_never_feeds_on_itself():
    chat = Chat()
    chat.user("go", cwd="/repo")
    chat.messages.append(Message("status-1-1", "user", (Text('<agent-status><environment cwd="/elsewhere"/>'
                                                               '</agent-status>'),), Origin.STATUS,
                                 {"cwd": "/elsewhere", "epoch": 1, "seq": 1, "kind": "baseline"}))
    chat.messages.append(Message("sum", "user", (Text("Summary: ran pytest, 3 failed in 1s"),), Origin.SUMMARY))
    snap = reduce(derive_events(chat.messages))
    assert snap.value("environment", "cwd") == "/repo"
    assert "verification" not in snap.sections


def test_derivation_is_deterministic():
    chat = Chat()
    chat.user("go", cwd="/repo", git_branch="main")
    chat.tool("Grep", {"pattern": "sign"}, "Found 2 files\na.py\nb.py")
    chat.tool("Grep", {"pattern": "verify"}, "Found 1 file\na.py")
    chat.tool("Glob", {"pattern": "**/*.py"}, "No files found")
    assert derive_events(chat.messages) == derive_events(list(chat.messages))
    assert "stop_searching" in reduce(derive_events(chat.messages)).signals


# ------------------------------------------------------------------- real Claude Code sessions

@pytest.fixture(scope="module")
def sessions():
    if not LONG_SESSIONS:
        pytest.skip(f"shared transcripts not found at {CLAUDE_CODE}")
    from worksurface.formats import read_transcript
    return {p.name: read_transcript(p).messages for p in LONG_SESSIONS}


def test_real_sessions_yield_cwd_branch_tests_and_todos(sessions):
    assert len(sessions) == 2
    for name, messages in sessions.items():
        events = derive_events(messages, window=200_000)
        snap = reduce(events)
        last_cwd = [m.meta["cwd"] for m in messages if m.meta.get("cwd")][-1]
        last_branch = [m.meta["git_branch"] for m in messages if m.meta.get("git_branch")][-1]
        assert snap.value("environment", "cwd") == last_cwd, name
        assert snap.value("repository", "branch") == last_branch, name
        runs = of_type(events, VerificationFinished)
        assert len(runs) >= 5, name
        assert any(r.failed > 0 and r.failing for r in runs), name  # each session fixed failing tests
        assert snap.value("verification", "exunit")["failed"] == 0, name  # ... and ended green
        todos = snap.value("task", "todos")
        assert todos and sum(t["status"] == "completed" for t in todos) >= 4, name
        assert snap.value("task", "goal"), name
        assert snap.value("repository", "last_commit"), name
        ids = {m.id for m in messages}
        assert all(e.message_id in ids for e in events), name


def test_real_sessions_cd_into_a_subdirectory_and_back(sessions):
    messages = sessions["8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"]
    cwds = [e.cwd for e in of_type(derive_events(messages), EnvironmentChanged) if e.cwd]
    assert any(c.endswith("/spotter-fum/assets") for c in cwds)
    assert cwds[-1].endswith("/spotter-fum")


def test_real_session_baselines_are_compact(sessions):
    counter = TokenCounter()
    for name, messages in sessions.items():
        text = render(reduce(derive_events(messages, window=200_000)), epoch=1, seq=1, now=0)
        assert counter.text(text) < BASELINE_TOKEN_LIMIT, (name, text)


def test_replaying_real_sessions_gives_one_epoch_per_compaction_and_small_deltas(sessions):
    for name, messages in sessions.items():
        compactions = sum(1 for m in messages if m.meta.get("compact_boundary"))
        delta = replay(messages, strategy="delta", window=200_000)
        assert compactions == 1 and delta.state.epoch == 1 + compactions, name
        assert delta.kinds["baseline"] == delta.state.epoch, name
        full = replay(messages, strategy="append", window=200_000)
        assert full.publications == delta.publications, name  # same change points, other encodings
        assert delta.bytes_published * 2 < full.bytes_published, name
        only = replay(messages, strategy="replace", window=200_000)
        assert len(only.state.published_ids) == 1, name


def test_incremental_derivation_matches_the_whole_list():
    from worksurface.status.derive import EventDeriver
    chat = Chat()
    chat.user("go", cwd="/repo", git_branch="main")
    chat.bash("cd sub && pytest", "1 passed in 0.1s")
    chat.tool("Grep", {"pattern": "x"}, "a.py")
    deriver = EventDeriver()
    assert [e for m in chat.messages for e in deriver.derive(m)] == derive_events(chat.messages)
