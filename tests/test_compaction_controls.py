"""Control over compaction (issue 31, item 4): pins kept verbatim (and reported when they cannot be),
an off switch for automatic compaction, and a threshold that can be raised as well as lowered."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import Convo, words
from worksurface import Session, compact
from worksurface.cli import app
from worksurface.core.config import Config, ConfigError
from worksurface.engine.pins import PINNED_HEADING

PINNED = "DEPLOY KEY ROTATION: never push to prod on Fridays (ticket OPS-4412)"


def _session(steps: int = 30) -> Convo:
    c = Convo().system("You are a coding agent.").user("Port the service to async.")
    c.say(f"Noted from the runbook: {PINNED}. {words(200, seed=99)}")
    for i in range(steps):
        c.tool("Read", {"file_path": f"/repo/mod{i}.py"}, words(1_500, seed=i) + f"\nbuild-id: b{i:04d}")
        c.say(f"step {i} done")
    c.user("go on")
    return c


def _text(prepared) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(m.text for m in prepared.messages)


def test_a_pin_survives_a_compaction_verbatim_and_a_regex_pin_keeps_every_match() -> None:
    c = _session()
    plain = compact(c.messages, force=True, window=50_000)
    assert PINNED not in _text(plain)           # without the pin the runbook line is summarized away
    pinned = compact(c.messages, force=True, window=50_000, pins=(PINNED, r"re:step 1\d done"))
    text = _text(pinned)
    assert PINNED_HEADING in text and PINNED in text
    assert all(f"step 1{i} done" in text for i in range(10))
    assert pinned.report.boundary is not None
    assert pinned.report.boundary["pins"]["missed"] == []


def test_a_pin_that_does_not_fit_is_reported_as_not_kept() -> None:
    c = _session()
    prepared = compact(c.messages, force=True, window=50_000, pins=(PINNED,), autocompact={"pin_tokens": 5})
    assert prepared.report.boundary is not None
    assert prepared.report.boundary["pins"]["missed"] == [PINNED]
    assert any("could not be kept verbatim" in n and "DEPLOY KEY" in n for n in prepared.report.notices)


def test_automatic_compaction_can_be_switched_off_and_a_manual_one_still_runs(tmp_path: Path) -> None:
    c = _session(40)
    # Old results stay (no clearing), so only a compaction brings the view under the threshold.
    keep = {"microcompact": {"trigger_tokens": 10**9}, "collapse": {"min_span_steps": 10**6}, "window": 50_000}
    with Session.open(tmp_path / "on", **keep) as on:
        assert on.prepare(c.messages).report.boundary is not None
    with Session.open(tmp_path / "off", autocompact={"enabled": False}, **keep) as off:
        report = off.prepare(c.messages).report      # over the threshold, yet no overflow error
        auto = next(s for s in report.stages if s.name == "autocompact")
        assert report.boundary is None and auto.skipped and "automatic compaction is off" in auto.skipped
        assert off.compact(c.messages).report.boundary is not None


def test_the_threshold_can_be_raised_as_well_as_lowered() -> None:
    default = Config()
    assert default.threshold == 167_000
    assert Config(autocompact_threshold_tokens=190_000).threshold == 180_000   # up to window - max_output
    assert Config(autocompact_threshold_tokens=175_000).threshold == 175_000 > default.threshold
    assert Config(autocompact_threshold_tokens=60_000).threshold == 60_000


def test_a_bad_regex_pin_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r"pins.*not a valid regular expression"):
        Config.from_mapping({"pins": ["re:([unclosed"]})


def test_the_cli_takes_pins_from_text_and_files(tmp_path: Path) -> None:
    c = _session()
    from worksurface.formats import Transcript, write_transcript
    source, out, rule = tmp_path / "s.json", tmp_path / "out.json", tmp_path / "rule.txt"
    write_transcript(Transcript(c.messages, "anthropic", None), source)
    rule.write_text(PINNED + "\n")
    result = CliRunner().invoke(app, ["compact", str(source), "-o", str(out), "--force", "--window", "50000",
                                      "--pin", f"@{rule}", "--json"])
    assert result.exit_code == 0, result.output
    assert PINNED in out.read_text()
    missing = CliRunner().invoke(app, ["compact", str(source), "-o", str(out), "--pin", "@/no/such/file"])
    assert missing.exit_code == 2 and "cannot read /no/such/file" in missing.output
    help_text = CliRunner().invoke(app, ["replay", "--help"], env={"COLUMNS": "200"}).output
    assert "--pin" in help_text and "--threshold" in help_text and "--no-autocompact" in help_text



@pytest.mark.parametrize("target", [10_000, 30_000, 60_000])
def test_a_compaction_asked_of_a_view_under_its_target_never_grows_it(tmp_path: Path, target: int) -> None:
    # With the target above the view, the kept tail, the summary and the rebuilt surface were sized
    # for the target: a manual compaction of a 16,866-token view (a generated session with usage)
    # came back at 29,489 tokens under a 60,000 target.
    from fixturegen import write_session
    from worksurface.formats import read_transcript
    from worksurface.offline.sizing import prepare_once

    transcript = read_transcript(write_session(tmp_path / "session.jsonl", 40_000, seed=5))
    with Session.open(None, config=Config(post_compact_target_tokens=target)) as session:
        prepared = prepare_once(session, transcript, force=True)
    auto = next(s for s in prepared.report.stages if s.name == "autocompact")
    assert prepared.report.boundary is not None and auto.skipped is None
    assert prepared.report.tokens_after < auto.tokens_before
    if target < auto.tokens_before:  # a target that binds is what the compaction aims under
        assert prepared.report.sizes["after"]["measured"] <= target
