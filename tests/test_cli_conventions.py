"""The CLI as a user meets it (issue 31, item 6): help once, flags as flags, choices listed, --format is
the input format, a wrong one is refused, the configuration shown with its schema and environment."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import Convo
from worksurface import Session
from worksurface.cli import app
from worksurface.core.config import Config, ConfigError
from worksurface.core.model import Message, Text

# A bundled Claude Code session: these tests need no shared data.
CLAUDE = Path(__file__).resolve().parents[1] / "fixtures" / "small.jsonl"


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    return result.exit_code, result.output


def test_plain_worksurface_prints_help_once() -> None:
    code, out = _run()
    assert code == 0
    assert out.count("Usage: worksurface") == 1 and "compact" in out


@pytest.mark.parametrize("args", [["--help"], ["compact", "--help"], ["hook", "install", "--help"]])
def test_flags_and_counts_show_no_value_type(args: list[str]) -> None:
    code, out = _run(*args)
    assert code == 0
    assert "<bool>" not in out and "--help" in out
    if args == ["--help"]:
        verbose = next(line for line in out.splitlines() if "--verbose" in line)
        assert "<int>" not in verbose


def test_verbosity_is_a_count() -> None:
    code, _ = _run("-vv", "inspect", str(CLAUDE))
    assert code == 0
    assert logging.getLogger("worksurface").level == logging.DEBUG
    code, out = _run("-v", "2", "inspect", str(CLAUDE))
    assert code == 2 and "No such command '2'" in out


def test_batch_results_format_is_its_own_option_with_choices() -> None:
    code, out = _run("batch", "--help")
    assert code == 0
    assert "--results-format" in out and "parquet|jsonl" in out and "compact|probe|replay|inspect" in out
    code, out = _run("batch", str(CLAUDE), "--task", "inspect", "--format", "jsonl")
    assert code == 2 and "--format" in out
    code, out = _run("batch", str(CLAUDE), "--task", "nope")
    assert code == 2 and "'nope' is not one of" in out


@pytest.mark.parametrize("command", ["replay", "report"])
def test_every_format_option_lists_the_input_formats(command: str) -> None:
    code, out = _run(command, "--help")
    assert code == 0 and "<auto|codex|claude-code|" in out


def test_replay_strategy_and_price_are_choices() -> None:
    code, out = _run("replay", str(CLAUDE), "--strategy", "sideways")
    assert code == 2 and "'sideways' is not one of" in out
    code, out = _run("replay", str(CLAUDE), "--price", "free")
    assert code == 2 and "'free' is not one of" in out


def test_a_wrong_format_is_refused_naming_the_format_the_file_is() -> None:
    code, out = _run("inspect", str(CLAUDE), "--format", "codex")
    assert code == 2
    assert "not a Codex rollout" in out and "--format claude-code" in out and "0 messages" not in out


def test_a_pattern_error_reads_as_its_choices() -> None:
    with pytest.raises(ConfigError) as err:
        Config.from_mapping({"status_strategy": "sideways", "pricing": {"preset": "free"}})
    message = str(err.value)
    assert "status_strategy: must be append, replace or delta (got 'sideways')" in message
    assert "pricing.preset: must be anthropic, openai, gemini or deepseek" in message
    assert "pattern" not in message


def test_config_show_prints_the_effective_configuration_with_file_and_environment(tmp_path: Path) -> None:
    (tmp_path / "worksurface.toml").write_text("window = 100000\n[autocompact]\nsummary_tokens = 5000\n")
    (tmp_path / ".git").mkdir()
    code, out = _run("config", "show", "--dir", str(tmp_path),
                     env={"WORKSURFACE_AUTOCOMPACT__SUMMARY_TOKENS": "6000", "WORKSURFACE_STATUS_STRATEGY": "append"})
    assert code == 0
    shown = json.loads(out[out.index("{"):])
    assert shown["window"] == 100_000 and shown["max_output"] == 10_000    # scaled from the file's window
    assert shown["autocompact"]["summary_tokens"] == 6000                  # the environment wins over the file
    assert shown["status_strategy"] == "append"
    assert str(tmp_path / "worksurface.toml") in out


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    code, out = _run("config", "show", "--dir", str(tmp_path), env={"WORKSURFACE_WINDOW": "huge"})
    assert code == 2 and "WORKSURFACE_WINDOW" in out and "window:" in out


def test_config_schema_describes_every_field() -> None:
    code, out = _run("config", "schema")
    assert code == 0
    schema = json.loads(out)
    sections = [schema, *schema["$defs"].values()]
    undescribed = [name for section in sections for name, field in section["properties"].items()
                   if "$ref" not in field and "allOf" not in field and not field.get("description")]
    assert undescribed == []
    assert "summary" in schema["$defs"]["AutocompactConfig"]["properties"]["summary_tokens"]["description"]


def test_routine_recovery_notices_are_info_not_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    c = Convo().system("You are a coding agent.").user("Fix the bug.").say("Looking.")
    c.messages.append(Message(role="assistant", blocks=[Text("  ")], id="empty-1"))
    c.user("go on")
    with caplog.at_level(logging.DEBUG, logger="worksurface"), Session.open(tmp_path / "s") as session:
        logging.getLogger("worksurface").propagate = True
        report = session.prepare(c.messages).report
    assert any("empty text" in n for n in report.notices)
    recovery = [r for r in caplog.records if "empty text" in r.getMessage()]
    assert recovery and all(r.levelno == logging.INFO for r in recovery)


def test_a_command_that_needs_an_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    from worksurface.core import lazy
    monkeypatch.setattr(lazy, "find_spec", importlib.util.find_spec)
    code, out = _run("batch", str(CLAUDE), "--task", "inspect", "--workers", "0")
    assert code == 2 and "worksurface[batch]" in out and "pyarrow" in out


def test_the_base_install_leaves_dask_pyarrow_and_matplotlib_to_extras() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    extras = project["optional-dependencies"]
    assert not any(name in base for name in ("dask", "pyarrow", "matplotlib"))
    assert "pydantic-settings" in base and "typer" in base
    assert any("dask" in d for d in extras["batch"]) and any("pyarrow" in d for d in extras["batch"])
    assert any("matplotlib" in d for d in extras["bench"])
    assert all(any(name in d for d in extras["test"]) for name in ("dask", "pyarrow", "matplotlib"))
