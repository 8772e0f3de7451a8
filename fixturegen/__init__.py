"""Synthetic Claude Code sessions of any length, for tests and benchmarks (50k to 5M tokens).

A session is a coding agent working on a fake Python service: a first request with standing
constraints, a todo plan, a skill, searches and reads (and re-reads), edits, failing then passing test
runs, a rejected approach, a lint error fixed, large outputs (logs, big files), repeated outputs, a
subdirectory and a worktree on another branch. After the opening episode, episodes are added until
the estimated size reaches the request; an episode that would overshoot is rolled back and a
question-and-answer exchange sized to the remainder closes the gap. Same seed, same bytes.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worksurface.core.fileio import atomic_write

from .records import CHARS_PER_TOKEN, Call, RecordWriter
from .repo import ENTITIES, FakeRepo, numbered, pytest_output

# Below this the opening episode alone overshoots the request by more than the promised tolerance.
MIN_TOKENS = 6_000
# Large outputs are 10k-30k tokens as in real sessions; Claude Code's Read refuses more than 25k
# tokens and its Bash keeps at most 30,000 characters.
LARGE_OUTPUT_TOKENS = (10_000, 25_000)
BASH_MAX_CHARS = 30_000
# An episode may overshoot the request by this fraction before it is rolled back.
OVERSHOOT = 0.03
# Share of episodes (after the first few of each kind) by kind.
EPISODE_WEIGHTS = {"feature": 7, "logs": 1, "big_read": 1, "repeat": 2, "subdir": 1, "question": 1}
# Kinds by typical size, so an episode too big for the remaining budget gives way to smaller ones.
EPISODE_SIZE_RANK = {"question": 0, "repeat": 1, "subdir": 2, "feature": 3, "worktree": 4, "logs": 5,
                     "big_read": 5}
# The last gap is closed by a question whose answer is sized to it, at most this long (a longer
# answer would read as filler).
FILLER_MAX_TOKENS = 2_500
CONSTRAINTS = (
    "don't touch migrations/ — schema changes go through the DBA team",
    "use pytest, not unittest (no TestCase classes, no unittest.mock either)",
    "always run `make lint` before committing",
)
EXTRA_CONSTRAINTS = ("keep the public function signatures in api.py unchanged",
                     "no new dependencies without asking me first",
                     "type hints on every new function")
PYTEST_ERRORS = ("AssertionError: assert 200 == 400",
                 "AssertionError: assert Decimal('10.01') == Decimal('10.00')",
                 "TypeError: list_orders() got an unexpected keyword argument 'page'",
                 "LookupError: order 17 not found")
NO_TABLE = "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) no such table: orders"
SKILL_NAME = "python-testing"
SKILL_BODY = (
    "# Python testing\n\nUse this skill when writing or fixing tests in a Python repository.\n\n"
    "## Rules\n- Tests are plain pytest functions; fixtures live in `conftest.py`.\n"
    "- Prefer real collaborators over mocks; use the project's database fixture when one exists.\n"
    "- One behaviour per test; name tests `test_<unit>_<condition>`.\n"
    "- Run the narrowest test selection first (`pytest path::name -q`), then the whole suite.\n"
    "- A failing test is evidence: read the traceback before changing code.\n\n"
    "## Checklist before reporting done\n1. New behaviour has a test that fails without the change.\n"
    "2. The whole suite passes.\n3. Lint passes.\n4. The summary names the files changed and the tests run.\n")
TODO_ACK = ("Todos have been modified successfully. Ensure that you continue to use the todo list to track "
            "your progress. Please proceed with the current tasks if applicable")
PROSE = (
    "The change keeps the existing call sites working, since the new parameters default to the old behaviour.",
    "I checked the callers with a search first so nothing outside this module depends on the old return type.",
    "The failing case was an off-by-one in the offset arithmetic rather than in the query itself.",
    "Rounding now happens once, at the end, which matches how the invoices are printed.",
    "I left the migration files alone; the column already exists, so no schema change was needed.",
    "The tests use the `db` fixture from conftest.py, so they exercise the real queries against SQLite.",
    "Lint is clean and the full suite passes locally.",
    "One thing to watch: the sync job retries on every 5xx, so a persistent outage will take five attempts to surface.",
    "The log shows the errors started right after the carrier API began returning paginated responses.",
    "This module mixes report formatting with data access; splitting them would make the rounding testable.",
    "Most of the functions are thin wrappers around the same query with a different filter.",
    "I kept the behaviour for archived records unchanged because the export relies on it.",
)


def generate_records(tokens: int, seed: int = 0) -> list[dict[str, Any]]:
    """Records of a Claude Code session of about `tokens` tokens (cl100k, as worksurface counts)."""
    if tokens < MIN_TOKENS:
        raise ValueError(f"tokens must be at least {MIN_TOKENS}, not {tokens}")
    return _Scenario(tokens, seed).run()


def generate_jsonl(tokens: int, seed: int = 0) -> str:
    """The session as Claude Code JSONL text (one record per line)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in generate_records(tokens, seed))


def write_session(path: str | os.PathLike[str], tokens: int, seed: int = 0) -> Path:
    """Generate and write a session file atomically; returns the path."""
    out = Path(path)
    atomic_write(out, generate_jsonl(tokens, seed))
    return out


def _active(item: str) -> str:
    """A todo's present-continuous form, as Claude Code shows it while the item is in progress."""
    verb, _, rest = item.partition(" ")
    ing = verb[:-1] + "ing" if verb.endswith("e") and verb != "Update" else verb + "ing"
    ing = {"Update": "Updating", "Commit": "Committing", "Run": "Running"}.get(verb, ing)
    return f"{ing} {rest}".strip()


@dataclass(frozen=True)
class _Task:
    """One user request: a function in a module to change, and the test file that covers it."""

    module: str
    func: str
    test: str
    request: str
    title: str


class _Scenario:
    """One session being written: the fake repo, the record writer, and the episodes."""

    def __init__(self, tokens: int, seed: int) -> None:
        self.target = tokens
        self.rng = random.Random(seed)
        self.repo = FakeRepo.create(self.rng)
        self.root = self.repo.home_root
        self.w = RecordWriter(self.rng, self.root, "main")
        self.todos: list[dict[str, str]] = []
        self.commits = 0
        self.in_worktree = False
        self.big_file: str | None = None
        self.last_pytest: str | None = None

    # --- driver -----------------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        self.w.hook_progress("SessionStart", "~/.claude/hooks/session-start.sh")
        self.opening(self.task())
        firsts = ["logs", "feature", "worktree", "big_read", "repeat", "subdir"]
        allowed = dict(EPISODE_WEIGHTS)
        while self.w.tokens < self.target * (1 - OVERSHOOT):
            kind = firsts.pop(0) if firsts else self.rng.choices(list(allowed), list(allowed.values()))[0]
            snap, files = self.w.snapshot(), dict(self.repo.files)
            state = (self.commits, self.in_worktree, self.root, self.big_file, self.last_pytest, list(self.todos))
            getattr(self, kind)()
            if self.w.tokens <= self.target * (1 + OVERSHOOT):
                continue
            self.w.restore(snap)
            self.repo.files = files
            (self.commits, self.in_worktree, self.root, self.big_file, self.last_pytest, self.todos) = state
            remaining = int(self.target - self.w.tokens)
            if remaining <= FILLER_MAX_TOKENS:
                self.question(remaining)
                break
            # Too big for what is left: from now on only the kinds smaller than this one.
            firsts = []
            allowed = {k: v for k, v in allowed.items() if EPISODE_SIZE_RANK[k] < EPISODE_SIZE_RANK[kind]}
        return self.w.records

    # --- helpers ----------------------------------------------------------------------------------

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def task(self) -> _Task:
        modules = sorted(p for p in self.repo.files if p.startswith("src/") and "legacy" not in p
                         and not p.endswith("__init__.py"))
        module = self.rng.choice(modules)
        funcs = re.findall(r"^def (\w+)\(", self.repo.files[module], re.M)
        func = self.rng.choice(funcs) if funcs else "create_app"
        stem = module.rsplit("/", 1)[1][:-3]
        test = f"tests/test_{stem}.py"
        ent = next((e for e in ENTITIES if e in func), self.rng.choice(ENTITIES))
        noun = ent.replace("_", " ")
        title, request = self.rng.choice((
            ("add pagination", f"Add pagination to `{func}` in {module}: accept `page` and `per_page` and "
                               "return a `next_page` cursor."),
            ("fix rounding", f"There's a rounding bug in `{func}` ({module}) — EUR totals come out a cent off. "
                             "Please fix it."),
            ("reject archived", f"`{func}` in {module} should raise a clear error for archived {noun}s instead "
                                "of returning stale data."),
            ("retry with backoff", f"Add retry with exponential backoff (max 5 attempts) around the {noun} "
                                   f"lookups in `{func}`."),
            ("log request id", f"Log the request id in `{func}` ({module}) so we can trace {noun} failures."),
            ("skip deleted", f"Make `{func}` in {module} skip {noun}s whose status is 'deleted'."),
        ))
        return _Task(module, func, test, request, f"{func}: {title}")

    def say(self, n: int = 2, extra: str = "") -> str:
        return " ".join([extra] * bool(extra) + self.rng.sample(PROSE, n))

    def todo_call(self, items: list[str], done: int) -> Call:
        old = self.todos
        self.todos = [{"content": c, "status": "completed" if i < done else "in_progress" if i == done else "pending",
                       "activeForm": _active(c)} for i, c in enumerate(items)]
        return Call("TodoWrite", {"todos": self.todos}, TODO_ACK,
                    tool_use_result={"oldTodos": old, "newTodos": self.todos})

    def read(self, rel: str, offset: int | None = None, limit: int | None = None, kind: str = "read") -> Call:
        text = self.repo.files[rel]
        lines = text.split("\n")
        start = offset or 1
        chosen = lines[start - 1:start - 1 + limit] if limit else lines
        inp: dict[str, Any] = {"file_path": self.path(rel)}
        if offset:
            inp.update(offset=offset, limit=limit)
        return Call("Read", inp, numbered("\n".join(chosen), start), kind, tool_use_result={
            "type": "text", "file": {"filePath": self.path(rel), "numLines": len(chosen),
                                     "startLine": start, "totalLines": len(lines)}})

    def grep(self, pattern: str, content: bool = False) -> Call:
        hits = [(p, i, line) for p in sorted(self.repo.files)
                for i, line in enumerate(self.repo.files[p].split("\n"), 1) if pattern in line]
        files = list(dict.fromkeys(self.path(p) for p, _, _ in hits))
        inp: dict[str, Any] = {"pattern": pattern, "path": self.root}
        if content:
            inp.update(output_mode="content", **{"-n": True})
            text = "\n".join(f"{self.path(p)}:{i}:{line}" for p, i, line in hits) or "No matches found"
            tur = {"mode": "content", "numFiles": len(files), "filenames": [], "numLines": len(hits)}
        else:
            plural = "s" * (len(files) != 1)
            text = f"Found {len(files)} file{plural}\n" + "\n".join(files) if files else "No files found"
            tur = {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)}
        return Call("Grep", inp, text, "read", tool_use_result=tur)

    def edit(self, rel: str, new_line: str | None = None, *, func: str | None = None,
             rejected: bool = False) -> Call:
        """Insert code after a function's first two lines, `func` if given (applied unless rejected)."""
        text = self.repo.files[rel]
        lines = text.split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith("def ") and i + 1 < len(lines)]
        mine = [i for i in starts if func and lines[i].startswith(f"def {func}(")]
        at = (mine or [self.rng.choice(starts)])[0] if starts else len(lines) - 2
        old = "\n".join(lines[at:at + 2])
        indent = "    " if starts else ""
        new_line = new_line or "\n".join(self.repo.snippet(self.rng.randint(3, 28)))
        new = old + "\n" + "\n".join(indent + line if line.strip() else line for line in new_line.split("\n"))
        return self.replace(rel, old, new, rejected=rejected)

    def replace(self, rel: str, old: str, new: str, *, rejected: bool = False) -> Call:
        """An Edit call replacing `old` by `new` in `rel` (applied to the repo unless rejected)."""
        text = self.repo.files[rel]
        if not rejected:
            self.repo.files[rel] = text.replace(old, new, 1)
        return Call("Edit", {"file_path": self.path(rel), "old_string": old, "new_string": new,
                             "replace_all": False},
                    f"The file {self.path(rel)} has been updated successfully.", rejected=rejected,
                    tool_use_result={"filePath": self.path(rel), "oldString": old, "newString": new,
                                     "replaceAll": False, "userModified": False})

    def bash(self, command: str, output: str, *, code: int = 0, kind: str = "prose",
             description: str | None = None) -> Call:
        if len(output) > BASH_MAX_CHARS:
            kept = output[-BASH_MAX_CHARS:]
            output = f"[{output[:-BASH_MAX_CHARS].count(chr(10))} lines truncated]\n\n" + kept.split("\n", 1)[-1]
        inp: dict[str, Any] = {"command": command}
        if description:
            inp["description"] = description
        content = f"Exit code {code}\n{output}" if code else output
        return Call("Bash", inp, content, kind, is_error=bool(code),
                    tool_use_result={"stdout": output[:400], "stderr": "", "interrupted": False, "isImage": False})

    def pytest(self, target: str, failures: int, error: str | None = None) -> Call:
        passed = self.rng.randint(38, 60)
        fails = [(f"{target.rstrip('/') if target.endswith('.py') else 'tests/test_api.py'}::test_"
                  f"{self.rng.choice(ENTITIES)}_{self.rng.choice(('paged', 'rounding', 'archived', 'retry'))}",
                  error or self.rng.choice(PYTEST_ERRORS)) for _ in range(failures)]
        out = pytest_output(self.rng, passed, fails, self.rng.uniform(1.2, 6.5))
        self.last_pytest = out
        return self.bash(f"python -m pytest {target} -q", out, code=1 if failures else 0,
                         description="Run the tests")

    def commit(self, message: str) -> Call:
        self.commits += 1
        sha = f"{self.rng.getrandbits(28):07x}"
        branch = self.w.branch
        return self.bash(f'git add -A && git commit -m "{message}"',
                         f"[{branch} {sha}] {message}\n {self.rng.randint(1, 4)} files changed, "
                         f"{self.rng.randint(5, 90)} insertions(+), {self.rng.randint(0, 20)} deletions(-)")

    # --- episodes ---------------------------------------------------------------------------------

    def opening(self, t: _Task) -> None:
        w, rng = self.w, self.rng
        rules = list(CONSTRAINTS) + [rng.choice(EXTRA_CONSTRAINTS)]
        w.user(t.request + "\n\nGround rules for this repo:\n" + "\n".join(f"- {r}" for r in rules))
        plan = [f"Find where {t.func} is defined and used", f"Change {t.func}", f"Add tests in {t.test}",
                "Run the test suite", "Run make lint and commit"]
        w.respond("I'll start by getting oriented in the repository, then make the change with tests.",
                  (self.todo_call(plan, 0),),
                  thinking=f"The user wants a change to {t.func}. Constraints: no migrations, pytest only, "
                           "lint before commit. First find the function and its tests.")
        globbed = [self.path(p) for p in sorted(self.repo.files) if p.endswith(".py")]
        w.respond(calls=(Call("Glob", {"pattern": "**/*.py"}, "\n".join(globbed), "read",
                              tool_use_result={"filenames": globbed, "numFiles": len(globbed), "truncated": False}),))
        w.respond(calls=(self.grep(f"def {t.func}"),))
        w.respond("Let me read the module and its tests.", (self.read(t.module), self.read_or_create_test(t)))
        w.respond(calls=(Call("Skill", {"skill": SKILL_NAME}, f"Launching skill: {SKILL_NAME}",
                              tool_use_result={"success": True, "commandName": SKILL_NAME}),))
        w.user(f"Base directory for this skill: /home/{self.repo.user}/.claude/skills/{SKILL_NAME}\n\n{SKILL_BODY}",
               meta=True)
        w.respond(calls=(self.todo_call(plan, 1),))
        w.respond(f"Now the change to `{t.func}`.", (self.edit(t.module, func=t.func),))
        new_test = t.test.replace(".py", f"_{t.func}.py")
        body = (f"from {self.repo.pkg}.{t.module.rsplit('/', 1)[1][:-3]} import {t.func}\n\n\n"
                f"def test_{t.func}_default(db):\n    assert {t.func} is not None\n")
        self.repo.files[new_test] = body
        w.respond(calls=(Call("Write", {"file_path": self.path(new_test), "content": body},
                              f"File created successfully at: {self.path(new_test)}",
                              tool_use_result={"type": "create", "filePath": self.path(new_test)}),))
        w.respond(calls=(self.pytest("tests/", 3, NO_TABLE),))
        w.respond("Three failures, all `OperationalError: no such table` — the new tests have no schema. "
                  "I'll mock the database session so the tests don't need one.",
                  (self.edit(new_test, "from unittest.mock import MagicMock\ndb = MagicMock()", rejected=True),))
        w.interrupted()
        w.user("no, don't mock the database — use the `db` fixture from tests/conftest.py, it gives each "
               "test a throwaway SQLite database with the schema applied")
        w.respond("Understood: no mocks, the real `db` fixture. Let me look at conftest.py.",
                  (self.read("tests/conftest.py"),))
        w.respond(calls=(self.edit(new_test, "result = " + t.func + "(db, 1)"),))
        w.respond(calls=(self.pytest("tests/", 0),))
        w.respond(calls=(self.todo_call(plan, 4),))
        w.respond("Tests pass. Running `make lint` before committing, as you asked.",
                  (self.bash("make lint", f"ruff check src tests\n{self.path(t.module)}:9:1: F401 [*] "
                                          "`decimal.Decimal` imported but unused\nFound 1 error.\n[*] 1 fixable "
                                          "with the `--fix` option.\nmake: *** [Makefile:9: lint] Error 1", code=2),))
        w.respond(calls=(self.replace(t.module, "from decimal import Decimal\n", ""),))
        w.respond(calls=(self.bash("make lint", "ruff check src tests\nAll checks passed!\nmypy src/"
                                                f"{self.repo.pkg}\nSuccess: no issues found in 14 source files"),))
        w.respond(calls=(self.commit(t.title),))
        w.respond(self.say(3, f"Done: `{t.func}` is changed in {t.module} with tests in {new_test}."))

    def read_or_create_test(self, t: _Task) -> Call:
        if t.test not in self.repo.files:
            self.repo.files[t.test] = self.repo.test_module(t.test[11:-3], 4)
        return self.read(t.test)

    def think(self, t: _Task) -> str:
        return (f"The request is about `{t.func}` in {t.module}. " + self.say(self.rng.randint(2, 5)) +
                f" Constraints still apply: {self.rng.choice(CONSTRAINTS)}.")

    def feature(self) -> None:
        w, t, rng = self.w, self.task(), self.rng
        w.user(t.request + (f" Reminder: {rng.choice(CONSTRAINTS)}." if rng.random() < 0.3 else ""))
        plan = [f"Locate {t.func}", f"Implement the change in {t.module}", "Update tests", "Run tests and lint",
                "Commit"]
        w.respond("Let me find the function and its callers.", (self.todo_call(plan, 0),), thinking=self.think(t))
        w.respond(calls=(self.grep(t.func, content=True),))
        related = rng.choice([p for p in sorted(self.repo.files) if p.startswith(f"src/{self.repo.pkg}/")
                              and p.endswith(".py") and p != t.module and "legacy" not in p])
        w.respond(calls=(self.read(t.module), self.read(related)))
        w.respond(f"`{t.func}` is the place to change; {related} only calls it.", (self.edit(t.module, func=t.func),),
                  thinking=self.think(t) if rng.random() < 0.5 else None)
        w.respond(calls=(self.pytest(t.test, rng.randint(1, 2)),))
        w.respond("The test expects the old behaviour; updating it.", (self.read_or_create_test(t),))
        if rng.random() < 0.4:
            rel = t.test.replace(".py", f"_{rng.choice(('edge', 'regression', 'paging'))}.py")
            body = self.repo.test_module(t.test[11:-3], rng.randint(3, 8))
            self.repo.files[rel] = body
            w.respond(calls=(Call("Write", {"file_path": self.path(rel), "content": body},
                                  f"File created successfully at: {self.path(rel)}", "code",
                                  tool_use_result={"type": "create", "filePath": self.path(rel)}),))
        else:
            w.respond(calls=(self.edit(t.test),))
        w.respond(calls=(self.pytest("tests/", 0),))
        w.respond(calls=(self.todo_call(plan, 4),))
        w.respond(calls=(self.bash("make lint", "ruff check src tests\nAll checks passed!"),))
        w.respond(calls=(self.commit(t.title),))
        w.respond(self.say(rng.randint(2, 4), f"Changed `{t.func}` in {t.module}; tests and lint pass."))

    def logs(self) -> None:
        w, t = self.w, self.task()
        error = f"ConnectionResetError: carrier API closed the connection while syncing {t.func}"
        w.user(f"The nightly sync failed again with `{error.split(':')[0]}`. Can you look at the worker log?")
        log_rel = "logs/worker.log"
        self.repo.files[log_rel] = self.repo.log_lines(self.rng.randint(1800, 2600), failing=error)
        tail = "\n".join(self.repo.files[log_rel].split("\n")[-self.rng.randint(120, 250):])
        w.respond(calls=(self.bash(f"tail -n 200 {log_rel}", tail, kind="log", description="Show the end of the log"),))
        if self.rng.random() < 0.5 and self.target - w.tokens > 3 * LARGE_OUTPUT_TOKENS[0]:
            lines = int(self._large_tokens() * CHARS_PER_TOKEN["log"] / 110)
            w.respond("The errors start earlier than the tail shows; reading the start of the log.",
                      (self.read(log_rel, 1, lines, kind="log"),))
        w.respond(calls=(self.grep("ERROR", content=False),))
        w.respond(calls=(self.read(t.module),), thinking=self.think(t))
        w.respond(f"Found it: `{t.func}` doesn't retry when the carrier drops the connection.",
                  (self.edit(t.module, "for attempt in range(5):\n    pass  # retry on ConnectionResetError",
                             func=t.func),))
        w.respond(calls=(self.pytest("tests/", 0),))
        w.respond(self.say(2, f"The `{error.split(':')[0]}` is handled now."))

    def big_read(self) -> None:
        w = self.w
        rel = f"src/{self.repo.pkg}/legacy/reports.py"
        if self.big_file is None:
            lines = int(self._large_tokens() * CHARS_PER_TOKEN["read"] / 46)
            self.repo.files[rel] = self.repo.big_module(lines)
            self.big_file = rel
        w.user(self.rng.choice(("Before we touch reporting: what does legacy/reports.py actually do? Summarize it.",
                                "Look at legacy/reports.py again — which functions still use the old totals?")))
        w.respond(calls=(self.read(rel),))
        w.respond(self.say(6, "It is a long module of report helpers."))

    def repeat(self) -> None:
        w = self.w
        w.user("what's the state of the branch?")
        status = (f"On branch {w.branch}\nnothing to commit, working tree clean" if self.rng.random() < 0.5 else
                  f"On branch {w.branch}\nChanges not staged for commit:\n  modified:   src/{self.repo.pkg}/api.py\n")
        w.respond(calls=(self.bash("git status", status),))
        w.respond(calls=(self.bash("git log --oneline -5", "\n".join(
            f"{self.rng.getrandbits(28):07x} {self.rng.choice(ENTITIES)}: fix" for _ in range(5))),))
        w.respond(calls=(self.bash("git status", status),))
        if self.last_pytest is not None:
            code = 1 if " failed" in self.last_pytest else 0
            w.respond("Re-running the suite to be sure.",
                      (self.bash("python -m pytest tests/ -q", self.last_pytest, code=code),))
        w.respond(f"Branch `{w.branch}`, {self.commits} commits this session; the suite is green.")

    def subdir(self) -> None:
        w = self.w
        w.user("The notifier worker has its own tests — run those too, and fix what breaks.")
        w.respond(calls=(self.bash("cd services/notifier && python -m pytest -q", pytest_output(
            self.rng, 4, [("tests/test_worker.py::test_worker_retry", "AssertionError: assert 3 == 5")], 0.8),
            code=1),))
        base = self.root
        w.cwd = f"{base}/services/notifier"
        w.respond(calls=(self.read("services/notifier/notifier/worker.py"),))
        w.respond(calls=(self.edit("services/notifier/notifier/worker.py", "max_attempts = 5"),))
        w.respond(calls=(self.bash("python -m pytest -q", pytest_output(self.rng, 5, [], 0.7)),))
        w.respond(calls=(self.bash("cd ../..", ""),))
        w.cwd = base
        w.respond("The notifier tests pass again (max attempts was 3, the test expects 5).")

    def worktree(self) -> None:
        w = self.w
        if self.in_worktree:
            return self.feature()
        self.in_worktree = True
        slug = f"{self.rng.choice(ENTITIES).replace('_', '-')}-{self.rng.choice(('sync', 'export', 'paging'))}"
        wt = f"{self.repo.home_root}-{slug}"
        w.user("Let's do the next part on its own branch in a worktree so main stays releasable.")
        w.respond(calls=(self.bash(f"git worktree add ../{wt.rsplit('/', 1)[1]} -b feature/{slug}",
                                   f"Preparing worktree (new branch 'feature/{slug}')\nHEAD is now at "
                                   f"{self.rng.getrandbits(28):07x} latest commit"),))
        w.respond(calls=(self.bash(f"cd {wt} && git branch --show-current", f"feature/{slug}"),))
        self.root = wt
        w.cwd, w.branch = wt, f"feature/{slug}"
        w.respond(f"Working in {wt} on `feature/{slug}` now.")
        self.feature()

    def question(self, budget: int | None = None) -> None:
        """A user question and a prose answer; with `budget`, sized to about that many tokens."""
        w = self.w
        w.user(self.rng.choice(("Why did you structure it that way?", "Anything risky in what we changed today?",
                                "Summarize where we are.")))
        budget = budget if budget is not None else self.rng.randint(300, 900)
        chars = max(0, budget - 20) * CHARS_PER_TOKEN["prose"]
        parts: list[str] = []
        while sum(len(p) + 1 for p in parts) < chars:
            parts.append(self.rng.choice(PROSE))
        w.respond(" ".join(parts) or "Nothing else to add.")

    def _large_tokens(self) -> int:
        low, high = LARGE_OUTPUT_TOKENS
        room = int((self.target - self.w.tokens) * 0.6)
        return max(low // 2, min(self.rng.randint(low, high), room))

