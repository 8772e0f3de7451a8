"""Output reducers on real tool outputs from the shared transcripts: noise goes, what matters stays."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import TRANSCRIPTS, needs_shared
from worksurface.core.config import IngestConfig
from worksurface.formats import read_transcript
from worksurface.engine.reduce_output import (_collapse_runs, collapse_progress, collapse_repeats, elide_log, is_important,
                                       is_progress, lost_important_lines, reduce_output, replace_blobs, resolve_redraws,
                                       shorten_json, strip_ansi)

CC = TRANSCRIPTS / "claude-code"
SESSION_8463 = CC / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
SESSION_258C = CC / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
SWE_CTF = TRANSCRIPTS / "swe-agent" / "demos__ctf__crypto__BabyTimeCapsule.traj"
CFG = IngestConfig()


@lru_cache(maxsize=8)
def _results(path: Path) -> dict[str, str]:
    return {r.call_id: r.content for m in read_transcript(path).messages for r in m.tool_results}


def output(path: Path, call_id: str) -> str:
    return _results(path)[call_id]


# --- real outputs ------------------------------------------------------------------------------

@needs_shared(SESSION_8463)
def test_vitest_colors_go_and_test_names_paths_and_warnings_stay():
    raw = output(SESSION_8463, "toolu_019CpL49DWBenUxVVCWEXz3L")  # `npx vitest run`, colored
    r = reduce_output(raw, CFG)
    assert "\x1b" not in r.text and "ansi" in r.kinds and not r.lossy
    for needle in ("test/terminal-rendering.test.js", "4 tests", "131", "/home/USER/projects/spotter-worktrees/spotter-fum/assets",
                   "WARN: Could not find the language 'cobol'", "toolu_019CpL49DWBenUxVVCWEXz3L.txt"):
        assert needle in r.text
    assert len(r.text) < len(raw) * 0.8
    assert lost_important_lines(raw, r.text) == []


@needs_shared(SESSION_8463)
def test_failing_mix_test_keeps_every_failure_and_loses_only_the_session_blobs():
    raw = output(SESSION_8463, "toolu_01Ha68auaBKQztW72yfwNvGJ")  # `mix test`, 11 failures
    r = reduce_output(raw, CFG)
    assert "blobs" in r.kinds and r.lossy
    assert "g2gDaAJhBnQAAAAIdwJpZG0AAAAUcGh4" not in r.text.replace("starts g2gDaAJhBnQAAAAI", "")
    for needle in ("Exit code 2", "12 tests, 11 failures", "1) test subagent rendering subagent click updates",
                   "test/spotter_web/live/session_live_test.exs:162", "(ArgumentError)",
                   "lib/oban/web/components/icons.ex:16", "warning: function svg_mini/1 is unused"):
        assert needle in r.text
    assert lost_important_lines(raw, r.text) == []


@needs_shared(SESSION_258C)
def test_a_long_compile_log_keeps_head_tail_and_every_warning():
    raw = output(SESSION_258C, "toolu_01UzVvupiB1fZ78NXnUiPWZE")  # deps compile, 322 lines
    cfg = IngestConfig(log_max_lines=100, log_head_lines=20, log_tail_lines=20)
    r = reduce_output(raw, cfg)
    assert "log" in r.kinds and r.lossy
    lines = raw.split("\n")
    assert r.text.startswith("\n".join(lines[:20])) and r.text.endswith("\n".join(lines[-20:]))
    assert "lines omitted ...]" in r.text
    for needle in ("lib/decoder.ex:264:82", "lib/decoder.ex:371:56", "Compiling 549 files (.ex)"):
        assert needle in r.text
    assert lost_important_lines(raw, r.text) == []
    assert r.text.count("\n") < raw.count("\n") * 0.8


@needs_shared(SWE_CTF)
def test_tqdm_bars_and_colors_go_but_the_flag_and_errors_stay():
    raw = next(c for c in _results(SWE_CTF).values() if "%|" in c)
    r = reduce_output(raw, CFG)
    assert {"ansi", "progress"} <= set(r.kinds)
    assert "  0%|          | 0/9999" not in r.text and "100%|██████████| 9999/9999" in r.text
    for needle in ("HTB{t3h_FuTUr3_15_bR1ghT_1_H0p3_y0uR3_W34r1nG_5h4d35!}",
                   "HEX : 0x4854427b7433685f4675545572335f31355f6252316768545f315f483070335f79307552335f57333472316e475f356834643335217d",
                   "[!] Composite not in factordb, couldn't factorize...", "[!] partial_d internal error..."):
        assert needle in r.text
    assert lost_important_lines(raw, r.text) == []


@needs_shared(SESSION_8463)
def test_a_file_read_is_never_reduced_beyond_escape_codes():
    raw = output(SESSION_8463, "toolu_01EaXG6Ejh3ZHazonqJs1DMo")  # Read of a fixture holding base64
    assert reduce_output(raw, CFG, lossy=False).text == raw
    assert "blobs" in reduce_output(raw, CFG).kinds  # the same text as a shell output would be


@needs_shared()
def test_no_reducer_loses_an_important_line_in_any_shared_transcript():
    checked = 0
    for path in sorted(CC.glob("*-*-*-*-*.jsonl")) + sorted((TRANSCRIPTS / "swe-agent").glob("*.traj")):
        for content in _results(path).values():
            r = reduce_output(content, CFG)
            if r.text == content or "json" in r.kinds:
                continue
            checked += 1
            assert lost_important_lines(content, r.text) == [], (path.name, content[:200])
    assert checked >= 5


# --- each reducer alone ------------------------------------------------------------------------

def test_strip_ansi_and_redraws():
    assert strip_ansi("\x1b[1m\x1b[31mFAIL\x1b[0m x.py \x1b]0;title\x07ok") == "FAIL x.py ok"
    assert resolve_redraws("Downloading 10%\rDownloading 55%\rDownloading 100%\ndone\r\n") == "Downloading 100%\ndone\n"


def test_progress_runs_keep_their_last_line_and_important_lines():
    lines = ["start", " 10%|█         | 1/10", " 50%|█████     | 5/10", "100%|██████████| 10/10", "end",
             "⠋ building", "⠙ building", "⠹ building failed: missing dep", "ok"]
    out = collapse_progress(lines)
    assert out == ["start", "100%|██████████| 10/10", "end", "⠹ building failed: missing dep", "ok"]


def test_repeated_lines_become_one_line_and_a_count():
    lines = ["a", "retry", "retry", "retry", "retry", "b", "", "", "", "c", "x", "x"]
    assert collapse_repeats(lines, 3) == ["a", "retry", "[previous line repeated 3 more times]", "b", "", "", "", "c",
                                          "x", "x"]


def test_blobs_are_noted_but_words_numbers_and_paths_are_not():
    blob = ("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk" * 5)
    text = f"token={blob}\n/usr/lib/python3.11/site-packages/very_long_module_name_without_spaces.py:12\n{'9' * 300}"
    out, changed = replace_blobs(text, 256)
    assert changed and blob not in out and f"base64 blob: {len(blob)} chars" in out
    assert "/usr/lib/python3.11/site-packages/very_long_module_name_without_spaces.py:12" in out and "9" * 300 in out
    assert replace_blobs("sha " + "ab12" * 80, 256)[0].startswith("sha [hex blob: 320 chars")


def test_long_json_arrays_keep_head_tail_and_error_items():
    items = [{"id": i, "status": "ok"} for i in range(100)]
    items[57] = {"id": 57, "status": "error", "detail": "timeout on /api/x"}
    text = json.dumps({"count": 100, "items": items}, indent=2)
    out, changed = shorten_json(text, 40, 10, 5)
    data = json.loads(out)
    assert changed and data["count"] == 100
    assert [x["id"] for x in data["items"][:10]] == list(range(10)) and data["items"][-1]["id"] == 99
    assert {"id": 57, "status": "error", "detail": "timeout on /api/x"} in data["items"]
    assert "... 84 of 100 items omitted ..." in data["items"]
    assert shorten_json("[1, 2, 3]", 40, 10, 5) == ("[1, 2, 3]", False)
    assert shorten_json("not json [", 40, 10, 5)[1] is False


def test_log_elision_keeps_errors_with_context_and_counts_the_gaps():
    lines = [f"line {i}" for i in range(1_000)]
    lines[500] = "ERROR: disk full on /var/data"
    out, changed = elide_log(lines, 400, 10, 10, 50)
    assert changed and out[:10] == lines[:10] and out[-10:] == lines[-10:]
    assert "line 499" in out and "ERROR: disk full on /var/data" in out
    assert f"[... {499 - 10} lines omitted ...]" in out
    assert elide_log(lines[:300], 400, 10, 10, 50) == (lines[:300], False)


@pytest.mark.parametrize("line", ["FAILED tests/test_a.py::test_x - assert 1 == 2", "E   AssertionError",
                                  "Traceback (most recent call last):", "npm ERR! code 1", "  3) test foo (Mod)",
                                  "Exit code 2", "error[E0308]: mismatched types"])
def test_important_lines(line):
    assert is_important(line)


# What an important line was defined as: the one pattern, searched in every line.
_IMPORTANT_PATTERN = re.compile(
    r"error|\bERR!|fail|exception|traceback|warning|warn\b|fatal|panic|assert|denied|refused|not found|"
    r"no such|cannot|can't|could not|unable|undefined|segfault|killed|timed? ?out|exit code|abort|"
    r"[✗✘×]|^E\s|^\s*\d+\)\s|^\s*at \S+ \(|^\s*File \"|[\w./-]+\.\w{1,5}:\d+", re.IGNORECASE)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["ERROR", "Fail", "warn", "warned", "ERR!", "xERR!", "timed out", "time",
                                           "Exit Code", "e", "E ", "  12) ", "at f (", 'File "', "a.py:3", ".x:",
                                           "\u0130", "\u0131", "\u017f", "\u212a", "ſegfault", "faıl", "✗", "é",
                                           "Ünable", " ", "\t", ":", "."]),
                          st.text(alphabet="abcdefgilnorstuwxyzABEFIKLNORSTW0123456789 .:()!'\"", max_size=12)),
                max_size=12).map("".join))
def test_important_lines_are_the_one_patterns_verdict(line) -> None:
    # The substring tests that decide first never change a verdict, on ASCII and other lines alike
    # (the four non-ASCII letters IGNORECASE folds to ASCII ones included).
    assert is_important(line) == bool(_IMPORTANT_PATTERN.search(line))


@needs_shared(SESSION_8463)
def test_important_lines_of_real_outputs_are_the_one_patterns_verdict() -> None:
    lines = [line for path in sorted(TRANSCRIPTS.rglob("*.jsonl"))[:40]
             for content in _results(path).values() for line in content.split("\n")]
    assert len(lines) > 10_000
    assert [is_important(line) for line in lines] == [bool(_IMPORTANT_PATTERN.search(line)) for line in lines]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "a", "", "50% done", "⠋ x", "b", "error 50%"]), max_size=20),
       st.integers(2, 4))
def test_the_whole_text_checks_skip_only_what_the_line_loops_would_keep(lines, min_run) -> None:
    # Without a progress mark anywhere, or without two equal neighbours, the per-line loops change nothing.
    assert collapse_progress(lines) == _collapse_progress_by_lines(lines)
    assert collapse_repeats(lines, min_run) == _collapse_runs(lines, min_run)


def _collapse_progress_by_lines(lines: list[str]) -> list[str]:
    flags = [is_progress(line) for line in lines]
    return [line for i, line in enumerate(lines)
            if not (flags[i] and i + 1 < len(lines) and flags[i + 1] and not is_important(line))]



# The progress patterns as one regex (`bar.*percent`), which is_progress answers in linear steps:
# the same verdict on every line, without the cubic backtracking on a long rule of '='.
_ONE_PATTERN = re.compile(
    r"(\d{1,3}(?:\.\d+)?%\s*\|[^|]{3,}\|)|(\[[=#>\-. ]{8,}\]\s*\d{1,3}(?:\.\d+)?%)"
    r"|([━─█▓▒░#=]{8,}.*\d{1,3}(?:\.\d+)?\s*%)|(\d{1,3}(?:\.\d+)?%.*[━─█▓▒░]{8,})"
    r"|(^\s*[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⣾⣽⣻⢿⡿⣟⣯⣷◐◓◑◒]\s)")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="=#━─█▓ 0123456789.%|[]>-ab⠋\n", max_size=40))
def test_progress_lines_are_the_single_patterns_verdict(line) -> None:
    assert is_progress(line) == bool(_ONE_PATTERN.search(line))
    assert is_progress("=" * 4_000 + " 45%") and not is_progress("=" * 4_000)


def _blobs_by_the_plain_patterns(text: str, min_chars: int) -> str:
    """What the blob notes were defined as: every run of 32+ base64 characters (then every bounded hex
    run) that is long enough and mixes what a blob mixes, found by the unanchored patterns."""
    def b64(m: re.Match[str]) -> str:
        s = m.group(0)
        mixed = re.search("[a-z]", s) and re.search("[A-Z]", s) and re.search(r"\d", s)
        return replace_blobs(s, min_chars)[0] if len(s) >= min_chars and mixed else s

    def hexa(m: re.Match[str]) -> str:
        s = m.group(0)
        mixed = re.search("[a-fA-F]", s) and re.search(r"\d", s)
        return replace_blobs(s, min_chars)[0] if len(s) >= min_chars and mixed else s
    text = re.sub(r"[A-Za-z0-9+/_-]{32,}={0,2}", b64, text)
    return re.sub(r"\b[0-9a-fA-F]{32,}\b", hexa, text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(list("aAbF09+/_-= .g\nZz")),
                          st.text("0123456789abcdef", min_size=28, max_size=80),
                          st.text("aB3+/=-_", min_size=28, max_size=80)), max_size=30).map("".join),
       st.sampled_from([32, 33, 40, 64]))
def test_skipping_outputs_without_a_long_enough_run_notes_what_the_plain_patterns_find(text: str, min_chars: int) -> None:
    assert replace_blobs(text, min_chars)[0] == _blobs_by_the_plain_patterns(text, min_chars)
