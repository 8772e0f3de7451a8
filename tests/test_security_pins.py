"""Pins as an attack surface (issue 50, "config and pins"): a `re:` pin is a user's pattern run over a
whole session, so it runs on google-re2 (linear time); `--pin @PATH` reads only a regular file under a
size cap, as UTF-8 text, and refuses anything else naming the path (exit 2)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from builders import Convo, words
from worksurface import compact
from worksurface.cli import app
from worksurface.core.config import Config
from worksurface.core.errors import ConfigError, FormatError
from worksurface.core.fileio import read_small_text
from worksurface.core.patterns import PatternError, compile_user_pattern
from worksurface.engine import pins
from worksurface.core.model import Message, Text
from worksurface.formats import Transcript, write_transcript

runner = CliRunner()
# The classic catastrophic-backtracking pair: a nested quantifier over a long run that cannot match.
NESTED = ("(a+)+$", "(a|aa)+!x", "(\\w+\\s?)+$", "(.*a){12}")
EVIL_TEXT = "a" * 50_000 + "!"


def _session(text: str = EVIL_TEXT, steps: int = 24) -> list[Message]:
    c = Convo().user("Keep going.")
    for i in range(steps):
        c.tool("Bash", {"command": f"step {i}"}, text if i == 0 else words(200, seed=i))
    c.say("done")
    return c.messages


@pytest.mark.parametrize("pattern", NESTED)
def test_a_nested_quantifier_pin_over_a_long_session_returns(pattern: str) -> None:
    compiled = pins.compile_pins([f"re:{pattern}"])
    # On a text short enough for Python's backtracking `re`, the same snippets as `re` finds.
    short = "a" * 16 + "!"
    expected = list(dict.fromkeys(m.group(0) for m in re.finditer(pattern, short, re.M) if m.group(0)))
    assert pins.snippets(compiled, [Message("m", "user", (Text(short),))]) == expected
    started = time.perf_counter()
    found = pins.snippets(compiled, [Message("m", "user", (Text(EVIL_TEXT * 4),))])
    elapsed = time.perf_counter() - started  # measured, not asserted: it returned (`re` would not)
    assert all(f and f in EVIL_TEXT * 4 for f in found), elapsed


def test_a_compaction_with_a_nested_quantifier_pin_finishes_and_reports_its_pins() -> None:
    prepared = compact(_session(), force=True, window=50_000, pins=("re:(a+)+$", "re:(a|aa)+!"))
    assert prepared.report.boundary is not None and "pins" in prepared.report.boundary


@pytest.mark.parametrize("pattern, why", [("(a)\\1", "escape"), ("a(?=b)", "(?="), ("(?<!x)y", "(?<!"),
                                          ("((a{100}){100}){100}", "repetition"), ("[", "missing"),
                                          ("\ud800", "surrogates")])
def test_a_pattern_re2_cannot_run_is_a_named_error_naming_the_pin(pattern: str, why: str) -> None:
    with pytest.raises(PatternError) as caught:
        pins.compile_pins([f"re:{pattern}"])
    assert isinstance(caught.value, ConfigError) and caught.value.pattern == pattern and why in caught.value.problem
    assert "google-re2" in str(caught.value)
    with pytest.raises(ConfigError, match=r"pins.*is not a valid regular expression.*google-re2"):
        Config.from_mapping({"pins": [f"re:{pattern}"]})


@settings(max_examples=60, deadline=None)
@given(pattern=st.text(alphabet="ab()+*?|$^.\\{}[]1!", max_size=12), text=st.text(alphabet="ab!\n", max_size=200))
def test_any_pattern_either_compiles_and_matches_or_is_refused_by_name(pattern: str, text: str) -> None:
    try:
        compiled = compile_user_pattern(pattern, source="pin")
    except PatternError as exc:
        assert exc.source == "pin" and exc.pattern == pattern
        return
    hits = list(compiled.matches(text))
    assert all(h in text for h in hits)
    assert compiled.search(text) == bool(hits)


def test_a_pattern_over_text_with_a_lone_surrogate_matches_and_returns_the_original_text() -> None:
    text = "half an emoji \ud83d then step 12 done"
    compiled = compile_user_pattern(r"step \d+ done", source="pin")
    assert list(compiled.matches(text)) == ["step 12 done"]
    around = compile_user_pattern(r"emoji . then", source="pin")
    assert list(around.matches(text)) == ["emoji \ud83d then"]


def test_a_pin_matching_every_word_is_bounded_and_says_so() -> None:
    text = " ".join(f"w{i}" for i in range(20_000))
    span = [Message("m", "user", (Text(text),))]
    found = pins.snippets(pins.compile_pins([r"re:\w+"]), span)
    assert len(found) == pins.MAX_SNIPPETS_PER_PIN
    from worksurface.core.tokens import TokenCounter
    result = pins.check(pins.compile_pins([r"re:\w+"]), span, "", 50, TokenCounter())
    assert f"re:\\w+ (more than {pins.MAX_SNIPPETS_PER_PIN} matches)" in result.missed


# ---- --pin @PATH -----------------------------------------------------------------------------------

@pytest.fixture()
def transcript(tmp_path: Path) -> Path:
    source = tmp_path / "s.json"
    write_transcript(Transcript(_session("runbook step 7 done", steps=20), "anthropic", None), source)
    return source


def _compact_with(transcript: Path, pin: str) -> object:
    return runner.invoke(app, ["compact", str(transcript), "-o", str(transcript.with_name("out.json")), "--force",
                               "--window", "50000", "--pin", pin])


def _bad_files(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """pin argument -> (path as the error names it, words of the problem)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "zero-link").symlink_to("/dev/zero")
    (tmp_path / "fifo-link").symlink_to(fifo)
    (tmp_path / "bin").write_bytes(b"\x7fELF\x02\x01\x00\x00binary")
    (tmp_path / "latin1").write_bytes("caf\xe9 rule".encode("latin-1"))
    (tmp_path / "big").write_text("x" * ((1 << 20) + 1))
    (tmp_path / "dir").mkdir()
    return {"@/dev/zero": ("/dev/zero", "character device"), "@/dev/urandom": ("/dev/urandom", "character device"),
            f"@{fifo}": (str(fifo), "FIFO"), f"@{tmp_path / 'zero-link'}": (str(tmp_path / "zero-link"), "character device"),
            f"@{tmp_path / 'fifo-link'}": (str(tmp_path / "fifo-link"), "FIFO"),
            f"@{tmp_path / 'bin'}": (str(tmp_path / "bin"), "binary"),
            f"@{tmp_path / 'latin1'}": (str(tmp_path / "latin1"), "not UTF-8"),
            f"@{tmp_path / 'big'}": (str(tmp_path / "big"), "over 1,048,576 bytes"),
            f"@{tmp_path / 'dir'}": (str(tmp_path / "dir"), "directory"),
            "@/no/such/file": ("/no/such/file", "no such pin file")}


def test_a_pin_file_that_is_not_a_small_regular_text_file_is_refused_naming_it(tmp_path: Path,
                                                                               transcript: Path) -> None:
    for pin, (path, problem) in _bad_files(tmp_path).items():
        result = _compact_with(transcript, pin)  # returns: a FIFO or /dev/zero never blocks it
        assert result.exit_code == 2, (pin, result.output)
        assert f"--pin {pin}: cannot read {path}" in result.output and problem in result.output, result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert not transcript.with_name("out.json").exists(), "nothing is written for a refused pin"


def test_the_library_refuses_the_same_files_with_a_named_error(tmp_path: Path) -> None:
    for pin, (path, problem) in _bad_files(tmp_path).items():
        with pytest.raises(FormatError) as caught:
            read_small_text(pin[1:], 1 << 20, "pin file")
        assert caught.value.path == path and problem in str(caught.value)


def test_the_size_cap_is_a_config_field_and_a_file_within_it_is_pinned(tmp_path: Path, transcript: Path) -> None:
    rule = tmp_path / "rule.txt"
    rule.write_text("\ufeffrunbook step 7 done\n", encoding="utf-8")
    result = _compact_with(transcript, f"@{rule}")
    assert result.exit_code == 0, result.output
    assert "runbook step 7 done" in transcript.with_name("out.json").read_text()
    field = Config.model_fields["pin_file_max_bytes"]
    assert field.default == 1 << 20 and field.description
    with pytest.raises(FormatError, match="over 10 bytes"):
        read_small_text(rule, 10, "pin file")
