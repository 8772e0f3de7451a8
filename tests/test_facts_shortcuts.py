"""The extractors' shortcuts change no result (issue 28): the shell lexer reads a line as shlex does,
a pattern skipped for want of its literal could not have matched, and the facts of real sessions are
the same with the shortcuts as without them."""

from __future__ import annotations

import importlib
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from facts_transcripts import CLAUDE_CODE, LONG_SESSIONS, load
from shared import needs_shared
from worksurface import facts
from worksurface.core.toolkinds import tool_kind
from worksurface.facts import shell, testsummary
from worksurface.facts import git as git_facts
from worksurface.facts import tracker as tracker_facts

from worksurface.ledger.ledger import Ledger
from worksurface.offline.replay import call_points

identifiers_module = importlib.import_module("worksurface.facts.identifiers")  # the package's name is the function
filetracker_module = importlib.import_module("worksurface.facts.filetracker")
from worksurface.facts import fileviews  # noqa: E402
findings_module = importlib.import_module("worksurface.facts.findings")
approaches_module = importlib.import_module("worksurface.facts.approaches")
text_module = importlib.import_module("worksurface.facts.text")

# Characters that steer shlex: its whitespace and punctuation, quotes, the escape, and ones it treats
# as plain (other whitespace, `#` with no commenters, shell syntax it does not know).
SHELL_CHARS = list("ab -|&;()<>\t\r\n=./~*?#$`{}!\x0b\u00a0é2'\"\\")


def _shlex(line: str) -> list[str] | None:
    try:
        return shell._shlex_tokens(line)
    except ValueError:
        return None


@settings(max_examples=3000)
@given(st.text(alphabet=st.sampled_from(SHELL_CHARS), max_size=40))
@example("git commit -m \"fix: it's \\\"done\\\"\" && echo 'a\\b' | tee x\\ y")
@example("echo \"unclosed")
@example("trailing\\")
@example("\"\"|x ''")
def test_the_lexer_reads_a_line_as_shlex_does(line: str) -> None:
    lexed = shell._lex(line)
    assert lexed is None or lexed == _shlex(line)
    if lexed is None:  # only where shlex refuses the line (then the rough split decides, as before)
        assert _shlex(line) is None


# A matching example per pattern the identifiers skip without their literal (identifiers.REQUIRED).
MATCHING = {
    identifiers_module.BRANCH_RE: "On branch main\nnothing to commit",
    identifiers_module.COMMIT_RE: "[main 1a2b3c4] Fix the parser\n 1 file changed",
    identifiers_module.PUSH_RANGE_RE: "   05fd186..a230dbf  main -> main",
    identifiers_module.PUSH_NEW_RE: " * [new branch]      fix -> fix",
    identifiers_module.WORKTREE_LIST_RE: "/repo/wt  1a2b3c4 [feature]",
    identifiers_module.COMMIT_WORD_RE: "see commit 1a2b3c4d for it",
    identifiers_module.URL_RE: "at https://example.com/x",
    identifiers_module.JIRA_RE: "fixes PROJ-12 today",
}


def test_every_skipped_pattern_has_an_example() -> None:
    assert set(MATCHING) == set(identifiers_module.REQUIRED)
    for pattern, text in MATCHING.items():
        assert pattern.search(text) is not None and identifiers_module.REQUIRED[pattern] in text


@settings(max_examples=400)
@given(st.sampled_from(sorted(MATCHING, key=lambda p: p.pattern)), st.data())
def test_a_pattern_skipped_for_want_of_its_literal_could_not_have_matched(pattern: re.Pattern[str],
                                                                           data: st.DataObject) -> None:
    """Near misses of a match (characters deleted or replaced anywhere, the literal's among them):
    whenever the pattern still matches, its literal is there."""
    text = list(MATCHING[pattern])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text) - 1))
        text[at:at + 1] = data.draw(st.sampled_from(["", " ", "-", "]", "[", ":", "\n", "x", "1"]))
    mutated = "".join(text)
    if pattern.search(mutated) is not None:
        assert identifiers_module.REQUIRED[pattern] in mutated


def _commands(name: str) -> list[str]:
    messages, _ = load(name)
    return [rec.command for rec in facts.tool_calls(list(messages)) if tool_kind(rec.call) == "shell" and rec.command]


@needs_shared(CLAUDE_CODE)
@pytest.mark.parametrize("name", LONG_SESSIONS)
def test_every_command_line_of_a_long_session_lexes_as_with_shlex(name: str) -> None:
    lines = [line for command in _commands(name) for line, _ in shell._logical_lines(command)]
    assert lines
    for line in lines:
        lexed = shell._lex(line)
        assert lexed is None or lexed == _shlex(line), line


@needs_shared(CLAUDE_CODE)
def test_a_long_sessions_facts_are_the_same_without_the_shortcuts(monkeypatch: pytest.MonkeyPatch) -> None:
    messages, queued = load(LONG_SESSIONS[0])

    def read() -> tuple[object, ...]:
        window = list(messages)  # a new list: the per-list memos answer afresh
        shell._parsed.cache_clear()
        testsummary.parse_test_output.cache_clear()
        return (facts.identifiers(window), facts.file_activity(window), facts.excluded_approaches(window, queued),
                facts.standing_constraints(window, queued), facts.findings(window), facts.skills_invoked(window),
                facts.test_runs(window), facts.tool_errors(window), facts.commits(window),
                facts.tracker_updates(window))

    fast = read()
    monkeypatch.setattr(shell, "_lex", lambda line: None)
    monkeypatch.setattr(identifiers_module, "_may_match", lambda pattern, text: True)
    monkeypatch.setattr(git_facts, "may_match", lambda pattern, text, literals=None: True)
    monkeypatch.setattr(git_facts, "GIT_LITERALS", {k: "" for k in git_facts.GIT_LITERALS})  # every output may show history
    monkeypatch.setattr(tracker_facts, "TRACKER_PROGRAM_RE", re.compile(""))  # every command may name a tracker
    monkeypatch.setattr(testsummary, "_may_hold", lambda parser, text: True)
    slow = read()
    shell._parsed.cache_clear()
    testsummary.parse_test_output.cache_clear()
    assert fast == slow


_NAME_TEXT = st.text(alphabet="ab1_.- é٣\n", max_size=12)


@settings(max_examples=500, deadline=None)
@given(text=_NAME_TEXT, word=_NAME_TEXT)
@example(text="bd close web-3kq.1", word="web-3kq")
@example(text="closed bd-12, bd-123", word="bd-12")
def test_a_name_is_found_where_the_pattern_per_name_found_it(text: str, word: str) -> None:
    assert tracker_facts._names(text, word) == bool(re.search(rf"{re.escape(word)}(?![\w.])", text))


# A summary each test-output parser finds (testsummary.NEEDS: the literals it cannot find one without).
SUMMARIES = {
    testsummary._pytest: "FAILED tests/t.py::test_a - x\n=== 1 failed, 41 passed in 2.31s ===",
    testsummary._unittest: "Ran 12 tests in 0.003s\n\nFAILED (failures=2)",
    testsummary._jest: "Tests:       1 failed, 5 passed, 6 total",
    testsummary._vitest: " Tests  3 passed | 1 failed (4)",
    testsummary._mocha: "  4 passing (31ms)\n  1 failing",
    testsummary._go: "--- FAIL: TestX (0.00s)\nFAIL\tpkg/x\t0.01s",
    testsummary._cargo: "test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured",
    testsummary._exunit: "14 doctests, 65 tests, 1 failure, 2 skipped",
    testsummary._rspec: "10 examples, 2 failures",
    testsummary._bun: "(fail) parser > reads a header\n 3 pass\n 1 fail\n 9 expect() calls\nRan 4 tests across 1 file. [0.12s]",
}


def test_every_parser_has_an_example() -> None:
    assert set(SUMMARIES) == set(testsummary.PARSERS) == set(testsummary.NEEDS)
    for parser, text in SUMMARIES.items():
        assert parser(text) is not None and testsummary._may_hold(parser, text)


@settings(max_examples=600)
@given(st.sampled_from(sorted(SUMMARIES, key=lambda p: p.__name__)), st.data())
def test_a_parser_skipped_for_want_of_its_literals_would_have_found_nothing(parser, data: st.DataObject) -> None:
    text = list(SUMMARIES[parser])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text) - 1))
        text[at:at + 1] = data.draw(st.sampled_from(["", " ", "\n", "s", "x", "1", ":", "-"]))
    mutated = "".join(text)
    if parser(mutated) is not None:
        assert testsummary._may_hold(parser, mutated)


@needs_shared(CLAUDE_CODE)
@pytest.mark.parametrize("name", LONG_SESSIONS)
def test_the_file_marks_kept_between_calls_are_the_marks_of_every_file(name: str) -> None:
    """A session's ledger folds call by call; after each, the tracker's marks (only touched files
    marked again) are every tracked file's mark, in the tracker's order."""
    messages, _ = load(name)
    ledger = Ledger()
    calls = call_points(list(messages))
    assert len(calls) > 50
    for size in calls:
        ledger.update(list(messages[:size]))
        states = ledger.files._tracker.files
        assert list(ledger.files.file_marks().items()) == [(p, filetracker_module._mark(st)) for p, st in states.items()]


@needs_shared(CLAUDE_CODE)
def test_the_file_records_kept_between_calls_are_the_records_of_every_file() -> None:
    """After each call the ledger's file records (untouched files' kept) equal a fresh tracker's
    reading of the same states (every record rebuilt)."""
    messages, _ = load(LONG_SESSIONS[0])
    ledger = Ledger()
    for size in call_points(list(messages)):
        ledger.update(list(messages[:size]))
        fresh = filetracker_module.FileTracker.from_json(ledger.files.to_json())
        assert ledger.files.facts() == fresh.facts()


def _numbered_lines_row_by_row(text: str) -> dict[int, str] | None:
    """fileviews.shared_numbered_lines as it read a text before (each pattern matched against each row)."""
    rows = text.split("\n")
    for pattern in fileviews.NUMBERED_LINE_RES:
        found: dict[int, str] = {}
        for row in rows:
            m = pattern.match(row)
            if m:
                found.setdefault(int(m.group(1)), m.group(2))
        if found and len(found) * 2 >= sum(1 for r in rows if r.strip() and not r.startswith("<")):
            return found
    return None


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(["  12→a", "3→", "\t7\tb c", "4:x", "12:y", " ", "", "\t", "\r", "<tag>", "9",
                                 "→", "x→1", " 5 → z", "\x0b8→q", "٣→arabic digit", "\u20281→s", "10\t"]),
                max_size=12).map("\n".join))
@example("\n\n  1→a\n  2→b")
@example(" \n\t3\tx\n4:y")
def test_numbered_lines_read_at_once_are_the_rows_read_one_by_one(text: str) -> None:
    fileviews.shared_numbered_lines.cache_clear()
    assert fileviews.shared_numbered_lines(text) == _numbered_lines_row_by_row(text)


# The one-search prefilters and the patterns they join: (joined, parts).
JOINED = {
    "findings": (findings_module.ANY_FINDING_RE, [p for _, p in findings_module.FINDING_RES]),
    "approaches": (approaches_module.ABANDON_OR_DECIDED_RE, [approaches_module.ABANDON_RE,
                                                             approaches_module.DECIDED_RE]),
}
PHRASES = ["pre-existing", "the cause is", "caused by", "turns out", "instead, use", "should use x instead",
           "mypy reports", "So ", "Note: ", "didn't work", "switching to", "already handles", "not needed",
           "tech debt", "skipped as", "deferred", "rather than", "stale", "fails because", "the fix is"]


@settings(max_examples=1500)
@given(st.sampled_from(sorted(JOINED)),
       st.lists(st.one_of(st.sampled_from(PHRASES), st.text(alphabet="aeiost .,:'-\nSKI", max_size=8)), max_size=6))
def test_one_search_of_the_joined_patterns_matches_where_one_of_them_does(name: str, parts: list[str]) -> None:
    joined, patterns = JOINED[name]
    text = "".join(parts)
    assert (joined.search(text) is not None) == any(p.search(text) for p in patterns)


@needs_shared(CLAUDE_CODE)
def test_the_joined_patterns_agree_on_every_sentence_of_a_long_session() -> None:
    messages, _ = load(LONG_SESSIONS[0])
    sentences = [u.text for m in messages if m.role == "assistant" for u in text_module.units(m.text)]
    assert len(sentences) > 100
    for joined, patterns in JOINED.values():
        assert [joined.search(t) is not None for t in sentences] == [any(p.search(t) for p in patterns)
                                                                       for t in sentences]
