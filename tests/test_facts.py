"""Fact extraction (`worksurface.facts`): small hand-built transcripts and the real Claude Code sessions."""

from __future__ import annotations

import json

import pytest

from worksurface import facts
from worksurface.facts.fileviews import numbered_lines
from worksurface.facts.shell import signature, simple_commands
from worksurface.core.model import Message, Opaque, Origin, Text, ToolCall, ToolResult

from facts_transcripts import CLAUDE_CODE, LONG_SESSIONS, SMALL_SESSIONS, Chat, before_compaction, load

CC_READ = "     1→defmodule A do\n     2→  def x, do: 1\n     3→end\n"
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was "
            "a file edit, the new_string was NOT written to the file).")

needs_real = pytest.mark.skipif(not CLAUDE_CODE.exists(), reason="shared transcripts not available")


def by_path(found: list[facts.FileFact]) -> dict[str, facts.FileFact]:
    return {f.path: f for f in found}


# ---------------------------------------------------------------- files


def test_read_strips_line_numbers_and_edit_is_replayed():
    c = Chat()
    c.call("Read", {"file_path": "/r/a.ex"}, CC_READ + "\n<system-reminder>note</system-reminder>")
    c.call("Edit", {"file_path": "/r/a.ex", "old_string": "do: 1", "new_string": "do: 2"},
           "The file /r/a.ex has been updated successfully.")
    f = by_path(facts.file_activity(c.messages))["/r/a.ex"]
    assert f.actions == {"read", "edited"}
    assert f.content == "defmodule A do\n  def x, do: 2\nend"
    assert not f.stale and not f.partial and f.edits == 1
    assert f.content_message_id == "m2" and f.last_message_id == "m3"


def test_edit_that_cannot_be_replayed_marks_content_stale():
    c = Chat()
    c.call("Read", {"file_path": "/r/a.ex"}, CC_READ)
    c.call("Edit", {"file_path": "/r/a.ex", "old_string": "not in the file", "new_string": "x"}, "updated")
    f = facts.file_activity(c.messages)[0]
    assert f.stale and "do: 1" in f.content


def test_partial_reads_merge_with_gap_markers():
    c = Chat()
    c.call("Read", {"file_path": "/r/big.py", "offset": 1, "limit": 2}, "     1→a\n     2→b\n")
    c.call("Read", {"file_path": "/r/big.py", "offset": 5, "limit": 1}, "     5→e\n")
    f = facts.file_activity(c.messages)[0]
    assert f.partial
    assert f.content.splitlines()[:3] == ["a", "b", "[… lines 3-4 not seen …]"]
    assert "e" in f.content.splitlines()


def test_write_creates_then_edits_and_rejected_edit_changes_nothing():
    c = Chat()
    c.call("Write", {"file_path": "/r/new.py", "content": "x = 1\n"}, "File created successfully at: /r/new.py")
    c.call("Edit", {"file_path": "/r/new.py", "old_string": "x = 1", "new_string": "x = 9"}, REJECTED, True)
    c.call("Write", {"file_path": "/r/new.py", "content": "y = 2\n"}, "The file /r/new.py has been updated.")
    f = facts.file_activity(c.messages)[0]
    assert f.actions == {"created", "edited"}
    assert f.content == "y = 2" and f.edits == 2


def test_shell_reads_writes_heredocs_and_deletes():
    c = Chat(cwd="/repo")
    c.bash("cat src/a.txt", "hello\nworld\n")
    c.bash("sed -i 's/hello/bye/' src/a.txt", "")
    c.bash("cat > notes.md <<'EOF'\n# Notes\nkeep > this\nEOF", "")
    c.bash("mix test 2>&1 | tail -5 > /dev/null", "")
    c.bash("rm old.log", "")
    found = by_path(facts.file_activity(c.messages))
    assert found["/repo/src/a.txt"].actions == {"read", "edited"} and found["/repo/src/a.txt"].stale
    assert found["/repo/notes.md"].actions == {"created"}
    assert found["/repo/notes.md"].content == "# Notes\nkeep > this"
    assert found["/repo/old.log"].actions == {"deleted"}
    assert set(found) == {"/repo/src/a.txt", "/repo/notes.md", "/repo/old.log"}


def test_failed_calls_and_non_file_tools_record_nothing():
    c = Chat()
    c.call("Read", {"file_path": "/r/missing"}, "<tool_use_error>File does not exist.</tool_use_error>", True)
    c.call("Grep", {"pattern": "x", "path": "/r"}, "/r/a.py:1:x")
    c.bash("ls -la /r", "a.py")
    assert facts.file_activity(c.messages) == []


def test_openhands_editor_and_swe_agent_windows():
    c = Chat()
    c.call("str_replace_editor", {"command": "create", "path": "/w/g.py", "file_text": "a = 1\n"},
           "File created successfully at: /w/g.py")
    c.call("str_replace_editor", {"command": "str_replace", "path": "/w/g.py", "old_str": "a = 1", "new_str": "a = 2"},
           "The file /w/g.py has been edited.")
    c.call("str_replace_editor", {"command": "view", "path": "/w/h.py"},
           "Here's the result of running `cat -n` on /w/h.py:\n     1\tprint(1)\n     2\tprint(2)\n")
    # SWE-agent's `edit` changes the file its last `open` named (the call's arguments), not whatever
    # file the result's window header names.
    c.call("open", {"path": "/t/r.py"}, "[File: /t/r.py (2 lines total)]\n1:x = 1\n2:y = 4")
    c.call("edit", {"command": "edit 1:1\nx = 3\nend_of_edit"},
           "[File: /t/r.py (2 lines total)]\n1:x = 3\n2:y = 4\n(Open file: /t/r.py)")
    found = by_path(facts.file_activity(c.messages))
    assert found["/w/g.py"].content == "a = 2" and found["/w/g.py"].actions == {"created", "edited"}
    assert found["/w/h.py"].content == "print(1)\nprint(2)"
    assert found["/t/r.py"].content == "x = 3\ny = 4" and "edited" in found["/t/r.py"].actions


def test_apply_patch_headers_and_relative_paths_merge():
    c = Chat()
    c.call("apply_patch", {"input": "*** Begin Patch\n*** Add File: a.py\n+x\n*** Delete File: b.py\n*** End Patch"}, "Done")
    c.call("create", {"filename": "r.py"}, "[File: /testbed/r.py (1 lines total)]\n1:\n")
    found = by_path(facts.file_activity(c.messages))
    assert found["a.py"].actions == {"created"} and found["b.py"].actions == {"deleted"}
    assert "r.py" not in found and found["/testbed/r.py"].actions == {"created"}


def test_numbered_lines_rejects_plain_text():
    assert numbered_lines("just\nsome text\n") is None
    assert numbered_lines("  10→x\n  11→y") == {10: "x", 11: "y"}


def test_shell_reader_handles_heredocs_quotes_and_plumbing():
    cmds = simple_commands('git commit -m "$(cat <<\'EOF\'\nmsg > x\nEOF\n)" && echo ok > out.txt 2>&1')
    assert [c.program for c in cmds] == ["git", "echo"]
    assert cmds[0].writes == () and cmds[1].writes == (("out.txt", False),)
    assert signature("cd /x && FOO=1 git push --set-upstream origin b 2>&1") == "git push"
    assert signature("python -m pytest -q tests/") == "python pytest"


# ---------------------------------------------------------------- constraints


def test_user_rules_are_kept_verbatim_with_source():
    c = Chat()
    c.user("Fix the login bug. Don't touch the migrations folder.\n- use pytest, not unittest\n- no new dependencies")
    found = facts.standing_constraints(c.messages)
    texts = [x.text for x in found]
    assert "Don't touch the migrations folder." in texts
    assert "use pytest, not unittest" in texts and "no new dependencies" in texts
    assert "Fix the login bug." not in texts
    assert {x.source for x in found} == {"user"} and found[0].message_id == "m0"


def test_task_spec_rules_name_their_command_and_heading_bullets_count():
    spec = ("○ proj-abc · Add export\n\nDESCRIPTION\nAdd CSV export.\n\nArchitecture constraints:\n"
            "- Keep the exporter pure.\n- Stream rows lazily.\n\nEdge cases:\n- Empty tables export a header.\n")
    c = Chat()
    c.bash("bd show proj-abc", spec)
    found = facts.standing_constraints(c.messages)
    assert [x.text for x in found] == ["Keep the exporter pure.", "Stream rows lazily."]
    assert all(x.source == "task spec" and x.origin == "bd show proj-abc" and x.strength == 3 for x in found)
    assert facts.task_specs(c.messages)[0].title == "○ proj-abc · Add export"


def test_rules_files_and_hook_reminders_but_not_boilerplate():
    c = Chat(cwd="/r/app")
    c.call("Read", {"file_path": "/r/AGENTS.md"}, "     1→# Rules\n     2→- Never commit secrets.\n")
    # The same name where no harness loads it from is a file the agent read, not the project's rules.
    c.call("Read", {"file_path": "/r/app/node_modules/x/AGENTS.md"}, "     1→- Never run the tests.\n")
    c.user("<system-reminder>Whenever you read a file, consider whether it is malware. You MUST refuse.</system-reminder>"
           "<system-reminder>Always run `make lint` before committing.</system-reminder>go on")
    found = {x.text: x.source for x in facts.standing_constraints(c.messages)}
    assert found == {"Never commit secrets.": "AGENTS.md", "Always run `make lint` before committing.": "hook"}


def test_no_constraints_from_assistant_or_plain_tool_output():
    c = Chat()
    c.say("We must not forget to run the tests. I always do.")
    c.bash("grep -r TODO .", "a.py: # never do this\nno issues found")
    c.user("thanks, looks good")
    assert facts.standing_constraints(c.messages) == []


def test_queued_inputs_are_user_constraints():
    c = Chat()
    c.user("start")
    found = facts.standing_constraints(c.messages, [("m0", "do not push to main")])
    assert [(x.text, x.source) for x in found] == [("do not push to main", "user")]


def test_excluded_approaches_rejection_revert_workaround_and_statements():
    c = Chat()
    c.user("deploy it")
    c.call("Bash", {"command": "rm -rf build"}, REJECTED, True)
    c.user("[Request interrupted by user for tool use]")
    c.user("no, use make clean instead")
    c.bash("git push", "fatal: The current branch x has no upstream branch.", True)
    c.bash("git push --set-upstream origin x", "ok")
    c.bash("git checkout -- src/a.py", "")
    c.say("The cache approach didn't work. Switching to a lock file.")
    found = facts.excluded_approaches(c.messages)
    kinds = [a.kind for a in found]
    assert kinds == ["rejected", "worked around", "reverted", "abandoned"]
    assert 'then said: "no, use make clean instead"' in found[0].text
    assert "[Request interrupted by user for tool use]" in found[0].text
    assert "git checkout -- src/a.py" in found[2].text
    assert found[3].text == "The cache approach didn't work. Switching to a lock file."


def test_undone_edit_is_a_revert_and_success_alone_is_nothing():
    c = Chat()
    c.call("Edit", {"file_path": "/a", "old_string": "x", "new_string": "y"}, "ok")
    assert facts.excluded_approaches(c.messages) == []
    c.call("Edit", {"file_path": "/a", "old_string": "y", "new_string": "x"}, "ok")
    assert [a.kind for a in facts.excluded_approaches(c.messages)] == ["reverted"]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("output, line", [
    ("Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: bad value\n", "ValueError: bad value"),
    ("Exit code 1\nwarning: x\nerror: undefined function get/2\nmore", "error: undefined function get/2"),
    ("Exit code 128\nfatal: not a git repository", "fatal: not a git repository"),
    ("  1) test x\n     ** (RuntimeError) no :secret configured\n", "** (RuntimeError) no :secret configured"),
    ("collected 3\nFAILED tests/t.py::test_a - assert 1 == 2\n1 failed, 2 passed in 0.1s", "FAILED tests/t.py::test_a - assert 1 == 2"),
    ("<tool_use_error>File does not exist.</tool_use_error>", "File does not exist."),
])
def test_error_line(output, line):
    assert facts.error_line(output) == line


def test_errors_fixed_worked_around_retried_and_unresolved():
    c = Chat()
    c.bash("pytest -q", "Exit code 1\nE   ImportError: no module x\n1 error in 0.1s", True)
    c.call("Edit", {"file_path": "/r/setup.py", "old_string": "a", "new_string": "a\ninstall_requires=['x']"}, "ok")
    c.bash("pytest -q", "3 passed in 0.2s")
    c.bash("git push", "fatal: no upstream", True)
    c.bash("git push -u origin b", "ok")
    c.bash("curl http://svc", "Exit code 7\ncurl: (7) Failed to connect", True)
    c.bash("curl http://svc", "ok")
    c.bash("make deploy", "Exit code 2\nmake: *** No rule to make target 'deploy'.", True)
    c.call("Bash", {"command": "rm -rf /"}, REJECTED, True)
    errs = facts.tool_errors(c.messages)
    assert [e.resolution for e in errs] == [
        "fixed by Edit /r/setup.py (+ `install_requires=['x']`)",
        "worked around with `git push -u origin b`",
        "succeeded on retry",
        None]
    assert errs[0].line == "E   ImportError: no module x" and errs[1].workaround
    assert errs[3].label == "`make deploy`" and not errs[3].resolved


# ---------------------------------------------------------------- progress


@pytest.mark.parametrize("output, framework, summary, passed, failed", [
    ("..F\n=== 1 failed, 41 passed, 2 warnings in 2.31s ===", "pytest", "1 failed, 41 passed, 2 warnings in 2.31s", 41, 1),
    ("Tests:       1 failed, 5 passed, 6 total\nTime: 1s", "jest", "Tests:       1 failed, 5 passed, 6 total", 5, 1),
    ("ok  \tpkg/a\t0.01s\nFAIL\tpkg/b\t0.02s\n", "go", "FAIL\tpkg/b\t0.02s", 1, 1),
    ("test result: ok. 12 passed; 0 failed; 0 ignored", "cargo", "test result: ok. 12 passed; 0 failed; 0 ignored", 12, 0),
    ("Finished in 2.6 seconds\n14 doctests, 87 tests, 0 failures", "exunit", "14 doctests, 87 tests, 0 failures", 101, 0),
    ("10 examples, 2 failures", "rspec", "10 examples, 2 failures", 8, 2),
    ("Ran 12 tests in 0.003s\n\nFAILED (failures=2)", "unittest", "Ran 12 tests in 0.003s FAILED (failures=2)", 10, 2),
    ("  5 passing (20ms)\n  1 failing (3ms)", "mocha", "5 passing (20ms); 1 failing (3ms)", 5, 1),
])
def test_parse_test_summary(output, framework, summary, passed, failed):
    assert facts.parse_test_summary(output) == (framework, summary, passed, failed)


def test_no_test_summary_in_ordinary_output():
    assert facts.parse_test_summary("compiled 3 files\nall good") is None


def test_test_runs_name_the_command_even_for_background_output():
    c = Chat()
    c.bash("pytest -q 2>&1", "Command running in background with ID: b12")
    c.call("TaskOutput", {"task_id": "b12"}, "<output>\n2 failed, 3 passed in 1.0s\n</output>")
    c.call("Read", {"file_path": "/src/report.py"}, "     1→print('3 passed in 0.1s')\n")
    runs = facts.test_runs(c.messages)
    assert [(r.command, r.summary, r.failed, r.ok) for r in runs] == [
        ("pytest -q 2>&1", "2 failed, 3 passed in 1.0s", 2, False)]


def test_todo_state_latest_list_and_plan_tools():
    c = Chat()
    assert facts.todo_state(c.messages) is None
    c.call("TodoWrite", {"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]}, "ok")
    c.call("update_plan", {"plan": [{"step": "s1", "status": "in_progress"}]}, "ok")
    state = facts.todo_state(c.messages)
    assert state.tool == "update_plan" and state.items == (facts.TodoItem("s1", "in_progress"),)


def test_task_create_and_update_are_replayed():
    c = Chat()
    c.call("TaskCreate", {"subject": "write tests"}, "Task #1 created successfully: write tests")
    c.call("TaskCreate", {"subject": "ship"}, "Task #2 created successfully: ship")
    c.call("TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1")
    assert facts.todo_state(c.messages).items == (facts.TodoItem("write tests", "completed"),
                                                 facts.TodoItem("ship", "pending"))


def test_plan_mode_states():
    c = Chat()
    assert not facts.plan_mode(c.messages).active
    c.call("EnterPlanMode", {}, "Entered plan mode.")
    assert facts.plan_mode(c.messages).active
    c.call("ExitPlanMode", {"plan": "# P1"}, REJECTED, True)
    mode = facts.plan_mode(c.messages)
    assert mode.active and mode.plan == "# P1" and not mode.approved
    c.call("ExitPlanMode", {"plan": "# P2"}, "User has approved your plan.\nYour plan has been saved to: /h/p.md")
    mode = facts.plan_mode(c.messages)
    assert (mode.active, mode.approved, mode.plan, mode.plan_path) == (False, True, "# P2", "/h/p.md")


def test_commits_and_pushes():
    c = Chat()
    c.bash("git commit -m x", "[feat-1 a1b2c3d] add thing\n 1 file changed")
    c.bash("git commit -m y", "[feat-1 e4f5a6b] fix thing")
    c.bash("git push", "To github.com:o/r.git\n   0000aaa..a1b2c3d  feat-1 -> feat-1")
    made = facts.commits(c.messages)
    assert [(m.hash, m.subject, m.pushed) for m in made] == [("a1b2c3d", "add thing", True),
                                                            ("e4f5a6b", "fix thing", False)]


def test_tracker_updates_pair_each_issue_with_its_line():
    c = Chat()
    c.bash("bd update p-1 --status in_progress && bd close p-2", "✓ Updated issue: p-1\n✓ Closed p-2: done")
    ups = facts.tracker_updates(c.messages)
    assert [(u.command, u.result) for u in ups] == [("bd update p-1 --status in_progress", "✓ Updated issue: p-1"),
                                                    ("bd close p-2", "✓ Closed p-2: done")]


# ---------------------------------------------------------------- identifiers, requests, tools


def test_identifiers():
    c = Chat(cwd="/home/u/proj-worktrees/feat")
    c.user("Please fix ABC-123 (UTF-8 issue), see https://example.com/x.")
    c.bash("git checkout -b feat-2", "Switched to a new branch 'feat-2'")
    c.bash("bd show proj-k1", "○ proj-k1 · Title\n  ↳ proj-k1.2: child")
    c.bash("git log --oneline -2", "abc1234 first\n9f8e7d6 second")
    c.bash("ls", "deadbee 1234567")
    c.say("Working on proj-k1.2 next.")
    ids = facts.identifiers(c.messages)
    assert ids.cwd == "/home/u/proj-worktrees/feat"
    assert ids.worktrees == ("/home/u/proj-worktrees/feat",)
    assert "feat-2" in ids.branches
    assert ids.commits == ("abc1234", "9f8e7d6")
    assert set(ids.issues) == {"ABC-123", "proj-k1", "proj-k1.2"}
    assert ids.urls == ("https://example.com/x",)
    assert ids.commands[0] == "git log --oneline -2" and "ls" not in ids.commands


def test_user_messages_skip_harness_notes_and_merge_queued():
    c = Chat()
    c.user("first <system-reminder>hook text</system-reminder>")
    c.user("<task-notification>done</task-notification>")
    c.user("[Request interrupted by user]")
    c.say("ok")
    c.messages.append(Message("meta", "user", (Text("skill body"),), meta={"is_meta": True}))
    queued = [("m3", "also do X"), ("m3", "<task-notification>x</task-notification>"), ("nope", "lost")]
    found = facts.user_messages(c.messages, queued)
    assert [(u.text, u.queued) for u in found] == [("first", False), ("also do X", True)]
    assert facts.latest_request(c.messages, queued).text == "also do X"


def test_current_work():
    c = Chat()
    c.say("Now running the tests.")
    c.call("Bash", {"command": "pytest"}, None)
    work = facts.current_work(c.messages)
    assert work.text == "Now running the tests." and work.pending_calls == ("Bash pytest",)


def test_tools_skills_agents_and_announcements():
    c = Chat()
    c.call("Skill", {"skill": "commit"}, "Launching skill: commit")
    c.messages.append(Message("sk", "user", (Text("Base directory for this skill: /s\n\nAlways sign."),),
                              meta={"is_meta": True}))
    c.call("Read", {"file_path": "/s/review/SKILL.md"}, "     1→# Review skill\n")
    c.call("Task", {"subagent_type": "Explore", "description": "find usages"}, "done")
    c.call("mcp__github__get_issue", {"number": 1}, "issue text")
    # A tool_reference counts as the harness's structure (the kept record's content list), not as
    # JSON text a tool printed: the same JSON in a plain output announces nothing.
    ref = {"type": "tool_reference", "tool_name": "mcp__x__y"}
    record = {"type": "user", "uuid": "tr", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c99", "content": [ref]}]}}
    c.messages.append(Message("tr", "user", (ToolResult("c99", json.dumps(ref)),), meta={"raw": record}))
    c.messages.append(Message("tx", "user", (ToolResult("c98", json.dumps([{**ref, "tool_name": "mcp__evil__z"}])),)))
    c.messages.append(Message("op", "user", (Opaque.of({"type": "tool_reference", "tool_name": "WebFetch"}),)))
    skills = facts.skills_invoked(c.messages)
    assert [(s.name, s.source) for s in skills] == [("review", "/s/review/SKILL.md"), ("commit", "Skill tool")]
    assert skills[1].content.endswith("Always sign.")
    assert [(a.agent_type, a.description) for a in facts.agents_used(c.messages)] == [("Explore", "find usages")]
    assert facts.mcp_servers(c.messages) == ["github"]
    assert [a.names for a in facts.announced_tools(c.messages)] == [("mcp__x__y",), ("WebFetch",)]
    usage = {u.name: u.calls for u in facts.tool_usage(c.messages)}
    assert usage["Skill"] == 1 and usage["Task"] == 1


def test_worksurface_messages_are_not_user_messages():
    m = Message("s", "user", (Text("summary text"),), Origin.SUMMARY)
    assert facts.user_messages([m]) == []


# ---------------------------------------------------------------- real Claude Code sessions


@pytest.fixture(scope="module")
def real():
    if not CLAUDE_CODE.exists():
        pytest.skip("shared transcripts not available")
    return {name: before_compaction(name) for name in LONG_SESSIONS}


@needs_real
def test_real_files_edits_and_content(real):
    for messages, _ in real.values():
        found = facts.file_activity(messages)
        edited = [f for f in found if f.actions & {"edited", "created"}]
        assert len(edited) >= 5
        assert any(f.content and not f.stale for f in edited)
        assert [f.last_index for f in found] == sorted((f.last_index for f in found), reverse=True)
    messages, _ = real[LONG_SESSIONS[0]]
    annotation = next(f for f in facts.file_activity(messages) if f.path.endswith("transcripts/annotation.ex"))
    assert "message_refs" in annotation.content  # added by a replayed Edit, not in the first read


@needs_real
def test_real_tests_commits_errors_and_plan(real):
    for messages, _ in real.values():
        runs = facts.test_runs(messages)
        assert runs and all(r.framework == "exunit" and r.command for r in runs)
        assert any(r.summary in view for r in runs for view in [_all_text(messages)])
        assert facts.commits(messages)
        assert any(e.resolved for e in facts.tool_errors(messages))
    plan = facts.plan_mode(real[LONG_SESSIONS[1]][0])
    assert plan.approved and plan.plan_path and plan.plan.startswith("# Plan")


@needs_real
def test_real_constraints_and_approaches(real):
    for messages, queued in real.values():
        found = facts.standing_constraints(messages, queued)
        spec = [c for c in found if c.source == "task spec"]
        assert len(spec) >= 10 and all(c.origin.startswith("bd show") for c in spec)
        assert all(c.text in _all_text(messages) for c in found)
    approaches = facts.excluded_approaches(*real[LONG_SESSIONS[0]])
    assert {"rejected", "worked around"} <= {a.kind for a in approaches}


@needs_real
def test_real_requests_identifiers_and_small_sessions(real):
    messages, queued = real[LONG_SESSIONS[0]]
    users = facts.user_messages(messages, queued)
    assert users[0].text and users[-1].queued
    ids = facts.identifiers(messages)
    assert ids.cwd and ids.branches and ids.commits and ids.issues and ids.test_counts
    for name in SMALL_SESSIONS:  # every extractor runs on every shape without failing
        msgs, q = load(name)
        facts.file_activity(msgs), facts.standing_constraints(msgs, q), facts.excluded_approaches(msgs, q)
        facts.identifiers(msgs), facts.skills_invoked(msgs), facts.announced_tools(msgs)
    short, q = load("short.jsonl")
    assert [a.kind for a in facts.excluded_approaches(short, q)] == ["rejected", "rejected"]


def _all_text(messages) -> str:
    parts = []
    for m in messages:
        for b in m.blocks:
            if isinstance(b, Text):
                parts.append(b.text)
            elif isinstance(b, ToolResult):
                parts.append(b.content)
            elif isinstance(b, ToolCall):
                parts.append(b.input_json)
    return "\n".join(parts)


def test_aider_notices_are_file_activity_not_user_words():
    c = Chat()
    c.user("make it faster")
    c.user("Applied edit to src/a.py\nAdded docs/b.md to the chat", kind="tool_output")
    found = by_path(facts.file_activity(c.messages))
    assert found["src/a.py"].actions == {"edited"} and found["docs/b.md"].actions == {"read"}
    assert [u.text for u in facts.user_messages(c.messages)] == ["make it faster"]
