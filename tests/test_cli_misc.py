"""The command line's conventions (issue 12, "Also"): one error style, choices for --format and
--strategy, --version, -v logging, `python -m worksurface`, `inspect -`, config discovery, the
LICENSE, and a pytest plugin that imports nothing heavy."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.cli.app import configure_logging
from worksurface.core.config import Config, find_config_file
from worksurface.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
CHAT = [{"role": "user", "content": "fix the parser"}, {"role": "assistant", "content": "done"}]


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("worksurface: error: ")
    return lines[0]


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(CHAT))
    return p


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"worksurface {version('worksurface')}"


@pytest.mark.parametrize(("args", "needle"), [
    (["inspect", "{chat}", "--format", "bogus"], "'bogus' is not one of 'auto'"),
    (["status", "{chat}", "--strategy", "sometimes"], "'sometimes' is not one of 'append', 'replace', 'delta'"),
    (["compact", "{chat}", "--out-format", "aider-md"], "'aider-md' is not one of"),
    (["probe", "derive", "{chat}", "--format", "x"], "'x' is not one of"),
    (["inspect"], "Missing argument"),
    (["inspect", "{chat}", "--nope"], "No such option: --nope"),
])
def test_usage_errors_are_one_line_with_exit_2(chat: Path, args: list[str], needle: str) -> None:
    result = runner.invoke(app, [a.format(chat=chat) for a in args])
    assert result.exit_code == 2
    assert needle in one_error_line(result.output)


def test_worksurface_errors_share_the_style(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[\n{"role": "user", "content": "a"},\n{"role": "assistant" "content": "b"}\n]')
    for command in (["inspect"], ["status"], ["probe", "derive"], ["compact"]):
        result = runner.invoke(app, [*command, str(bad)])
        assert result.exit_code == 2
        assert one_error_line(result.output).startswith(f"worksurface: error: {bad}:3: invalid JSON")


def test_config_errors_are_one_readable_line(tmp_path: Path, chat: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "worksurface.toml").write_text('window = 10\n[budget]\nmax_result_tokens = "lots"\n')
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["status", str(chat)])
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert "worksurface.toml: invalid configuration: window:" in line and "(got 10)" in line
    assert "budget.max_result_tokens:" in line and "(got 'lots')" in line


def test_inspect_reads_standard_input() -> None:
    result = runner.invoke(app, ["inspect", "-", "--json"], input=json.dumps(CHAT))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["path"] == "<stdin>" and report["format"] == "openai" and report["messages"] == 2


def test_compact_from_standard_input_needs_an_output(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compact", "-"], input=json.dumps(CHAT))
    assert result.exit_code == 2 and "-o" in one_error_line(result.output)


def test_python_dash_m_worksurface(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "worksurface", "inspect", "nope.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.strip() == "worksurface: error: nope.json: no such file"


# ---- logging -------------------------------------------------------------------------------------------

def test_logging_shows_notices_by_default_and_more_with_v(capsys: pytest.CaptureFixture[str]) -> None:
    log = logging.getLogger("worksurface.test")
    try:
        configure_logging(0)
        log.warning("breaker opened")
        log.info("summarizer fell back")
        assert capsys.readouterr().err == "worksurface: WARNING: breaker opened\n"
        configure_logging(1)
        log.info("summarizer fell back")
        log.debug("detail")
        assert capsys.readouterr().err == "worksurface: INFO: summarizer fell back\n"
        configure_logging(2)
        log.debug("detail")
        assert "detail" in capsys.readouterr().err
        assert len([h for h in logging.getLogger("worksurface").handlers
                    if getattr(h, "_worksurface_cli", False)]) == 1
    finally:
        configure_logging(0)


def test_verbose_flag_is_accepted_before_the_command(chat: Path) -> None:
    result = runner.invoke(app, ["-v", "inspect", str(chat), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["messages"] == 2


# ---- configuration discovery ---------------------------------------------------------------------------

def test_config_is_found_in_a_parent_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / "worksurface.toml").write_text("window = 64000\n")
    assert find_config_file(deep) == tmp_path / "worksurface.toml"
    assert Config.load(deep).window == 64_000


def test_pyproject_without_the_table_is_skipped_and_the_search_stops_at_the_repository(tmp_path: Path) -> None:
    (tmp_path / "worksurface.toml").write_text("window = 1\n")     # above the repository: never read
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[tool.worksurface]\nwindow = 90000\n')
    pkg = repo / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    assert find_config_file(pkg) == repo / "pyproject.toml" and Config.load(pkg).window == 90_000
    (repo / "pyproject.toml").write_text('[project]\nname = "repo"\n')
    assert find_config_file(pkg) is None and Config.load(pkg).window == Config().window


def test_worksurface_toml_takes_the_pyproject_snippet_too(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "worksurface.toml").write_text("[tool.worksurface]\nwindow = 50000\n[tool.worksurface.budget]\n"
                                               "max_result_tokens = 3000\n")
    config = Config.load(tmp_path)
    assert config.window == 50_000 and config.budget.max_result_tokens == 3_000
    (tmp_path / "worksurface.toml").write_text("window = 50000\n[budget]\nmax_result_tokens = 3000\n")
    assert Config.load(tmp_path) == config
    (tmp_path / "worksurface.toml").write_text("[tool.worksurface]\nwindow = 10\n")
    with pytest.raises(ConfigError, match="window"):
        Config.load(tmp_path)


# ---- packaging -----------------------------------------------------------------------------------------

def test_license_file_matches_the_declared_license() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    text = (REPO / "LICENSE").read_text()
    assert declared == "MIT" and text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


HEAVY = ("langgraph", "pydantic", "tiktoken", "rich", "rapidfuzz", "diskcache", "httpx", "worksurface.session.session",
         "worksurface.core.config", "worksurface.core.tokens")


def test_pytest_plugin_imports_nothing_heavy(tmp_path: Path) -> None:
    code = ("import sys, worksurface.probes.plugin as p; "
            f"print([m for m in {HEAVY!r} if m in sys.modules]); "
            "print(p.worksurface_session is not None)")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["[]", "True"]


def test_lazy_package_attributes_still_resolve() -> None:
    import worksurface
    import worksurface.probes as probes

    assert worksurface.Config is Config and worksurface.Session.__name__ == "Session"
    assert probes.ProbeSet.__name__ == "ProbeSet" and callable(probes.assert_retains)
    with pytest.raises(AttributeError):
        getattr(worksurface, "no_such_name")


@pytest.mark.parametrize("command", [["inspect", "--json"], ["status", "--json"], ["inspect"], ["status"]])
def test_lone_surrogates_are_printed_as_escapes_not_crashed_on(tmp_path: Path, command: list[str]) -> None:
    doc = [{"role": "user", "content": "half an emoji \ud83d"},
           {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
               "name": "Read\udc00", "arguments": json.dumps({"file_path": "x\ud800.py"})}}]},
           {"role": "tool", "tool_call_id": "c", "content": "out"}]
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(doc))        # ASCII file: the surrogates are \u escapes
    res = subprocess.run([sys.executable, "-m", "worksurface", command[0], str(path), *command[1:]],
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode("utf-8")        # strict: valid UTF-8
    if "--json" in command:
        assert "Read\udc00" in json.dumps(json.loads(out), ensure_ascii=False) or command[0] == "status"
