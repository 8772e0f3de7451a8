"""Config errors as sentences: a malformed `WORKSURFACE_*` value or an unknown key is one line naming the
variable (or file) it came from, what is wrong and the form expected; exit 2 in the CLI, and the gateway
refuses to start. Never a pydantic-settings traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core.config import Config
from worksurface.core.errors import ConfigError

runner = CliRunner()


def _one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("worksurface: error: ") and "Traceback" not in output
    return lines[0]


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("variable, value, expected", [
    ("WORKSURFACE_PINS", "notjson", "not valid JSON (Expecting value: line 1 column 1 (char 0)); expected a JSON array"),
    ("WORKSURFACE_BUDGET", "{bad", "expected a JSON object of budget's fields, e.g. {\"max_result_tokens\": ...}, "
                                   "or one WORKSURFACE_BUDGET__<FIELD> variable per field"),
    ("WORKSURFACE_PLUGINS__STAGES", "[1", "not valid JSON (Expecting ',' delimiter"),
    ("WORKSURFACE_AGENTS", "main", "expected a JSON object"),
    ("WORKSURFACE_WINDOW", "abc", "window: Input should be a valid integer, unable to parse string as an integer "
                                  "(got 'abc')"),
    ("WORKSURFACE_BUDGET__MAX_RESULT_TOKENS", "-5", "budget.max_result_tokens: Input should be greater than or "
                                                    "equal to 100 (got '-5')"),
    ("WORKSURFACE_AUTOCOMPACT__SUMARY_TOKENS", "6000", "autocompact.sumary_tokens: not a setting (did you mean "
                                                       "summary_tokens?)"),
    ("WORKSURFACE_PRICING__PRESET", "azure", "pricing.preset: must be anthropic, openai, gemini or deepseek"),
])
def test_a_bad_variable_is_one_line_naming_it(tmp_path: Path, chat: Path, variable: str, value: str,
                                              expected: str) -> None:
    for command in (["config", "show", "--dir", str(tmp_path)], ["status", str(chat)]):
        res = runner.invoke(app, command, env={variable: value})
        assert res.exit_code == 2
        line = _one_line(res.output)
        assert line.startswith(f"worksurface: error: {variable}: ") and expected in line


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]))
    return path


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=30).filter(_not_json).filter(lambda t: "\x00" not in t))
def test_any_value_that_is_not_json_for_a_list_names_the_variable(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.load(Path("/"), environ={"WORKSURFACE_MICROCOMPACT__EXCLUDED_TOOLS": text})
    message = str(caught.value)
    assert message.startswith("WORKSURFACE_MICROCOMPACT__EXCLUDED_TOOLS: not valid JSON") and "\n" not in message
    assert text not in message or len(text) < 3     # the value itself is not repeated (a table may hold a key)


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda t: not t.strip().lstrip("+-").isdigit()
                                                 and "\x00" not in t))
def test_any_value_that_is_not_an_integer_names_the_variable_and_the_field(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.load(Path("/"), environ={"WORKSURFACE_REINJECT__FILES_MAX": text})
    message = str(caught.value)
    assert message.startswith("WORKSURFACE_REINJECT__FILES_MAX: invalid configuration: reinject.files_max: ")
    assert "valid integer" in message and "\n" not in message


def test_each_problem_names_its_own_source(tmp_path: Path) -> None:
    """A file's bad key and a variable's bad value in one run: each named where it came from."""
    (tmp_path / "worksurface.toml").write_text("[budget]\nmax_reslt_tokens = 3000\n")
    with pytest.raises(ConfigError) as caught:
        Config.load(tmp_path, environ={"WORKSURFACE_WINDOW": "10"})
    message = str(caught.value)
    assert (f"{tmp_path / 'worksurface.toml'}: invalid configuration: budget.max_reslt_tokens: not a setting (did "
            "you mean max_result_tokens?)") in message
    assert "WORKSURFACE_WINDOW: invalid configuration: window: Input should be greater than or equal to 1000" in message


def test_an_unknown_top_level_key_lists_the_settings_when_nothing_is_close(tmp_path: Path) -> None:
    (tmp_path / "worksurface.toml").write_text("[hook]\nzzz = 1\n")
    with pytest.raises(ConfigError, match=r"hook.zzz: not a setting \(the settings of hook: surface_tokens\)"):
        Config.load(tmp_path)


def test_a_config_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "worksurface.toml").write_bytes(b"window = 1\n# \xff\n")
    res = runner.invoke(app, ["config", "show", "--dir", str(tmp_path)])
    assert res.exit_code == 2 and "worksurface.toml: not UTF-8 text (byte 13)" in _one_line(res.output)


def test_the_real_command_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    """As a user runs it: the script's own process, no test runner catching anything."""
    res = subprocess.run([sys.executable, "-m", "worksurface", "config", "show"], cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WORKSURFACE_INGEST": "[1, 2"},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert _one_line(res.stderr).startswith("worksurface: error: WORKSURFACE_INGEST: not valid JSON")


def test_the_gateway_refuses_to_start_on_a_variable_that_is_not_json(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    res = runner.invoke(app, ["serve", "--port", "0", "--store", str(tmp_path)],
                        env={"WORKSURFACE_GATEWAY_SESSION": "{window: 1"})
    assert res.exit_code == 2
    line = _one_line(res.output)
    assert line.startswith("worksurface: error: WORKSURFACE_GATEWAY_SESSION: not valid JSON")
    assert 'expected a JSON object, e.g. {"key": "value"}' in line
