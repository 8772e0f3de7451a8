"""`worksurface hook doctor` and the commands `hook install` writes: what is installed where, whether a
project could shadow it, and an older (shadowable) install rewritten in place of itself."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.hooks.doctor import command_problem
from worksurface.hooks.install import hook_command, mcp_command, runs_worksurface

runner = CliRunner()
PYTHON = sys.executable
OLD = f"{shlex.quote(PYTHON)} -m worksurface hook claude-code"


@pytest.fixture(autouse=True)
def clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients' user settings live in this test's folder."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))


def _settings(path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": command}]}],
                                          "SessionStart": [{"matcher": "startup", "hooks": [
                                              {"type": "command", "command": "echo theirs"}]}]}}))


def test_the_written_commands_are_absolute_and_isolated() -> None:
    for command in (hook_command("claude-code"), hook_command("codex", 50_000), mcp_command()):
        words = shlex.split(command)
        assert words[:4] == [PYTHON, "-I", "-m", "worksurface"] and command_problem(command) is None
    assert runs_worksurface(hook_command("codex", 50_000), ["hook", "codex"])
    assert runs_worksurface(mcp_command(), ["mcp"]) and not runs_worksurface(mcp_command(), ["hook", "codex"])


def test_doctor_flags_an_old_install_and_install_rewrites_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    settings = project / ".claude" / "settings.json"
    _settings(settings, OLD)
    res = runner.invoke(app, ["hook", "doctor", "--project", str(project)])
    assert res.exit_code == 1
    assert f"{settings}: claude-code hook PreCompact (scope project): {OLD}: UNSAFE: Python without -I" in res.stdout
    assert "worksurface hook install" in res.stdout

    assert runner.invoke(app, ["hook", "install", "claude-code", "--project", str(project)]).exit_code == 0
    data = json.loads(settings.read_text())
    commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
    assert sorted(commands) == sorted(["echo theirs", hook_command("claude-code"), hook_command("claude-code")])
    res = runner.invoke(app, ["hook", "doctor", "--project", str(project)])
    assert res.exit_code == 0 and res.stdout.count(": safe") == 2 and "UNSAFE" not in res.stdout


def test_install_recognises_the_console_script_form_as_its_own(tmp_path: Path) -> None:
    project = tmp_path / "project"
    settings = project / ".claude" / "settings.local.json"
    _settings(settings, "/opt/old-venv/bin/worksurface hook claude-code --max-chars 9000")
    assert runner.invoke(app, ["hook", "install", "claude-code", "--scope", "local",
                               "--project", str(project)]).exit_code == 0
    text = settings.read_text()
    assert "/opt/old-venv" not in text and text.count(json.dumps(hook_command("claude-code"))) == 2


def test_doctor_reads_every_place_an_mcp_server_is_registered(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"worksurface": {
        "command": "python", "args": ["-m", "worksurface", "mcp"]}}}))
    (tmp_path / "claude").mkdir()
    (tmp_path / "claude" / ".claude.json").write_text(json.dumps({
        "mcpServers": {"ws": {"type": "stdio", "command": PYTHON, "args": ["-I", "-m", "worksurface", "mcp"]}},
        "projects": {str(project): {"mcpServers": {"old": {"command": PYTHON, "args": ["-m", "worksurface", "mcp"]}}}}}))
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "config.toml").write_text(
        f'[mcp_servers.worksurface]\ncommand = "{tmp_path}/gone/bin/worksurface"\nargs = ["mcp"]\n'
        '[mcp_servers.other]\ncommand = "npx"\nargs = ["some-server"]\n')
    res = runner.invoke(app, ["hook", "doctor", "--project", str(project)])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    verdicts = {line.split(": ")[1]: line.rsplit(": ", 1)[-1] for line in lines if ": " in line and "MCP" in line}
    assert "'python' is not an absolute path" in res.stdout
    assert verdicts["claude-code MCP server (scope user) 'ws'"] == "safe"
    assert f"claude-code MCP server (scope local, {project}) 'old'" in verdicts
    assert f"{tmp_path}/gone/bin/worksurface does not exist" in res.stdout
    assert "other" not in res.stdout and "claude mcp add worksurface -- " + mcp_command() in res.stdout


def test_nothing_installed_is_said_and_is_not_a_failure(tmp_path: Path) -> None:
    res = runner.invoke(app, ["hook", "doctor", "--project", str(tmp_path)])
    assert res.exit_code == 0 and "no worksurface hook or MCP server is installed" in res.stdout


OPTIONS = st.lists(st.sampled_from([["-B"], ["-u"], ["-X", "utf8"], ["-W", "ignore"], ["-Wignore"], ["-O"], ["-E"],
                                     ["-s"], ["-P"], ["-Bu"], ["--check-hash-based-pycs", "never"]]), max_size=4)


@given(OPTIONS, OPTIONS)
def test_a_python_without_isolated_mode_is_unsafe_whatever_its_other_options(before: list[list[str]],
                                                                              after: list[list[str]]) -> None:
    head, tail = [w for o in before for w in o], [w for o in after for w in o]
    assert command_problem(shlex.join([PYTHON, *head, *tail, "-m", "worksurface", "mcp"])) is not None
    assert command_problem(shlex.join([PYTHON, *head, "-I", *tail, "-m", "worksurface", "mcp"])) is None


@pytest.mark.parametrize("options", [["-W", "-I"], ["-X", "-I"], ["-c", "-I"], ["-mworksurface", "-I"], ["x.py", "-I"]])
def test_an_i_that_python_reads_as_a_value_or_an_argument_is_not_isolated_mode(options: list[str]) -> None:
    assert command_problem(shlex.join([PYTHON, *options, "-m", "worksurface", "mcp"])) is not None


def test_install_names_an_unsafe_install_left_in_another_scope(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _settings(tmp_path / "claude" / "settings.json", OLD)        # the user scope, written by an older version
    res = runner.invoke(app, ["hook", "install", "claude-code", "--project", str(project)])
    assert res.exit_code == 0
    unsafe = [line for line in res.stdout.splitlines() if line.startswith("still unsafe: ")]
    assert len(unsafe) == 1 and "(scope user)" in unsafe[0] and OLD in unsafe[0]
    res = runner.invoke(app, ["hook", "install", "claude-code", "--scope", "user", "--project", str(project)])
    assert res.exit_code == 0 and "still unsafe" not in res.stdout
