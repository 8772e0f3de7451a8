"""The one test-output parser: the summary line verbatim, the counts, and the failing test names.

Shared by the status bar (verification section), the summary (test runs, identifiers) and the error
facts, so they never disagree about one output. Runners: pytest, unittest, jest, vitest, mocha,
go test, cargo test, ExUnit (mix test), RSpec, bun test. When several summaries appear in one output, the one
printed last wins: it describes the latest run.

Provenance (text inside a tool result is an observation, never a fact): a summary counts only when the call that printed it ran tests
(`is_test_command` on the command in the call's own arguments), or read a file such a command wrote.
`cat notes.txt` printing "999 passed" is not a test run.
"""

from __future__ import annotations

import functools
import posixpath
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from ..core.model import ToolCall
from ..core.toolkinds import call_path, normalize_name, shell_command, tool_kind
from .fileviews import CODEX_RUNNING_RE, numbered_lines, split_header
from .provenance import harness_tool
from .shell import simple_commands

# Failing test names carried per run: enough to say what to fix next.
MAX_FAILING = 5
# The summary line is kept verbatim up to this length.
MAX_SUMMARY_CHARS = 240

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ITEM = re.compile(r"(\d+) ([a-z]+)")

# Programs and subcommands that run a test suite. `make test`, `npm run test:unit` and scripts named
# like `run_tests.sh` count too; a wrapper (`uv run`, `poetry run`, `bundle exec`, `npx`) is looked through.
TEST_PROGRAMS = {"pytest", "py.test", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "tox", "nox",
                 "nosetests", "ava", "tap", "karma", "playwright", "cypress", "behave", "trial"}
TEST_SUBCOMMANDS = {
    "go": {"test"}, "cargo": {"test", "nextest"}, "mix": {"test"}, "npm": {"test", "t"},
    "pnpm": {"test", "t"}, "yarn": {"test"}, "bun": {"test"}, "deno": {"test"}, "dotnet": {"test"},
    "swift": {"test"}, "gradle": {"test", "check"}, "./gradlew": {"test", "check"}, "mvn": {"test", "verify"},
    "make": {"test", "check", "tests"}, "rake": {"test", "spec"}, "elixir": {"test"}, "zig": {"test"},
    "stack": {"test"}, "cabal": {"test"}, "lein": {"test"}, "sbt": {"test"}, "flutter": {"test"},
    "dart": {"test"}, "julia": set(), "busted": set(),
}
WRAPPERS = {"uv": 1, "poetry": 1, "pipenv": 1, "bundle": 1, "npx": 0, "pnpx": 0, "bunx": 0, "hatch": 1,
            "pdm": 1, "rye": 1, "xvfb-run": 0, "dotenv": 0}
RUN_SCRIPT_RE = re.compile(r"^(?:test|tests|check)(?:[:_-][\w:-]*)?$")
SCRIPT_RE = re.compile(r"(?:^|[/_-])(?:run_?)?tests?(?:[_.-]\w+)*\.(?:sh|py|bash)$|(?:^|/)test$")


@dataclass(frozen=True)
class TestSummary:
    """One run's summary: runner, counts, failing names, and the summary line as printed."""

    __test__ = False  # not a pytest test class, despite the name

    runner: str
    passed: int
    failed: int
    skipped: int
    failing: tuple[str, ...] = ()
    summary: str = ""
    position: int = 0  # where the summary line starts in the output

    @property
    def framework(self) -> str:
        return self.runner


def is_test_command(command: str) -> bool:
    """Whether a command line runs a test suite (any of its simple commands)."""
    for sc in simple_commands(command):
        words = list(sc.words)
        while words and words[0] in WRAPPERS:
            skip = WRAPPERS[words[0]]
            words = words[1 + skip:] if skip and len(words) > 1 and words[1] in ("run", "exec") else words[1:]
        if not words:
            continue
        prog = posixpath.basename(words[0])
        args = _arguments(words[1:])
        if prog in ("python", "python3", "py") and "-m" in words:
            mod = words[words.index("-m") + 1] if words.index("-m") + 1 < len(words) else ""
            if mod in ("pytest", "unittest", "nose", "nose2", "tox", "django") or mod.endswith("test"):
                return True
            if mod == "django" and "test" in args:
                return True
        if prog in ("python", "python3") and args and posixpath.basename(args[0]) in ("manage.py", "runtests.py") \
                and (len(args) == 1 or "test" in args):
            return True
        if prog in TEST_PROGRAMS:
            return True
        if prog in TEST_SUBCOMMANDS and args:
            if args[0] in TEST_SUBCOMMANDS[prog]:
                return True
            if prog in ("npm", "pnpm", "yarn", "bun") and args[0] == "run" and len(args) > 1 \
                    and RUN_SCRIPT_RE.match(args[1]):
                return True
            if prog in ("yarn", "pnpm") and RUN_SCRIPT_RE.match(args[0]):
                return True
        if SCRIPT_RE.search(words[0]) or (prog in ("bash", "sh", "zsh") and args and SCRIPT_RE.search(args[0])):
            return True
    return False


# Options of package managers that take a value (a workspace selector, a directory), so the value is
# not read as the subcommand: `pnpm --filter @app/core test`, `npm -w packages/a test`.
VALUE_OPTIONS = frozenset({"--filter", "-F", "-C", "--dir", "--workspace", "-w", "--prefix", "--cwd"})


def _arguments(words: Sequence[str]) -> list[str]:
    """The words that are not options (nor the values of the options above), in order; `yarn
    workspace NAME` selects a workspace the same way."""
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in VALUE_OPTIONS:
            skip = True
        elif not w.startswith("-"):
            out.append(w)
    if len(out) >= 2 and out[0] == "workspace":
        out = out[2:]
    return out


def _items(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for n, word in _ITEM.findall(text):
        out[word] = out.get(word, 0) + int(n)
    return out


def _names(pattern: re.Pattern[str], text: str) -> tuple[str, ...]:
    seen: list[str] = []
    for m in pattern.finditer(text):
        name = m.group(1).strip()
        if name and name not in seen:
            seen.append(name)
    return tuple(seen[:MAX_FAILING])


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match in `text` (the latest run when an output holds several)."""
    last = None
    for last in pattern.finditer(text):
        pass
    return last


def _line(text: str, m: re.Match[str]) -> str:
    """The whole line a match sits on, stripped of the `=` rules pytest draws around it."""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.start())
    return text[start: end if end >= 0 else len(text)].strip().strip("=").strip()


Found = tuple[int, TestSummary]

_PYTEST = re.compile(r"^[= ]*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|"
                     r"warnings?|rerun)(?:, )?)+) in [\d.]+s\b.*$|^[= ]*no tests ran in [\d.]+s", re.M)
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def _pytest(text: str) -> Found | None:
    m = _last(_PYTEST, text)
    if m is None:
        return None
    n = _items(m.group(1) or "")
    return m.start(), TestSummary("pytest", n.get("passed", 0) + n.get("xpassed", 0),
                                  n.get("failed", 0) + n.get("error", 0) + n.get("errors", 0),
                                  n.get("skipped", 0) + n.get("xfailed", 0),
                                  _names(_PYTEST_FAILED, text), _line(text, m))


_UNITTEST = re.compile(r"^Ran (\d+) tests? in [\d.]+s$", re.M)
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED)\b.*$", re.M)
_UNITTEST_FAILED = re.compile(r"^(?:FAIL|ERROR): (\S+ \([\w.]+\))", re.M)


def _unittest(text: str) -> Found | None:
    m = _last(_UNITTEST, text)
    if m is None:
        return None
    result = _UNITTEST_RESULT.search(text, m.end())
    line = _line(text, m) + (f" {result.group(0).strip()}" if result else "")
    counts = dict((k, int(v)) for k, v in re.findall(r"(failures|errors|skipped)=(\d+)", result.group(0))) \
        if result else {}
    failed = counts.get("failures", 0) + counts.get("errors", 0)
    skipped = counts.get("skipped", 0)
    return m.start(), TestSummary("unittest", max(int(m.group(1)) - failed - skipped, 0), failed, skipped,
                                  _names(_UNITTEST_FAILED, text), line)


_JEST = re.compile(r"^\s*Tests:\s+(.*\d+ total)\s*$", re.M)
_JEST_FAILED = re.compile(r"^\s*● (?!Test suite failed to run)(.+)$", re.M)


def _jest(text: str) -> Found | None:
    # `\s*` may start the match on a blank line before it: the summary is the matched text itself.
    return _counted("jest", _JEST, _JEST_FAILED, text, lambda m: text[m.start(): m.end()].strip())


_VITEST = re.compile(r"^\s*Tests\s+((?:\d+ [a-z]+(?: \| )?)+)\s*\(\d+\)\s*$", re.M)
_VITEST_FAILED = re.compile(r"^\s*(?:FAIL|×)\s+(.+?)\s*$", re.M)


def _vitest(text: str) -> Found | None:
    return _counted("vitest", _VITEST, _VITEST_FAILED, text, lambda m: _line(text, m))


def _counted(runner: str, summary: re.Pattern[str], failed: re.Pattern[str], text: str,
             line: Callable[[re.Match[str]], str]) -> Found | None:
    """Runners whose summary lists counts by word (`3 passed | 1 failed | 2 todo`); todo counts as skipped."""
    m = _last(summary, text)
    if m is None:
        return None
    n = _items(m.group(1))
    return m.start(), TestSummary(runner, n.get("passed", 0), n.get("failed", 0),
                                  n.get("skipped", 0) + n.get("todo", 0), _names(failed, text), line(m))


_MOCHA = re.compile(r"^\s*(\d+) (passing|failing|pending) \([\d.]+m?s\)\s*$|^\s*(\d+) (failing|pending)\s*$", re.M)
_MOCHA_FAILED = re.compile(r"^\s+\d+\) (.+?):?\s*$", re.M)


def _mocha(text: str) -> Found | None:
    matches = list(_MOCHA.finditer(text))
    if not matches or not any(m.group(2) for m in matches):
        return None
    counts = {"passing": 0, "failing": 0, "pending": 0}
    for m in matches:
        counts[m.group(2) or m.group(4)] += int(m.group(1) or m.group(3))
    line = "; ".join(text[m.start(): m.end()].strip() for m in matches)
    return matches[-1].start(), TestSummary("mocha", counts["passing"], counts["failing"], counts["pending"],
                                            _names(_MOCHA_FAILED, text) if counts["failing"] else (), line)


_GO_TEST = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)", re.M)
_GO_PACKAGE = re.compile(r"^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)).*$", re.M)


def _go(text: str) -> Found | None:
    """Top-level `--- PASS/FAIL` lines (go test -v) counted per test, else packages counted."""
    tests = list(_GO_TEST.finditer(text))
    packages = list(_GO_PACKAGE.finditer(text))
    line = _line(text, packages[-1]) if packages else ""
    if tests:
        counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for m in tests:
            counts[m.group(1)] += 1
        failing = tuple(dict.fromkeys(m.group(2) for m in tests if m.group(1) == "FAIL"))
        last = max(tests[-1].start(), packages[-1].start() if packages else 0)
        return last, TestSummary("go", counts["PASS"], counts["FAIL"], counts["SKIP"], failing[:MAX_FAILING],
                                 line or _line(text, tests[-1]))
    if not packages:
        return None
    ok = sum(1 for m in packages if m.group(1) == "ok")
    return packages[-1].start(), TestSummary("go", ok, len(packages) - ok, 0, (), line)


_CARGO = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored.*$", re.M)
_CARGO_FAILED = re.compile(r"^test (\S+) \.\.\. FAILED$", re.M)


def _cargo(text: str) -> Found | None:
    """cargo prints one `test result:` line per test binary: they add up."""
    matches = list(_CARGO.finditer(text))
    if not matches:
        return None
    total = [sum(int(m.group(i)) for m in matches) for i in (1, 2, 3)]
    return matches[-1].start(), TestSummary("cargo", total[0], total[1], total[2], _names(_CARGO_FAILED, text),
                                            _line(text, matches[-1]))


_EXUNIT = re.compile(r"^((?:\d+ (?:doctests?|properties|property|tests?), )*"
                     r"\d+ (?:doctests?|tests?|properties|property), \d+ failures?(?:, \d+ [a-z]+)*)"
                     r"(?: \([^)]*\))?\s*$", re.M)
_EXUNIT_FAILED = re.compile(r"^\s+\d+\) (test .+?)(?: \([\w.]+\))?$", re.M)


def _exunit(text: str) -> Found | None:
    """ExUnit counts skipped, excluded and invalid tests in its totals."""
    m = _last(_EXUNIT, text)
    if m is None:
        return None
    n = _items(m.group(1))
    total = sum(n.get(k, 0) for k in ("doctest", "doctests", "test", "tests", "property", "properties"))
    failed = n.get("failure", 0) + n.get("failures", 0) + n.get("invalid", 0)
    skipped = n.get("skipped", 0) + n.get("excluded", 0)
    return m.start(), TestSummary("exunit", max(total - failed - skipped, 0), failed, skipped,
                                  _names(_EXUNIT_FAILED, text), _line(text, m))


_RSPEC = re.compile(r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?.*$", re.M)
_RSPEC_FAILED = re.compile(r"^rspec (\S+)", re.M)


def _rspec(text: str) -> Found | None:
    m = _last(_RSPEC, text)
    if m is None:
        return None
    total, failed, pending = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    return m.start(), TestSummary("rspec", max(total - failed - pending, 0), failed, pending,
                                  _names(_RSPEC_FAILED, text), _line(text, m))


# bun test ends with count lines (` 3 pass`, ` 2 fail`, ` 16 expect() calls`) above `Ran 5 tests across
# 1 file. [11.88s]`; each failing test is a `(fail) describe > name [12.00ms]` line. Run through a
# workspace filter (`bun --filter '*' test`), every line starts with its package and script (`@app/core test: `).
_BUN_PREFIX = r"(?:[@\w./-]+ [\w:.-]+: )?"
_BUN = re.compile(rf"^({_BUN_PREFIX})Ran (\d+) tests? across (\d+) files?\.(?: \[[\d.]+m?s\])?[ \t]*$", re.M)
_BUN_COUNT = re.compile(r"^\s*(\d+) (pass|fail|skip|todo|errors?|snapshots?|expect\(\) calls)\b.*$")
_BUN_FAILED = re.compile(rf"^{_BUN_PREFIX}\(fail\) (.+?)(?: \[[\d.]+m?s\])?[ \t]*$", re.M)


def _bun(text: str) -> Found | None:
    m = _last(_BUN, text)
    if m is None:
        return None
    prefix = m.group(1)
    above = text[: m.start()].rstrip("\n").split("\n")
    counts: dict[str, int] = {}
    rows: list[str] = []
    for row in reversed(above):
        c = _BUN_COUNT.match(row[len(prefix):]) if row.startswith(prefix) else None
        if c is None:
            break
        counts[c.group(2)] = int(c.group(1))
        rows.insert(0, row[len(prefix):].strip())
    if "pass" not in counts and "fail" not in counts:
        return None
    start = m.start() - sum(len(r) + 1 for r in above[len(above) - len(rows):])
    failed = counts.get("fail", 0)
    names = _names(_BUN_FAILED, text[:m.start()]) if failed else ()
    summary = prefix + "; ".join(rows + [text[m.start(2) - len("Ran "): m.end()].strip()])
    return max(start, 0), TestSummary("bun", counts.get("pass", 0), failed,
                                      counts.get("skip", 0) + counts.get("todo", 0), names, summary)


PARSERS: tuple[Callable[[str], Found | None], ...] = (
    _pytest, _unittest, _jest, _vitest, _mocha, _go, _cargo, _exunit, _rspec, _bun)
# Literals a parser's summary cannot be found without (one of them): a substring test per parser
# spares most outputs, which hold no test summary, the scans for nine runners' summary lines.
NEEDS: dict[Callable[[str], Found | None], tuple[str, ...]] = {
    _pytest: (" in ",), _unittest: ("Ran ",), _jest: ("Tests:",), _vitest: ("Tests",),
    _mocha: ("passing", "failing", "pending"), _go: ("--- ", "ok", "FAIL"), _cargo: ("test result: ",),
    _exunit: (" failure",), _rspec: (" example",), _bun: (" across ",),
}


def _may_hold(parser: Callable[[str], Found | None], text: str) -> bool:
    return any(literal in text for literal in NEEDS[parser])


# The status bar's watcher and the ledger's test runs read the same new outputs on one call.
@functools.lru_cache(maxsize=64)
def parse_test_output(output: str) -> TestSummary | None:
    """The summary of the last test run printed in `output`, or None when there is none."""
    text = _ANSI.sub("", output)
    found = [r for r in (p(text) for p in PARSERS if _may_hold(p, text)) if r is not None]
    if not found:
        return None
    position, summary = max(found, key=lambda r: r[0])
    line = summary.summary if len(summary.summary) <= MAX_SUMMARY_CHARS else \
        summary.summary[: MAX_SUMMARY_CHARS - 1] + "…"
    return TestSummary(summary.runner, summary.passed, summary.failed, summary.skipped, summary.failing,
                       line, position)


# "Command running in background with ID: b0be39e" (Claude Code Bash with run_in_background).
BACKGROUND_RE = re.compile(r"running in background with ID: (\w+)")
# Output files a background command writes (`<id>.output`); reading one shows that command's output.
OUTPUT_FILE_RE = re.compile(r"([\w-]+)\.(?:output|log)$")
# Tools that fetch a background task's output, and the input keys naming the task. Codex's write_stdin
# polls (or types into) the exec_command session its header named (`Process running with session ID N`).
TASK_OUTPUT_TOOLS = ("taskoutput", "bashoutput", "write_stdin")
TASK_ID_KEYS = ("task_id", "bash_id", "shell_id", "id", "session_id")
# Programs that print a file (the output of a test run written to it earlier).
FILE_PRINTERS = {"cat", "tail", "head", "less", "more", "bat", "nl", "grep", "rg"}


class TestRunWatcher:
    """Sees tool calls in order and says which outputs are test runs, with the test command.

    A test command's output counts where it is printed: in its own result, in a background task's
    output fetched later, or in a file it wrote (`pytest > out.txt`) printed or read later. The
    progress reader (reading.py) keeps one watcher for a whole transcript, so a run printed calls
    after its command is still a run."""

    __test__ = False

    def __init__(self) -> None:
        self.background: dict[str, str] = {}
        self.written: dict[str, str] = {}

    def observe(self, call: ToolCall, output: str) -> tuple[str, TestSummary] | None:
        """(test command, summary) when this call's output shows a test run, else None."""
        kind = tool_kind(call)
        name = normalize_name(call.name)
        # Only a run of the harness's own tools is a verification result: an MCP server's `bash` or
        # `run_tests` prints what that server says (provenance.harness_tool).
        own = harness_tool(call)
        command = shell_command(call) if kind == "shell" and own else None
        source: str | None = None
        if command is not None and name not in TASK_OUTPUT_TOOLS:
            line = _command_line(command)
            if is_test_command(command):
                source = line
                for path in _test_outputs(command):
                    self.written[path] = line
                bg = BACKGROUND_RE.search(output)
                if bg:
                    self.background[bg.group(1)] = line
                session = running_session(output)
                if session is not None:
                    self.background[session] = line
            else:
                source = next((c for c in map(self._file_source, _printed_files(command)) if c), None)
        elif name in TASK_OUTPUT_TOOLS and own:
            task = next((str(call.input[k]) for k in TASK_ID_KEYS
                         if isinstance(call.input.get(k), (str, int)) and not isinstance(call.input.get(k), bool)), None)
            source = self.background.get(task) if task else None
        elif kind == "read":
            path = call_path(call) or ""
            source = self._file_source(path)
            lines = numbered_lines(output) if source else None
            if lines:  # a line-numbered read (Claude Code Read, cat -n): the file's own lines
                output = "\n".join(lines[n] for n in sorted(lines))
        elif kind == "other" and "test" in name and own:
            source = call.name  # a test-running tool of the harness's own (a `run_tests` function)
        if source is None:
            return None
        summary = parse_test_output(output)
        return (source, summary) if summary is not None else None

    def _file_source(self, path: str) -> str | None:
        if not path:
            return None
        for written, command in self.written.items():
            if _same_file(path, written):
                return command
        m = OUTPUT_FILE_RE.search(path)
        return self.background.get(m.group(1)) if m else None


def running_session(output: str) -> str | None:
    """The session id a harness header says the command still runs in (Codex: `Process running with
    session ID N` above `Output:`), which later write_stdin calls poll; None otherwise."""
    header = split_header(output)
    if header is None:
        return None
    found = next((m for m in map(CODEX_RUNNING_RE.match, header[0]) if m), None)
    return found.group(1) if found else None


def _command_line(command: str) -> str:
    for line in command.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _same_file(a: str, b: str) -> bool:
    a, b = posixpath.normpath(a), posixpath.normpath(b)
    return a == b or a.endswith("/" + b.lstrip("./")) or b.endswith("/" + a.lstrip("./"))


def _test_outputs(command: str) -> list[str]:
    """Files a test command writes its output to: its `>` redirections and a `tee FILE` after it."""
    out: list[str] = []
    testing = False
    for sc in simple_commands(command):
        if is_test_command(" ".join(sc.words)):
            testing = True
            out += [p for p, _ in sc.writes]
        elif testing and sc.program == "tee":
            out += [a for a in sc.args if not a.startswith("-")]
    return out


def _printed_files(command: str) -> list[str]:
    """Files a command prints (`cat out.txt`, `tail -50 out.txt`)."""
    files: list[str] = []
    for sc in simple_commands(command):
        if sc.program in FILE_PRINTERS:
            files += [posixpath.normpath(a) for a in sc.args if not a.startswith("-") and not a.isdigit()]
        files += [posixpath.normpath(r) for r in sc.reads]
    return files
