"""What the ledger's fact readers make of a Codex rollout's tool items: exec_command results with
Codex's header (exit code, still running, cut), apply_patch patches (files added, updated, moved,
deleted; what they added; a refused patch), and exec_command's `workdir`. Synthetic rollouts, read
by the Codex reader as a real one is."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.core.model import ToolCall
from worksurface.core.toolkinds import call_cwd, call_path, call_target
from worksurface.core.view import standing_context
from worksurface.facts import edit_gist, file_activity, identifiers, tool_calls, tool_errors
from worksurface.facts.calls import exit_code
from worksurface.facts.errors import error_line
from worksurface.facts.fileviews import command_output, patch_files
from worksurface.facts import reading
from worksurface.facts.testsummary import parse_test_output, running_session
from worksurface.formats import codex

from shared import TRANSCRIPTS, needs_shared

CWD = "/home/u/repo"
TREE = "/home/u/repo__worktrees/feature"


def line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload})


def rollout(*items: dict[str, Any]) -> str:
    lines = [line("session_meta", {"id": "s-1", "cwd": CWD, "cli_version": "0.142.0"}),
             line("response_item", {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": "do the work"}]})]
    lines += [line("response_item", item) for item in items]
    return "\n".join(lines) + "\n"


def header(code: int | None, body: str, running: int | None = None) -> str:
    """An exec_command / write_stdin output as Codex writes it: its header, then `Output:`."""
    status = f"Process running with session ID {running}" if running is not None else f"Process exited with code {code}"
    return f"Chunk ID: 1a2b3c\nWall time: 0.2 seconds\n{status}\nOriginal token count: 12\nOutput:\n{body}"


def exec_call(call_id: str, cmd: str, output: str, workdir: str | None = None) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"cmd": cmd, "yield_time_ms": 10000}
    if workdir:
        args["workdir"] = workdir
    return [{"type": "function_call", "name": "exec_command", "arguments": json.dumps(args), "call_id": call_id},
            {"type": "function_call_output", "call_id": call_id, "output": output}]


def patch_call(call_id: str, patch: str, output: str = "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess.\n"
               ) -> list[dict[str, Any]]:
    return [{"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": "apply_patch", "input": patch},
            {"type": "custom_tool_call_output", "call_id": call_id, "output": output}]


def read(*groups: list[dict[str, Any]]) -> list[Any]:
    return list(codex.read(rollout(*[item for group in groups for item in group]), "/tmp/rollout.jsonl").messages)


# ------------------------------------------------------------------------------ exec_command


def test_a_non_zero_exit_in_codex_header_is_a_failure_with_the_output_line_as_its_error() -> None:
    messages = read(exec_call("c1", "git fetch origin", header(128, "remote: Not Found\nfatal: repository 'x' not found\n")),
                    exec_call("c2", "git status", header(0, "## main\n")))
    failed = {r.call.id: r.failed for r in tool_calls(messages)}
    assert failed == {"c1": True, "c2": False}
    [error] = tool_errors(messages)
    assert error.call_id == "c1" and error.line == "fatal: repository 'x' not found"


def test_an_exit_code_printed_below_the_output_label_is_the_program_s_text_not_the_harness_s() -> None:
    printed = header(0, "Process exited with code 1\nExit code: 3\n")
    assert exit_code(printed) == 0
    [rec] = tool_calls(read(exec_call("c1", "cat notes.txt", printed)))
    assert not rec.failed
    # Without Codex's header above it, a first line saying so is not a header either.
    assert exit_code("Process exited with code 1\nmore text\n") is None


def test_a_wrapper_s_exit_banner_is_not_the_error_line_the_cause_above_it_is() -> None:
    output = header(127, '$ bun --filter core typecheck\ncore typecheck: /usr/bin/bash: line 1: tsc: command not found\n'
                         'core typecheck: Exited with code 127\nerror: script "typecheck" exited with code 127\n')
    assert error_line(output) == "core typecheck: /usr/bin/bash: line 1: tsc: command not found"


def test_a_read_runs_in_its_workdir_and_a_cut_or_failed_output_is_not_the_file() -> None:
    whole = header(0, "line one\nline two\n")
    cut = header(0, "Warning: truncated output (original token count: 900)\nTotal output lines: 240\nline one\n")
    messages = read(exec_call("c1", "cat notes.md", whole, workdir=TREE),
                    exec_call("c2", "cat other.md", cut, workdir=TREE),
                    exec_call("c3", "cat gone.md", header(1, "cat: gone.md: No such file or directory\n"), workdir=TREE))
    facts = {f.path: f for f in file_activity(messages)}
    assert facts[f"{TREE}/notes.md"].content == "line one\nline two"
    assert f"{CWD}/notes.md" not in facts  # the session's cwd is not where the command ran
    assert facts[f"{TREE}/other.md"].content is None
    assert f"{TREE}/gone.md" not in facts  # a failed command touched nothing
    assert command_output(header(None, "partial\n", running=7)) is None


def test_call_cwd_joins_a_relative_workdir_and_keeps_the_session_cwd_without_one() -> None:
    assert call_cwd(ToolCall("c", "exec_command", {"cmd": "ls", "workdir": "sub"}), CWD) == f"{CWD}/sub"
    assert call_cwd(ToolCall("c", "exec_command", {"cmd": "ls", "workdir": TREE}), CWD) == TREE
    assert call_cwd(ToolCall("c", "exec_command", {"cmd": "ls"}), CWD) == CWD


# ------------------------------------------------------------------------------ apply_patch

PATCH = """*** Begin Patch
*** Update File: src/app.ts
@@ export function run
 const a = 1;
-const flag = false;
+const flag = true;
+export function announceMerged(): string {
 const b = 2;
*** Add File: docs/new-note.md
+# Note
+
+Hard-correct next-tag-only surfaces.
*** Delete File: old.txt
*** Update File: src/moved.ts
*** Move to: src/renamed.ts
@@
-x = 1
+x = 2
*** End Patch
"""


def test_patch_files_reads_every_file_with_its_hunks() -> None:
    files = patch_files(PATCH)
    assert [(f.verb, f.path, f.move_to) for f in files] == [
        ("Update", "src/app.ts", None), ("Add", "docs/new-note.md", None), ("Delete", "old.txt", None),
        ("Update", "src/moved.ts", "src/renamed.ts")]
    assert files[0].hunks == (("const a = 1;\nconst flag = false;\nconst b = 2;",
                               "const a = 1;\nconst flag = true;\nexport function announceMerged(): string {\nconst b = 2;"),)
    assert files[1].hunks == (("", "# Note\n\nHard-correct next-tag-only surfaces."),)


def test_a_patch_replays_onto_the_files_it_names() -> None:
    messages = read(exec_call("r1", "cat src/app.ts", header(0, "const a = 1;\nconst flag = false;\nconst b = 2;\n")),
                    exec_call("r2", "cat src/moved.ts", header(0, "x = 1\n")),
                    patch_call("p1", PATCH))
    facts = {f.path: f for f in file_activity(messages)}
    app = facts[f"{CWD}/src/app.ts"]
    assert app.content == "const a = 1;\nconst flag = true;\nexport function announceMerged(): string {\nconst b = 2;"
    assert not app.stale and "edited" in app.actions
    assert app.added == ("const flag = true;", "export function announceMerged(): string {")
    assert app.removed == ("const flag = false;",)
    note = facts[f"{CWD}/docs/new-note.md"]
    assert "created" in note.actions and note.content == "# Note\n\nHard-correct next-tag-only surfaces."
    assert facts[f"{CWD}/old.txt"].gone
    assert facts[f"{CWD}/src/moved.ts"].moved_to == f"{CWD}/src/renamed.ts"
    assert facts[f"{CWD}/src/renamed.ts"].content == "x = 2"


def test_what_a_patch_added_is_its_gist_its_target_and_its_defined_names() -> None:
    [rec] = [r for r in tool_calls(read(patch_call("p1", PATCH))) if r.name == "apply_patch"]
    assert edit_gist(dict(rec.call.input)) == "const flag = true; ; export function announceMerged(): string { ; # Note"
    assert call_target(rec.call).startswith("src/app.ts, docs/new-note.md, old.txt")
    assert "announceMerged" in identifiers(read(patch_call("p1", PATCH))).symbols
    one = ToolCall("p", "apply_patch", {"input": "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch"})
    assert call_path(one) == "a.py"


def test_a_refused_patch_is_a_failure_and_changes_no_file() -> None:
    refused = "apply_patch verification failed: Failed to find expected lines in /home/u/repo/src/app.ts:\nconst flag"
    messages = read(patch_call("p1", PATCH, refused))
    [rec] = tool_calls(messages)
    assert rec.failed
    assert file_activity(messages) == []
    [error] = tool_errors(messages)
    assert error.line.startswith("apply_patch verification failed")
    # The same words printed by a program are its output, not Codex's refusal.
    [shell] = tool_calls(read(exec_call("c1", "cat log", "apply_patch verification failed: quoted\n")))
    assert not shell.failed


lines_st = st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=30)
                    .filter(lambda s: s.strip() == s and not s.startswith("*** ") and s != ""), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(before=lines_st, after=lines_st, added=lines_st)
def test_an_added_file_is_known_whole_and_an_update_replays_exactly(before: list[str], after: list[str],
                                                                    added: list[str]) -> None:
    content = "\n".join(before)
    patch = ("*** Begin Patch\n*** Add File: f.txt\n" + "".join(f"+{x}\n" for x in before)
             + "*** Update File: f.txt\n@@\n" + "".join(f"-{x}\n" for x in before)
             + "".join(f"+{x}\n" for x in after) + "*** Add File: g.txt\n" + "".join(f"+{x}\n" for x in added)
             + "*** End Patch\n")
    [add, update, other] = patch_files(patch)
    assert add.hunks == (("", content),) and update.hunks == ((content, "\n".join(after)),)
    assert other.hunks == (("", "\n".join(added)),)
    facts = {f.path: f for f in file_activity(read(patch_call("p1", patch)))}
    assert facts[f"{CWD}/f.txt"].content == "\n".join(after)
    assert facts[f"{CWD}/g.txt"].content == "\n".join(added)


# ------------------------------------------------------------------------------ test runs

BUN_OUTPUT = """bun test v1.3.13 (bf2e2cec)
(pass) grade > keeps the manifest [12.00ms]
(fail) grade > marks trajectory grading unavailable [2380.96ms]

 3 pass
 2 fail
 16 expect() calls
Ran 5 tests across 1 file. [11.88s]
"""


def stdin_call(call_id: str, session: int, output: str) -> list[dict[str, Any]]:
    args = {"session_id": session, "chars": "", "yield_time_ms": 30000}
    return [{"type": "function_call", "name": "write_stdin", "arguments": json.dumps(args), "call_id": call_id},
            {"type": "function_call_output", "call_id": call_id, "output": output}]


def test_bun_test_summaries_plain_and_through_a_workspace_filter() -> None:
    summary = parse_test_output(BUN_OUTPUT)
    assert summary is not None and (summary.runner, summary.passed, summary.failed) == ("bun", 3, 2)
    assert summary.failing == ("grade > marks trajectory grading unavailable",)
    assert summary.summary == "3 pass; 2 fail; 16 expect() calls; Ran 5 tests across 1 file. [11.88s]"
    filtered = "".join(f"@app/core test: {row}\n" for row in BUN_OUTPUT.splitlines())
    summary = parse_test_output(filtered)
    assert summary is not None and summary.summary.startswith("@app/core test: 3 pass; 2 fail")
    # Quoted (indented) from somewhere else, the lines are no run's summary.
    assert parse_test_output("".join(f"    {row}\n" for row in BUN_OUTPUT.splitlines())) is None


def test_a_run_polled_with_write_stdin_is_the_command_that_started_its_session() -> None:
    messages = read(exec_call("c1", "bun run test", header(None, "$ bun test\n", running=32402)),
                    stdin_call("s1", 32402, header(None, "(pass) a [1.00ms]\n", running=32402)),
                    stdin_call("s2", 32402, header(0, BUN_OUTPUT)),
                    stdin_call("s3", 999, header(0, BUN_OUTPUT)))  # a session no command started here
    runs = reading.test_runs(messages)
    assert [(r.command, r.summary) for r in runs] == [
        ("bun run test", "3 pass; 2 fail; 16 expect() calls; Ran 5 tests across 1 file. [11.88s]")]


def test_a_session_id_a_program_printed_is_not_a_session_to_poll() -> None:
    printed = header(0, "Process running with session ID 5\n")
    assert running_session(printed) is None
    assert running_session(header(None, "", running=5)) == "5"
    messages = read(exec_call("c1", "bun run test", printed), stdin_call("s1", 5, header(0, BUN_OUTPUT)))
    assert reading.test_runs(messages) == []


def test_facts_read_from_an_output_skip_codex_s_header() -> None:
    manifest = header(0, '{"name": "app", "scripts": {"test": "bun test", "lint": "biome check ."}}\n')
    messages = read(exec_call("c1", "cat package.json", manifest),
                    exec_call("c2", "bd update av-7 --claim", header(0, "✓ Updated issue: av-7 — add the signal\n")))
    assert set(identifiers(messages).scripts) == {"test: bun test", "lint: biome check ."}
    [update] = reading.tracker_updates(messages)
    assert update.result == "✓ Updated issue: av-7 — add the signal"


def test_codex_s_restated_collaboration_mode_is_carried_once_the_newest_copy() -> None:
    mode = {"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": "<collaboration_mode># Default</collaboration_mode>"}]}
    other = {"type": "message", "role": "developer",
             "content": [{"type": "input_text", "text": "<collaboration_mode># Plan</collaboration_mode>"}]}
    messages = read([mode], exec_call("c1", "ls", header(0, "a\n")), [other], [dict(mode)])
    carried = standing_context(messages)
    texts = [m.text for m in carried]
    assert texts == ["<collaboration_mode># Plan</collaboration_mode>", "<collaboration_mode># Default</collaboration_mode>"]
    assert carried[-1].id == [m for m in messages if m.text == texts[-1]][-1].id


# ------------------------------------------------------------- the rules files Codex injected


AGENTS_TEXT = ("# AGENTS.md instructions for /home/u/repo\n\n<INSTRUCTIONS>\n# Guide\n\n"
               "- Do not use `git stash` on shared checkouts.\n- Run `bun run build` first: it must pass.\n"
               "</INSTRUCTIONS>")


def _start(text: str, harness: bool = True) -> str:
    """A rollout whose first user-role item is `text`, written by Codex (harness content kinds) or typed."""
    kinds = ["agents_md"] if harness else ["user.input_text"]
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}],
            "internal_chat_message_metadata_passthrough": {"content_item_kinds": kinds}}
    lines = [line("session_meta", {"id": "s-1", "cwd": CWD, "cli_version": "0.142.0"}), line("response_item", item),
             line("response_item", {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": "fix the build"}]})]
    return "\n".join(lines) + "\n"


def test_the_agents_md_codex_injected_gives_rules_carried_by_every_view_and_not_restated() -> None:
    from worksurface.facts import standing_constraints
    from worksurface.ledger import Ledger
    from worksurface.subagents.brief import build_brief
    from worksurface.summarizers import StructuredSummarizer, SummaryRequest
    from worksurface.core.tokens import TokenCounter

    t = codex.read(_start(AGENTS_TEXT), "/tmp/r.jsonl")
    rules = standing_constraints(t.messages)
    assert [(c.text, c.source, c.origin, c.carried) for c in rules] == [
        ("Do not use `git stash` on shared checkouts.", "AGENTS.md", "/home/u/repo", True),
        ("Run `bun run build` first: it must pass.", "AGENTS.md", "/home/u/repo", True)]
    # A fresh sub-agent's brief carries them (room permitting); the summary does not restate what the
    # standing start every compaction keeps already says.
    ledger = Ledger.over(t.messages, t.queued_inputs)
    assert "Do not use `git stash` on shared checkouts." in build_brief(ledger.upto(), "fix the build").text
    summary = StructuredSummarizer().summarize(SummaryRequest(messages=t.messages, budget_tokens=2000, ledger=ledger),
                                               TokenCounter()).text
    assert "git stash" not in summary


@settings(max_examples=30, deadline=None)
@given(before=st.sampled_from(["", "note: ", "see\n"]))
def test_the_same_text_typed_by_the_user_or_not_opening_the_message_is_no_injected_rules_file(before: str) -> None:
    from worksurface.facts.constraints import injected_rules_files, standing_constraints

    typed = codex.read(_start(before + AGENTS_TEXT, harness=False), "/tmp/r.jsonl")
    assert all(not injected_rules_files(m) for m in typed.messages)
    # Typed by the user, the rules are the user's own (not carried: a compaction summarizes them).
    assert all(c.source == "user" and not c.carried for c in standing_constraints(typed.messages))
    if before:
        shaped = codex.read(_start(before + AGENTS_TEXT), "/tmp/r.jsonl")
        assert all(not injected_rules_files(m) for m in shaped.messages)


@needs_shared(TRANSCRIPTS / "field" / "EntityProcess-agentv" / "79" / "6eaddfe2f9" / "0" / "full.jsonl")
def test_a_real_rollout_s_agents_md_rules_are_read_from_codex_s_standing_start() -> None:
    from worksurface.facts import standing_constraints
    from worksurface.formats import read_transcript

    t = read_transcript(TRANSCRIPTS / "field" / "EntityProcess-agentv" / "79" / "6eaddfe2f9" / "0" / "full.jsonl")
    carried = [c for c in standing_constraints(t.messages[:3]) if c.carried]
    assert {c.source for c in carried} == {"AGENTS.md"} and len(carried) > 20
    assert any("Do not use `git stash` on shared checkouts." in c.text for c in carried)
    assert all(c.message_id == t.messages[1].id for c in carried)
