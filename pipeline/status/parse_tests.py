"""Test-run summaries from tool output: pytest, jest, vitest, go test, cargo test, ExUnit (mix test).

Output is parsed into counts and a few failing test names; nothing else of it reaches the bar.
When several runners' summaries appear, the one printed last wins (it describes the latest run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# Failing test names carried per run: enough to say what to fix next.
MAX_FAILING = 5

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ITEM = re.compile(r"(\d+) ([a-z]+)")


@dataclass(frozen=True)
class TestSummary:
    __test__ = False  # not a pytest test class, despite the name

    runner: str
    passed: int
    failed: int
    skipped: int
    failing: tuple[str, ...] = ()


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


_PYTEST = re.compile(r"^[= ]*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|"
                     r"warnings?)(?:, )?)+) in [\d.]+s\b.*$|^[= ]*no tests ran in [\d.]+s", re.M)
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def _pytest(text: str) -> tuple[int, TestSummary] | None:
    matches = list(_PYTEST.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    n = _items(m.group(1) or "")
    return m.start(), TestSummary("pytest", n.get("passed", 0) + n.get("xpassed", 0),
                                  n.get("failed", 0) + n.get("error", 0) + n.get("errors", 0),
                                  n.get("skipped", 0) + n.get("xfailed", 0),
                                  _names(_PYTEST_FAILED, text))


_JEST = re.compile(r"^Tests:\s+(.*\d+ total)\s*$", re.M)
_JEST_FAILED = re.compile(r"^\s*● (?!Test suite failed to run)(.+)$", re.M)


def _jest(text: str) -> tuple[int, TestSummary] | None:
    matches = list(_JEST.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    n = _items(m.group(1))
    return m.start(), TestSummary("jest", n.get("passed", 0), n.get("failed", 0),
                                  n.get("skipped", 0) + n.get("todo", 0), _names(_JEST_FAILED, text))


_VITEST = re.compile(r"^\s*Tests\s+((?:\d+ [a-z]+(?: \| )?)+)\s*\(\d+\)\s*$", re.M)
_VITEST_FAILED = re.compile(r"^\s*(?:FAIL|×)\s+(.+?)\s*$", re.M)


def _vitest(text: str) -> tuple[int, TestSummary] | None:
    matches = list(_VITEST.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    n = _items(m.group(1))
    return m.start(), TestSummary("vitest", n.get("passed", 0), n.get("failed", 0),
                                  n.get("skipped", 0) + n.get("todo", 0), _names(_VITEST_FAILED, text))


_GO_TEST = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)", re.M)
_GO_PACKAGE = re.compile(r"^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))", re.M)


def _go(text: str) -> tuple[int, TestSummary] | None:
    """Top-level `--- PASS/FAIL` lines (go test -v) counted per test, else packages counted."""
    tests = list(_GO_TEST.finditer(text))
    if tests:
        counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for m in tests:
            counts[m.group(1)] += 1
        failing = tuple(dict.fromkeys(m.group(2) for m in tests if m.group(1) == "FAIL"))
        return tests[-1].start(), TestSummary("go", counts["PASS"], counts["FAIL"], counts["SKIP"],
                                              failing[:MAX_FAILING])
    packages = list(_GO_PACKAGE.finditer(text))
    if not packages:
        return None
    ok = sum(1 for m in packages if m.group(1) == "ok")
    return packages[-1].start(), TestSummary("go", ok, len(packages) - ok, 0)


_CARGO = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored", re.M)
_CARGO_FAILED = re.compile(r"^test (\S+) \.\.\. FAILED$", re.M)


def _cargo(text: str) -> tuple[int, TestSummary] | None:
    """cargo prints one `test result:` line per test binary: they add up."""
    matches = list(_CARGO.finditer(text))
    if not matches:
        return None
    total = [sum(int(m.group(i)) for m in matches) for i in (1, 2, 3)]
    return matches[-1].start(), TestSummary("cargo", *total, _names(_CARGO_FAILED, text))


_EXUNIT = re.compile(r"^((?:\d+ (?:doctests?|properties|property|tests?), )*"
                     r"\d+ (?:doctests?|tests?|properties|property), \d+ failures?(?:, \d+ [a-z]+)*)\s*$",
                     re.M)
_EXUNIT_FAILED = re.compile(r"^\s+\d+\) (test .+?)(?: \([\w.]+\))?$", re.M)


def _exunit(text: str) -> tuple[int, TestSummary] | None:
    """ExUnit counts skipped, excluded and invalid tests in its totals."""
    matches = list(_EXUNIT.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    n = _items(m.group(1))
    total = sum(n.get(k, 0) for k in ("doctest", "doctests", "test", "tests", "property", "properties"))
    failed = n.get("failure", 0) + n.get("failures", 0) + n.get("invalid", 0)
    skipped = n.get("skipped", 0) + n.get("excluded", 0)
    return m.start(), TestSummary("exunit", max(total - failed - skipped, 0), failed, skipped,
                                  _names(_EXUNIT_FAILED, text))


PARSERS: tuple[Callable[[str], tuple[int, TestSummary] | None], ...] = (
    _pytest, _jest, _vitest, _go, _cargo, _exunit)


def parse_test_summary(output: str) -> TestSummary | None:
    """The summary of the last test run printed in `output`, or None when there is none."""
    text = _ANSI.sub("", output)
    found = [r for r in (p(text) for p in PARSERS) if r is not None]
    if not found:
        return None
    return max(found, key=lambda r: r[0])[1]
