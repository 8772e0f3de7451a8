"""Every regular expression in worksurface.facts, by name: an input of the kind it was written for that
it matches, and a near-miss it must not match.

One table per module. A row is (name, how the module applies it, matching input, near-miss). A name is
a module-level attribute (`EXIT_CODE_RE`, `ERROR_LINE_RES[2]`, `FINDING_RES[0][1]`) or, for a pattern
written inline (`re.search(r"...", text)`), the pattern text itself (an f-string's source, with the
names it uses given in `FILLS`). `test_every_pattern_has_a_row` finds every compiled pattern and every
inline `re.*` call in the package, so a new pattern without a row fails here, and so does a row whose
pattern is gone.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

FACTS = Path(__file__).resolve().parents[1] / "pipeline" / "facts"
# How a module applies an inline pattern -> the test that says whether an input matches.
INLINE_METHOD = {"search": "search", "findall": "search", "finditer": "search", "sub": "search", "subn": "search",
                 "split": "search", "match": "match", "fullmatch": "fullmatch"}
FLAGS_AT = {"search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3, "sub": 4, "subn": 4}

CALLS = [
    ("EXIT_CODE_RE", "search", "Exit code 1\nnpm ERR! missing script: lint", "echo 'Exit code 1'"),
    ("EXIT_CODE_RE", "search", "ls: cannot access 'dist'\n[Command finished with exit code 2]",
     "[Command finished]"),
]

COMMANDS = [
    ("COMMAND_TAG_RE", "search", "<command-name>/review</command-name><command-args>PR 12</command-args>",
     "<command-name>/review</command-args>"),
    ("PROMPT_TAG_RE", "search", "<instructions>Review the diff</instructions>", "a < b and c > d"),
]

OBSERVATIONS = [
    ("ANSI_RE", "search", "\x1b[31mFAILED\x1b[0m tests/test_app.py", "[31m plain brackets"),
]

PLANS = [
    ("PLAN_DIR_RE", "search", "/repo/.planning/phase-2.md", "/repo/src/planner.py"),
    ("DEPENDENCY_LIST_RE", "match", "requirements-dev.txt", "requirements-plan.md"),
    ("PLAN_NAME_RE", "search", "refactor-plan", "planetary"),
]

APPROACHES = [
    (r"\s+", "search", "don't  touch\n migrations", "migrations"),
    (r"[a-z][a-z0-9_]{3,}", "search", "retry logic", "a 12 to"),
    ("DECIDED_RE", "search", "The retry wrapper already handles timeouts, so no change there.",
     "The retry wrapper handles timeouts after this change."),
    ("REVERT_RE", "match", "git checkout -- src/app.py", "git checkout -b feature/login"),
    ("ABANDON_OR_DECIDED_RE", "search", "That didn't work, so the TTL already handles it.", "That worked."),
    ("ABANDON_RE", "search", "That didn't work, switching to the REST API.", "That worked: the REST API answers."),
]

CONSTRAINTS = [
    ("QUESTION_END_RE", "search", "Should we keep the old endpoint?", "Keep the old endpoint (why? see #12)."),
    ("QUESTION_OPEN_RE", "match", "should we keep the old endpoint", "we should keep the old endpoint"),
    ("STRONG_RE", "search", "Don't touch the migrations folder.", "No problem, the migrations ran fine."),
    ("MEDIUM_RE", "search", "Always run the linter before committing.", "The linter ran before the commit."),
    ("IMPERATIVE_RE", "match", "Use the existing HTTP client", "Useful helpers live in utils/"),
    ("TASK_COMMAND_RE", "search", "gh issue view 42 --comments", "gh issue list --state open"),
    ("REVIEW_COMMAND_RE", "search", "gh pr view 40 --json title,body", "gh issue view 40 --json title,body"),
    ("TASK_TOOL_RE", "search", "get_issue", "create_issue"),  # the tool's name, MCP prefix dropped
    ("TASK_FILE_RE", "match", "TASK.md", "task_runner.py"),
    ("CONTENTS_OF_RE", "search", "Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n"
     "- Use uv for dependencies", "Contents of /repo/CLAUDE.md:\n- Use uv"),
    ("OUTPUT_FILE_RE", "search", "Write the report to results/summary.csv", "Write the report in the morning"),
    ("INJECTED_RULES_RE", "match", "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n- Use bun\n</INSTRUCTIONS>",
     "Please read # AGENTS.md instructions for /repo\n<INSTRUCTIONS>"),
    ("USER_INSTRUCTIONS_RE", "match", "<user_instructions>\n- Use bun\n</user_instructions>",
     "see <user_instructions> below"),
    ("ISSUE_HEADER_RE", "search", "○ web-3kq [EPIC] · Checkout redesign   [● P2 · OPEN]", "○ checkout · redesign"),
    ("SEPARATOR_TAIL_RE", "search", "Acceptance: the cart keeps coupons\n==========", "keep a --- b as it is"),
    (r"/(?:issues|pull|browse)/", "search", "https://github.com/acme/api/issues/42",
     "https://github.com/acme/api/blob/main/README.md"),
    # A URL's scheme, dropped to compare it with how the user typed it (`_bare_url`).
    (r"^[a-z][a-z0-9+.-]*://", "search", "HTTPS://linear.app/acme/issue/WEB-12", "linear.app/acme/issue/WEB-12"),
    (r"\s+", "search", "don't  touch\n migrations", "migrations"),
]

ERRORS = [
    ("TRACEBACK_LAST_RE", "match", "ValueError: invalid literal for int() with base 10: 'x'",
     '  File "app.py", line 3, in <module>'),
    ("ERROR_LINE_RES[0]", "search", "** (CompileError) lib/app.ex:3: undefined function foo/0", "** note: compiling"),
    ("ERROR_LINE_RES[1]", "search", "error[E0308]: mismatched types", "errors found in 0 files"),
    ("ERROR_LINE_RES[2]", "search", "fatal: not a git repository (or any of the parent directories): .git",
     "non-fatal: skipped 2 files"),
    ("ERROR_LINE_RES[3]", "search", "FAILED tests/test_api.py::test_login - AssertionError", "FAILURES"),
    ("ERROR_LINE_RES[4]", "search", "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
     "ErrorBoundary component rendered"),
    ("ERROR_LINE_RES[5]", "search", "cp: cannot stat 'dist/app.js': No such file or directory",
     "Build finished; 0 warnings"),
    ("BANNER_RE", "match", "Found 3 errors in 2 files (checked 40 source files)", "Found the bug in parser.py"),
    ("COMPLAINT_RE", "match", "src/app.py:12:5: E501 line too long (91 > 88 characters)", "src/app.py has 12 lines"),
    ("WARNING_LINE_RE", "match", "warning: unused variable `total`", "no warnings: the build is clean"),
    ("PRINTED_ERROR_RE", "search", "Traceback (most recent call last):\n  File \"app.py\", line 3",
     "the error handler prints a traceback on failure"),
    ("TRANSIENT_RE", "search", "Error: read ECONNRESET", "Error: connect ECONNREFUSED 127.0.0.1:5432"),
    ("EXIT_LINE_RE", "match", "Exit code 1", "Exit code 1: the tests failed"),
    ("TAG_RE", "search", "<tool_use_error>File does not exist.</tool_use_error>", "a tool_use_error, untagged"),
]

FILES = [
    ("NOTICE_RE", "search", "Applied edit to src/app.py", "Added 3 files to the chat."),
    ("SED_RANGE_RE", "match", "10,40p", "s/foo/bar/p"),
    (r"-n\d+|--lines=\d+|-\d+", "fullmatch", "-n40", "--lines"),
    (r"\D", "search", "--lines=40", "40"),
    (r"[+]?\d+", "fullmatch", "+20", "20.log"),
    (r"(?:^|\s)-(?:\w*b\s?a|-body-numbering=a)\b", "search", "nl -ba src/app.py", "nl -bt src/app.py"),
]

FILEVIEWS = [
    ("NUMBERED_LINE_RES[0]", "match", "    12→def main():", "    12 def main():"),
    ("NUMBERED_LINE_RES[1]", "match", "    12\tdef main():", "    12  def main():"),
    ("NUMBERED_LINE_RES[2]", "match", "12:def main():", "src/app.py:12:def main():"),
    ("NUMBERED_LINE_SCANS[0]", "search", "x\n    12→def main():", "    12 def main():"),
    ("NUMBERED_LINE_SCANS[1]", "search", "x\n    12\tdef main():", "    12  def main():"),
    ("NUMBERED_LINE_SCANS[2]", "search", "x\n12:def main():", "src/app.py:12:def main():"),
    ("SWE_WINDOW_RE", "search", "[File: /repo/src/app.py (120 lines total)]\n(1 more lines above)",
     "[File: /repo/src/app.py]"),
    ("MINI_OUTPUT_RE", "match", "<returncode>0</returncode>\n<output>\nok\n</output>", "<returncode>0</returncode>\nok"),
    ("HARNESS_TRAILER_RE", "search", "build ok\n[The command completed with exit code 0.]",
     "[The command completed with exit code 0.] then more output"),
    ("AIDER_BLOCK_RE", "search", "<<<<<<< SEARCH\nold = 1\n=======\nold = 2\n>>>>>>> REPLACE",
     "<<<<<<< HEAD\nold = 1\n=======\nold = 2\n>>>>>>> main"),
    ("CODEX_EXIT_RE", "match", "Process exited with code 1", "Process running with session ID 7"),
    ("CODEX_RUNNING_RE", "match", "Process running with session ID 7", "Process exited with code 1"),
    ("PATCH_FILE_RE", "match", "*** Update File: src/app.py", "*** Begin Patch"),
    ("PATCH_MOVE_RE", "match", "*** Move to: src/new.py", "*** Update File: src/app.py"),
]

FINDINGS = [
    ("ANY_FINDING_RE", "search", "The root cause is a stale cache key.", "The file already exists."),
    ("FINDING_RES[0][1]", "search", "These 2 failures are pre-existing on main.", "The file already exists."),
    ("FINDING_RES[1][1]", "search", "The root cause is a stale cache key.", "Because of the cache, it is fast."),
    ("FINDING_RES[2][1]", "search", "Use `httpx.AsyncClient` instead of requests here.", "We use requests here."),
    ("FINDING_RES[3][1]", "search", "mypy reports an incompatible return type in api.py",
     "mypy is installed in the venv"),
    ("FINDING_RES[4][1]", "search", "This confirms the race is in the cache layer.", "Does this confirm the race?"),
    ("INTENT_RE", "match", "Let me check the logs.", "Letting the job finish."),
    ("FOUND_ONLY_RE", "match", "Found the problem!", "Found the problem: the cache key is stale."),
]

IDENTIFIERS = [
    ("COMMIT_WORD_RE", "search", "fixed in commit 3f2a9c1", "commit message: fix rounding"),
    ("ONELINE_RE", "search", "3f2a9c1 Fix rounding in invoices\n8b7e6d5 Add the cart", "3f2a9c Fix rounding"),
    ("BRANCH_RE", "search", "On branch feature/login\nnothing to commit, working tree clean",
     "Switched to branch 'main'"),
    ("WORKTREE_LIST_RE", "search", "/home/dev/api  3f2a9c1 [main]", "/home/dev/api  (bare)"),
    ("JIRA_RE", "search", "Fixes PROJ-123 in the checkout", "see proj-123"),
    ("CD_PREFIX_RE", "search", "cd /repo/api && pytest -q", "cd /repo/api"),
    ("URL_RE", "search", "see https://docs.python.org/3/library/re.html", "see docs.python.org/3"),
    ("SYMBOL_RES[0]", "search", "def compute_invoice(order):", "define the invoice"),
    ("SYMBOL_RES[1]", "search", 'this.pushEvent("select_row", {id})', "this.pushEvent(name, {id})"),
    ("SYMBOL_RES[2]", "search", '<tr data-row-id="3">', '<tr data="3">'),
    ("ID_ARG_RE", "match", "web-3kq", "--status"),
    ("ID_ARG_RE", "match", "#42", "#web"),
    ("FORM_WORD_RE", "match", "install", "./build.sh"),
    (r"\d", "search", "3f2a9c1", "cafe"),
    (r"[a-f]", "search", "3f2a9c1", "1234567"),
    (r"[_.-]|[a-z][A-Z]", "search", "compute_invoice", "invoice"),
    (r"f'(?<![\w/-]){re.escape(prefix)}-[a-z0-9]+(?:\.\d+)*\b'", "search", "closes web-3kq.2", "see /web-3kq"),
]

PROGRESS = [
    ("PLAN_SAVED_RE", "search", "Your plan has been saved to: /home/dev/.claude/plans/plan.md", "saved to disk"),
]

GIT = [
    ("PUSH_RANGE_RE", "search", "   3f2a9c1..8b7e6d5  main -> main", "   3f2a9c1  main -> main"),
    ("PUSH_NEW_RE", "search", " * [new branch]      feature/login -> feature/login",
     " * [new tag]         v1.2.0 -> v1.2.0"),
    ("COMMIT_RE", "search", "[main 3f2a9c1] Fix rounding in invoices\n 1 file changed", "[main] Fix rounding"),
    ("_BRANCH", "search", "On branch feature/login\nnothing to commit", "Your branch is up to date"),
    ("_SWITCHED", "search", "Switched to a new branch 'feat'", "Already on 'feat'"),
    ("_SHORT_BRANCH", "search", "## main...origin/main\n M a.py", "# main"),
    ("_PORCELAIN", "search", " M a.py\n?? b.py", "   indented a.py"),
    ("_CLEAN", "search", "On branch main\nnothing to commit, working tree clean", "nothing added to commit"),
    ("_LONG_PREFIX", "search", "modified:   a.py", "a.py"),
    ("_ONELINE", "search", "9f8e7d6 latest\n1a2b3c4 older", "commit 9f8e7d6"),
    ("_SHORT_FLAGS", "search", " --porcelain", " --cached"),
    (r"&&|\|\||[;|\n]", "search", " -s && git diff", " --short"),
    (r"git (?:checkout|switch)\b", "search", "git switch -c feat", "git switcher"),
]

PROVENANCE = [
    ("REJECTION_RE", "match", "[Request interrupted by user for tool use]",
     "[Request interrupted by user] and then the agent resumed"),
    ("_TRAILING_REMINDER_RE", "search", "3 files changed\n<system-reminder>\nThe todo list changed.\n</system-reminder>\n",
     "<system-reminder>a note</system-reminder> and the output goes on"),
    ("_LINE_NUMBER_RE", "search", "    12\u2192import os", "12 apples and 3 pears"),
    ("_QUOTED_OUTPUT_RE", "search", "<bash-stdout>a.py:1:x</bash-stdout>", "<bash-input>grep x</bash-input>"),
]

SHELL = [
    ("HEREDOC_RE", "search", "cat <<'EOF' > notes.md", "cat < notes.md"),
    ("ROUGH_TOKEN_RE", "search", "git status && git diff", "   "),
    ("LEX_RE", "search", "ls -la", ""),
    ("WORD_PART_RE", "search", "'a b'", ""),
    ("QUOTED_ESCAPE_RE", "search", '\\"', '"'),
    (r"[A-Za-z_]\w*=.*", "fullmatch", "DEBUG=1", "--debug=1"),
    (r"[a-z][\w.:-]*", "fullmatch", "test:unit", "Makefile"),
]

SUBAGENTS = [
    ("NOTIFICATION_RE", "search", "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
     "</task-notification>", "<task-notification>\n<task-id>b1</task-id>"),
    ("TRAILER_RE", "search", "Done: 3 files changed.\n\nagentId: a1b2c3 (for resuming to continue this agent's work)",
     "agentId: a1b2c3 (for resuming later)\nand then more of the answer"),
    ("f'<{name}>(.*?)</{name}>'", "search", "<status>completed</status>", "<status>completed"),
]

TESTSUMMARY = [
    ("_ANSI", "search", "\x1b[32m5 passed\x1b[0m", "[32m5 passed"),
    ("_ITEM", "search", "51 passed", "passed: none"),
    ("RUN_SCRIPT_RE", "match", "test:unit", "testing"),
    ("SCRIPT_RE", "search", "scripts/run_tests.sh", "scripts/build.sh"),
    ("_PYTEST", "search", "===== 2 failed, 51 passed in 5.46s =====", "2 failed, 51 passed"),
    ("_PYTEST_FAILED", "search", "FAILED tests/test_api.py::test_login - assert 401 == 200",
     "  FAILED tests/test_api.py::test_login"),
    ("_UNITTEST", "search", "Ran 12 tests in 0.003s", "Ran 12 tests"),
    ("_BUN", "search", "@app/core test: Ran 5 tests across 1 file. [11.88s]", "    Ran 5 tests across 1 file."),
    ("_BUN_COUNT", "match", " 3 pass", "3 passed files"),
    ("_BUN_FAILED", "search", "(fail) grade > marks it [2380.96ms]", "  (fail) quoted"),
    ("_UNITTEST_RESULT", "search", "FAILED (failures=2)", "  OK"),
    ("_UNITTEST_FAILED", "search", "FAIL: test_total (billing.tests.InvoiceTest)", "FAIL: test_total"),
    ("_JEST", "search", "Tests:       2 failed, 36 passed, 38 total", "Tests:       2 failed, 36 passed"),
    ("_JEST_FAILED", "search", "  ● Checkout › applies the discount", "  ● Test suite failed to run"),
    ("_VITEST", "search", "      Tests  2 failed | 239 passed (241)", "      Tests  241 passed"),
    ("_VITEST_FAILED", "search", " FAIL  src/cart.test.ts > applies the discount", " PASS  src/cart.test.ts"),
    ("_MOCHA", "search", "  5 passing (20ms)", "  5 passing tests"),
    ("_MOCHA_FAILED", "search", "  1) Cart\n       applies the discount:", "1) Cart"),
    ("_GO_TEST", "search", "--- FAIL: TestCheckout (0.01s)", "=== RUN   TestCheckout"),
    ("_GO_PACKAGE", "search", "ok  \tgithub.com/acme/shop/cart\t0.412s", "ok  \tgithub.com/acme/shop/cart"),
    ("_CARGO", "search", "test result: FAILED. 11 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
     "test result: ok. 12 passed"),
    ("_CARGO_FAILED", "search", "test cart::applies_discount ... FAILED", "test cart::applies_discount ... ok"),
    ("_EXUNIT", "search", "3 doctests, 65 tests, 1 failure", "65 tests"),
    ("_EXUNIT_FAILED", "search", "  1) test applies the discount (Shop.CartTest)", "  1) applies the discount"),
    ("_RSPEC", "search", "10 examples, 2 failures", "10 examples"),
    ("_RSPEC_FAILED", "search", "rspec ./spec/cart_spec.rb:12 # Cart applies the discount", "bundle exec rspec"),
    ("BACKGROUND_RE", "search", "Command running in background with ID: bd0afab", "running in background"),
    ("OUTPUT_FILE_RE", "search", "/tmp/claude/tasks/bd0afab.output", "/tmp/claude/tasks/bd0afab.txt"),
    (r"(failures|errors|skipped)=(\d+)", "search", "FAILED (failures=2, errors=1)", "FAILED (failures: 2)"),
]

TEXT = [
    ("SYSTEM_REMINDER_RE", "search", "<system-reminder>The user opened app.py</system-reminder>",
     "<system-reminder>The user opened app.py"),
    ("BULLET_RE", "match", "- Keep the public API stable", "-Keep the public API stable"),
    ("BULLET_RE", "match", "2) Run the migrations", "2.Run the migrations"),
    ("HEADING_RE", "match", "## Constraints", "ground rules: keep it simple"),
    ("HEADING_RE", "match", "Ground rules:", "Ground rules: keep it simple"),
    ("SENTENCE_SPLIT_RE", "search", "Fix the bug. Then run the tests.", "Fix the bug in v1.2 first."),
    (r"\s+", "search", "Edit   /repo/app.py\n", "Edit"),
    ("HEADER_LINE_RE", "match", "Process exited with code 1", "the process exited with code 1"),
]

TODOS = [
    (r"#(\w+)", "search", "Task #3 created successfully: port the client", "Task created successfully"),
]

TOOLS = [
    ("DEFERRED_TAG_RE", "search", "<available-deferred-tools>\nWebFetch\nNotebookEdit\n</available-deferred-tools>",
     "<available-deferred-tools>"),
    ("ENTRY_LINE_RE", "match", "- WebFetch: fetch a URL and read it", "Fetch a URL and read it"),
    (r"\bmcp__\w+", "search", "mcp__github__create_issue is now available", "the github MCP server"),
    (r"^##\s+(\S+)\s*\n([\s\S]*?)(?=^##\s|\Z)", "search", "## github\nUse for issues and PRs.\n## linear\nTickets.",
     "# github\nUse for issues and PRs."),
]

TRACKER = [
    ("TRACKER_PROGRAM_RE", "search", "cd repo && bd close web-3kq", "git add abd.py && glabel x"),
    ("TRACKER_UPDATE_RE", "match", "bd update web-3kq --status in_progress", "bd show web-3kq"),
    ("_UPDATE_CMD", "search", "bd update web-3kq --status in_progress", "bd update web-3kq --priority 1"),
    ("_UPDATED", "search", "✓ Updated issue: web-3kq", "✓ Updated 3 issues"),
    ("_CLOSED", "search", "✓ Closed web-3kq.1: Checkout button", "✓ Closed web-3kq.1"),
    ("_CREATED", "search", "✓ Created issue: web-3kq.5\n  Title: Cart drops the coupon", "✓ Created issue: web-3kq.5"),
    ("_SHOWN", "search", "○ web-3kq [EPIC] · Checkout redesign   [● P2 · OPEN]", "○ web-3kq · Checkout redesign"),
    ("_RELATED", "search", "  ↳ ○ web-3kq.1: Extend the cart schema ● P2", "  - web-3kq.1: Extend the cart schema"),
    (r"(?:^|[\s;&|])bd\s", "search", "cd repo && bd update web-3kq", "abd list"),
    (r"\s*(?:&&|;|\|\|)\s*", "search", "git add -A && git commit -m fix", "git add -A"),
]

RUNTIMES = [
    ("_VERSION_RE", "search", "Python 3.11.7", "version 3"),
]

SESSION_CONTEXT = [
    ("_NOT_A_RESULT", "match", "Found 3 files", "src/found.py"),
    ("_CD", "match", "cd repo && make", "echo cd repo"),
    ("_DATE", "match", "2026-12-07T11:55:00Z", "Dec 7 2026"),
]

TABLES: dict[str, list[tuple[str, str, str, str]]] = {
    "approaches": APPROACHES, "calls": CALLS, "commands": COMMANDS, "observations": OBSERVATIONS, "plans": PLANS, "constraints": CONSTRAINTS, "errors": ERRORS, "files": FILES, "fileviews": FILEVIEWS, "findings": FINDINGS,
    "identifiers": IDENTIFIERS, "git": GIT, "progress": PROGRESS, "provenance": PROVENANCE, "shell": SHELL,
    "subagents": SUBAGENTS, "testsummary": TESTSUMMARY, "text": TEXT, "todos": TODOS, "tools": TOOLS,
    "tracker": TRACKER, "runtimes": RUNTIMES, "session_context": SESSION_CONTEXT,
}
# The names an inline f-string pattern uses, as the module has them where it builds the pattern.
FILLS: dict[str, dict[str, Any]] = {
    "identifiers": {"prefix": "web"},
    "subagents": {"name": "status"},
}


def _modules() -> list[str]:
    return sorted(p.stem for p in FACTS.glob("*.py") if p.stem != "__init__")


def _named(module: str) -> Iterator[tuple[str, re.Pattern[str]]]:
    """Every compiled pattern a module defines at its top level, nested in tuples and lists too."""
    loaded = importlib.import_module(f"worksurface.facts.{module}")
    tree = ast.parse((FACTS / f"{module}.py").read_text(encoding="utf-8"))
    defined = [t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]

    def walk(value: Any, label: str) -> Iterator[tuple[str, re.Pattern[str]]]:
        if isinstance(value, re.Pattern):
            yield label, value
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                yield from walk(item, f"{label}[{i}]")

    for name in defined:
        yield from walk(getattr(loaded, name), name)


def _inline(module: str) -> Iterator[tuple[str, str, re.Pattern[str]]]:
    """(key, how it is applied, pattern) of every inline `re.<function>(pattern, ...)` call of a module."""
    tree = ast.parse((FACTS / f"{module}.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and node.func.attr in INLINE_METHOD):
            continue
        first = node.args[0]
        flag_arg = next((k.value for k in node.keywords if k.arg == "flags"), None)
        if flag_arg is None and len(node.args) > FLAGS_AT[node.func.attr]:
            flag_arg = node.args[FLAGS_AT[node.func.attr]]
        flags = eval(ast.unparse(flag_arg), {"re": re}) if flag_arg is not None else 0  # noqa: S307 - our source
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            key, text = first.value, first.value
        else:
            source = ast.unparse(first)  # an f-string, unparsed with its backslashes doubled
            key = source.replace("\\\\", "\\")  # as written in the module: rf"...\w..." -> f'...\w...'
            text = eval(source, {"re": re}, FILLS.get(module, {}))  # noqa: S307 - our own source, our own fills
        yield key, INLINE_METHOD[node.func.attr], re.compile(text, flags)


def _patterns(module: str) -> dict[str, tuple[str | None, re.Pattern[str]]]:
    """key -> (how the module applies it, when the source says so; the pattern)."""
    found: dict[str, tuple[str | None, re.Pattern[str]]] = {name: (None, p) for name, p in _named(module)}
    for key, method, pattern in _inline(module):
        found[key] = (method, pattern)
    return found


ROWS = [pytest.param(module, *row, id=f"{module}.{row[0]}") for module, rows in TABLES.items() for row in rows]


@pytest.mark.parametrize("module, name, method, matching, near_miss", ROWS)
def test_a_pattern_matches_its_input_and_not_its_near_miss(module: str, name: str, method: str, matching: str,
                                                           near_miss: str) -> None:
    source_method, pattern = _patterns(module)[name]
    assert source_method in (None, method), f"{module}.{name} is applied with {source_method}, not {method}"
    apply = getattr(pattern, method)
    assert apply(matching) is not None, f"{module}.{name} does not match {matching!r}"
    assert apply(near_miss) is None, f"{module}.{name} matches the near-miss {near_miss!r}"


def test_every_pattern_has_a_row() -> None:
    missing = [f"{m}.{key}" for m in _modules() for key in _patterns(m) if key not in {r[0] for r in TABLES.get(m, [])}]
    assert not missing, f"patterns without a test row (add one to its module's table): {missing}"
    stale = [f"{m}.{r[0]}" for m, rows in TABLES.items() for r in rows if r[0] not in _patterns(m)]
    assert not stale, f"rows for patterns the module no longer has: {stale}"


def test_the_finder_sees_named_nested_and_inline_patterns() -> None:
    """The completeness check above is only as good as what `_patterns` finds: spot-check its reach."""
    found = {m: _patterns(m) for m in ("calls", "errors", "findings", "tracker", "subagents")}
    assert "EXIT_CODE_RE" in found["calls"] and "ERROR_LINE_RES[5]" in found["errors"]
    assert "FINDING_RES[4][1]" in found["findings"]
    assert found["tracker"][r"\s*(?:&&|;|\|\|)\s*"][0] == "search"  # re.split, by what it finds
    assert found["subagents"]["f'<{name}>(.*?)</{name}>'"][1].flags & re.S  # flags read off the call
    total = sum(len(_patterns(m)) for m in _modules())
    assert total == sum(len(rows) for rows in TABLES.values()) - _repeated_rows()


def _repeated_rows() -> int:
    """Rows beyond the first for one pattern (a second input shape, e.g. ID_ARG_RE's `#42`)."""
    return sum(len(rows) - len({r[0] for r in rows}) for rows in TABLES.values())


# --- the paths no other test walked (the patterns above never matched in a full run of the suite) ---

from builders import Convo  # noqa: E402

from worksurface.core.model import Message, Text, ToolResult  # noqa: E402
from worksurface.facts.calls import result_failed, tool_calls  # noqa: E402
from worksurface.facts.constraints import task_spec_origin, user_named  # noqa: E402
from worksurface.facts.files import file_activity  # noqa: E402
from worksurface.facts.subagents import subagent_tasks  # noqa: E402
from worksurface.facts.testsummary import parse_test_output  # noqa: E402
from worksurface.facts.tools import announced_tools  # noqa: E402


def test_an_exit_code_a_harness_appends_decides_failure_without_an_error_flag() -> None:
    """OpenHands reports a failed command only in its output (EXIT_CODE_RE)."""
    assert result_failed(ToolResult("c1", "ls: cannot access 'dist'\n[Command finished with exit code 2]"))
    assert not result_failed(ToolResult("c2", "dist/app.js\n[Command finished with exit code 0]"))
    assert not result_failed(ToolResult("c3", "the docs say: Exit code 1 means a lint error"))


def test_an_issue_tool_and_a_task_file_the_user_named_are_where_task_text_comes_from() -> None:
    c = Convo().user("Work on WEB-12, as TASK.md says.")
    c.tool("mcp__linear__get_issue", {"id": "WEB-12"}, "WEB-12: Cart drops the coupon\nAcceptance: coupons survive")
    c.tool("Read", {"file_path": "/repo/TASK.md"}, "# Task\nKeep coupons when the cart is edited.")
    c.tool("mcp__linear__create_issue", {"title": "x"}, "created WEB-13")
    c.tool("Read", {"file_path": "/repo/task_runner.py"}, "def run(): ...")
    named = user_named(c.messages)
    origins = [task_spec_origin(rec, named) for rec in tool_calls(c.messages)]
    assert origins[0] is not None and "get_issue" in origins[0]
    assert origins[1] == "/repo/TASK.md"
    assert origins[2:] == [None, None]


def test_what_the_user_named_before_a_point_is_found_once_per_needle_and_by_position() -> None:
    # Asked for every result of a session; once answered by scanning all the user's words each time.
    # Words come in any order (queued input is placed after the message it followed).
    from worksurface.facts.provenance import UserNamed

    said = [(-1, "see WEB-7 first"), (0, "fix the login"), (4, "then TASK.md"), (2, "queued: and WEB-9")]
    named = UserNamed(iter(said))  # a generator: read once, then asked many times
    expected = {("web-7", 0): True, ("web-9", 2): False, ("web-9", 3): True, ("task.md", 4): False,
                ("task.md", 5): True, ("login", 1): True, ("web-1", 9): False}
    for _ in range(2):
        for (needle, before), found in expected.items():
            assert named.at(before)(needle) is found, (needle, before)
    assert named("TASK.md") and not named("runner.py")


def test_a_line_count_at_the_end_of_head_is_not_a_file() -> None:
    c = Convo().user("look at the log")
    c.tool("Bash", {"command": "cat build.log | head -n 20"}, "line 1\nline 2")
    paths = {f.path for f in file_activity(c.messages)}
    assert any(p.endswith("build.log") for p in paths) and not any(p.endswith("20") for p in paths)


def test_mocha_failures_are_named() -> None:
    summary = parse_test_output("  4 passing (31ms)\n  1 failing\n\n  1) Cart\n       applies the discount:\n"
                                "     AssertionError: expected 90 to equal 81\n")
    assert summary is not None and summary.framework == "mocha" and summary.failed == 1
    assert summary.failing and summary.failing[0].startswith("Cart")


def test_a_sub_agent_answer_loses_the_resume_trailer() -> None:
    c = Convo().user("Find the flaky test.")
    c.tool("Task", {"description": "find flake", "prompt": "Find the flaky test", "subagent_type": "general"},
           "It is test_cart_total: it depends on dict order.\n\nagentId: a1b2c3 (for resuming to continue this "
           "agent's work if needed)")
    (task,) = subagent_tasks(c.messages)
    assert task.result.endswith("dict order.") and "agentId" not in task.result


def test_mcp_server_instructions_name_each_server() -> None:
    reminder = ("<system-reminder>\n# MCP Server Instructions\n\n## github\nUse for issues and pull requests; "
                "tools are named mcp__github__*.\n## linear\nTickets live here.\n</system-reminder>")
    messages = [Message("m0", "user", (Text("Start."),)), Message("m1", "user", (Text(reminder),))]
    (announcement,) = [a for a in announced_tools(messages) if a.kind == "mcp"]
    assert [e.name for e in announcement.entries] == ["github", "linear"]
    assert "issues and pull requests" in announcement.entries[0].purpose
