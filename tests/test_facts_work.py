"""Plans where users keep them and what the latest work showed (issue 25, items 2-3): todo items keep
what they involve, plan documents are known by place and name, the agent deciding against a change
is an excluded approach (its musings are not), the latest calls' output is quoted a few lines each,
test runs behind a workspace selector count, a listing is quoted as its names, the report the
user replied to is quoted with the reply, and table rows are never sentences."""

from __future__ import annotations

from cc_records import Session
from worksurface import facts
from worksurface.facts.observations import listing_gist, output_gist
from worksurface.facts.plans import is_plan_document
from worksurface.facts.testsummary import is_test_command
from worksurface.facts.text import units
from worksurface.core.tokens import TokenCounter
from worksurface.summarizers import StructuredSummarizer, SummaryRequest


def _summary(s: Session, budget: int = 4000) -> str:
    t = s.transcript()
    return StructuredSummarizer().summarize(
        SummaryRequest(messages=t.messages, budget_tokens=budget, queued_inputs=t.queued_inputs), TokenCounter()).text


def test_task_items_keep_what_they_involve_and_an_update_can_say_why_it_was_skipped() -> None:
    s = Session()
    s.user("Address the review findings.")
    s.call("TaskCreate", {"subject": "Update the review and commit", "activeForm": "Updating",
                          "description": "Add a Resolution section listing what was fixed and what was postponed, "
                                         "then commit everything."}, "Task #1 created successfully: Update the review")
    s.call("TaskCreate", {"subject": "Extract the shared overlap logic", "description": "Refactor both helpers."},
           "Task #2 created successfully: Extract the shared overlap logic")
    s.call("TaskUpdate", {"taskId": "2", "status": "completed",
                          "description": "SKIPPED: the duplication is minimal and a helper would lose context."},
           "Updated task #2 status")
    s.call("TaskUpdate", {"taskId": "1", "status": "in_progress"}, "Updated task #1 status")
    state = facts.todo_state(s.transcript().messages)
    assert state is not None
    first, second = state.items
    assert (first.status, first.detail) == ("in_progress", "Add a Resolution section listing what was fixed and what "
                                            "was postponed, then commit everything.")
    assert second.detail.startswith("SKIPPED: the duplication is minimal")  # the newer description wins
    text = _summary(s)
    assert "[in_progress] Update the review and commit\n  ↳ Add a Resolution section" in text
    # A list tool that records only titles gives items without details.
    w = Session()
    w.call("TodoWrite", {"todos": [{"content": "Verify history", "status": "pending", "activeForm": "Verifying"}]},
           "Todos have been modified successfully.")
    (item,) = facts.todo_state(w.transcript().messages).items  # type: ignore[union-attr]
    assert item.detail == ""


def test_plan_documents_are_known_by_their_place_and_name() -> None:
    for path in ("/repo/docs/plans/2026-01-rollout.md", "/repo/.planning/todos/pending/review-deferred.md",
                 "/repo/docs/HISTORY-REWRITE-PLAN.md", "/repo/docs/requirements/x/review-01.md", "/repo/TODO.md",
                 "/repo/notes/next-steps.txt"):
        assert is_plan_document(path), path
    for path in ("/repo/src/plan.py", "/repo/README.md", "/repo/CLAUDE.md", "/repo/docs/architecture/overview.md",
                 "/repo/.planning/config.json", "/repo/docs/explanation.md"):
        assert not is_plan_document(path), path


def test_deciding_against_a_change_is_an_excluded_approach_and_a_name_is_not() -> None:
    s = Session()
    s.user("Fix M4: stale share keys.")
    s.say("Good - the TTL already handles invalidation (60s). The current implementation is sufficient.")
    s.say("Code duplication - skipped as the duplication is minimal and a helper would lose the log context.")
    s.say("L2 (key not zeroed) - accept as tech debt: the key is still in use.")
    s.say("Now I'll add the path assertion to the deferred finalization test.")  # a test's name, not a decision
    s.say("Ran the suite: 41 passed, 2 skipped.")
    s.say("I might switch the cache later, maybe.")
    decided = [a.text for a in facts.excluded_approaches(s.transcript().messages) if a.kind == "decided against"]
    assert len(decided) == 3
    assert decided[0].startswith("Good - the TTL already handles invalidation")
    assert any("skipped as the duplication is minimal" in d for d in decided)
    assert any("accept as tech debt" in d for d in decided)
    assert not any("deferred finalization" in d or "2 skipped" in d for d in decided)


def test_an_outputs_gist_is_its_first_lines_and_its_last_without_colour_or_exit_code() -> None:
    out = ("Exit code 1\n\x1b[33mNOTICE\x1b[0m: Removing 'origin' remote\n  (was git@host:org/repo.git)\n"
           "\nParsed 47 commits\nHEAD is now at 4f43a16 Security docs\nCompletely finished after 0.22 seconds.\n")
    assert output_gist(out) == ("NOTICE: Removing 'origin' remote | (was git@host:org/repo.git) | "
                                "Completely finished after 0.22 seconds.")
    assert output_gist("784K\t.git\n") == "784K .git"
    assert output_gist("\n\n") == ""


def test_the_latest_calls_are_quoted_with_what_they_showed_and_reads_are_left_to_the_files() -> None:
    s = Session()
    s.user("Clean the history.")
    s.call("Read", {"file_path": "/repo/notes.md"}, "     1→# Notes\n")
    s.call("Bash", {"command": "du -sh .git"}, "784K\t.git")
    s.call("Bash", {"command": "git-filter-repo --path logs --invert-paths --force"},
           "Parsed 47 commitsHEAD is now at 4f43a16 Security docs\nNew history written in 0.09 seconds")
    s.call("TodoWrite", {"todos": [{"content": "Verify", "status": "pending"}]}, "Todos have been modified")
    outcomes = facts.recent_outcomes(s.transcript().messages, 10)
    assert [o.label.split()[1] for o in outcomes] == ["git-filter-repo", "du"]  # newest first, shell only
    text = _summary(s)
    assert "du -sh .git -> 784K .git" in text and "HEAD is now at 4f43a16" in text
    assert "# Notes" not in text


def test_a_test_run_behind_a_workspace_selector_is_a_test_run() -> None:
    for command in ("pnpm --filter @app/crypto test -- --reporter=verbose", "npm -w packages/api test",
                    "yarn workspace web test", "pnpm test"):
        assert is_test_command(command), command
    for command in ("pnpm --filter web build", "pnpm -F @app/crypto lint", "npm -w packages/api run build"):
        assert not is_test_command(command), command
    s = Session()
    s.call("Bash", {"command": "pnpm --filter @app/crypto test 2>&1"},
           " Test Files  13 passed (13)\n      Tests  241 passed (241)\n   Duration  2.47s")
    (run,) = facts.test_runs(s.transcript().messages)
    assert (run.passed, run.failed) == (241, 0)


def test_table_rows_are_not_sentences() -> None:
    text = "Rules:\n- Never log keys\n\n| Algorithm | Notes |\n|---|---|\n| AES | never reuse an IV |\n\nDone."
    assert [u.text for u in units(text)] == ["Never log keys", "Done."]


def test_a_harness_header_above_an_output_is_not_what_the_output_says() -> None:
    codex = ("Chunk ID: 2238c8\nWall time: 0.1597 seconds\nProcess exited with code 0\nOriginal token count: 12\n"
             "Output:\nleaks found: 392\n")
    assert output_gist(codex) == "leaks found: 392"
    assert output_gist("the build said\nOutput:\nnothing") == "the build said | Output: | nothing"  # prose, not a header


def test_messages_a_harness_carried_into_its_own_history_are_quoted_once() -> None:
    from builders import Convo
    c = Convo().user("Rank every issue by staleness.").user("Use bun run, not a path.")
    c.tool("Bash", {"command": "gh issue list"}, "1\tfirst issue")
    c.user("Rank every issue by staleness.").user("Use bun run, not a path.")  # carried again after a compaction
    c.user("Push the docs branch.")
    text = StructuredSummarizer().summarize(SummaryRequest(messages=c.messages, budget_tokens=2000),
                                            TokenCounter()).text
    quoted = text[:text.index("## Files")]  # the request and the user's messages (a rule may restate one)
    assert quoted.count("Rank every issue by staleness.") == 1 and quoted.count("Use bun run, not a path.") == 1


def test_a_listing_is_quoted_as_the_names_it_lists() -> None:
    ls_l = ("total 24\ndrwxr-xr-x 2 u u 4096 Feb  1 10:00 .\ndrwxr-xr-x 9 u u 4096 Feb  1 10:00 ..\n"
            "-rw-r--r-- 1 u u  812 Feb  1 10:00 crypto.ts\ndrwxr-xr-x 2 u u 4096 Feb  1 10:00 fixtures/\n")
    assert listing_gist(ls_l) == "crypto.ts, fixtures"
    assert listing_gist("/repo/src/a.ts\n/repo/src/b/a.ts\n/repo/src/c.ts\n") == "a.ts, c.ts"  # each name once
    s = Session()
    s.user("Tidy the fixtures.")
    s.call("Bash", {"command": "ls -la packages/crypto/src"}, ls_l)
    s.call("Bash", {"command": "git status --short"}, " M a.ts\n M b.ts\n M c.ts\n M d.ts\n")
    gists = {o.label.split()[1]: o.gist for o in facts.recent_outcomes(s.transcript().messages, 10)}
    assert gists["ls"] == "crypto.ts, fixtures"
    assert gists["git"] == "M a.ts | M b.ts | M d.ts"  # not a listing: its first lines and its last


def test_the_report_the_user_replied_to_is_quoted_with_the_reply() -> None:
    s = Session()
    s.user("Which findings are left?")
    s.say("Left: H2 (key rotation) and M4 (error wording). H1 is fixed.")
    s.user("Do H2 first, skip M4.")
    s.call("Bash", {"command": "git log -1 --oneline"}, "4f43a16 H1 fix")
    s.say("Starting on H2.")
    s.call("Bash", {"command": "pnpm test"}, "Tests  12 passed (12)")
    text = _summary(s)
    assert "The agent's reports the user replied to" in text
    assert "Left: H2 (key rotation) and M4 (error wording)" in text and "Do H2 first, skip M4." in text

    # A harness notice between the report and the reply is not the user's reply.
    s = Session()
    s.user("Run the suite in the background.")
    s.say("Started the suite; it reports when done.")
    s.user("<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>")
    s.call("Bash", {"command": "cat /tmp/suite.log"}, "Tests  12 passed (12)")
    s.say("The suite passed.")
    assert "reports the user replied to" not in _summary(s)
