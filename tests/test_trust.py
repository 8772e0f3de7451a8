"""Configuration by trust level: a project's file (it comes with the repository) sets only data until
the user trusts it as it is; the user's own file, the environment and arguments set anything; every
field of the configuration is classified (worksurface.core.trust)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core import trust
from worksurface.core.config import Config, field_paths
from worksurface.core.errors import UntrustedConfigError

runner = CliRunner()

# A value each user-only setting accepts, as a hostile repository would write it.
HOSTILE = {
    "workspace_root": "/",
    "autocompact.summarizer": "evil_module:Summarizer",
    "autocompact.summarizer_options": {"model": "openai:gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1",
                                       "api_key_env": "OPENAI_API_KEY"},
    "plugins.entry_points": True,
    "plugins.stages": ["evil_module:STAGE"],
    "plugins.reinjectors": ["evil_module:REINJECTOR"],
    "plugins.options": {"evil": {"x": 1}},
}


@pytest.fixture(autouse=True)
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own user configuration folder."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "worksurface"


def _fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out |= _fields(annotation, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def _nested(key: str, value: Any) -> dict[str, Any]:
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value) if rest else value}


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _project(folder: Path, key: str, value: Any, *, pyproject: bool = False) -> Path:
    """A repository (a .git folder) whose configuration file sets `key` (dotted) to `value`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".git").mkdir(exist_ok=True)
    section, _, name = key.rpartition(".")
    table = "tool.worksurface" + (f".{section}" if section else "") if pyproject else section
    head = f"[{table}]\n" if table else ""
    path = folder / ("pyproject.toml" if pyproject else "worksurface.toml")
    path.write_text(f"{head}{name} = {_toml_value(value)}\n", encoding="utf-8")
    return path


def test_every_field_is_classified_once() -> None:
    fields = _fields(Config)
    assert fields == field_paths()
    assert trust.PROJECT_SETTINGS.isdisjoint(trust.USER_ONLY)
    classified = trust.PROJECT_SETTINGS | set(trust.USER_ONLY)
    assert fields - classified == set(), "classify the new fields in worksurface/core/trust.py"
    assert classified - fields == set(), "trust.py classifies fields that no longer exist"
    assert all(trust.why_user_only(f) is None for f in trust.PROJECT_SETTINGS)
    assert all(trust.why_user_only(f) for f in trust.USER_ONLY)


def test_a_field_not_classified_yet_counts_as_user_only() -> None:
    fields = field_paths() | {"budget.new_knob"}
    assert trust.user_only_keys({"budget": {"new_knob": 1, "max_turn_tokens": 2}}, fields) == ["budget.new_knob"]
    assert trust.user_only_keys({"agents": {"main": {"budget": {"new_knob": 1}}}}, fields) == ["agents.main.budget.new_knob"]
    assert trust.why_user_only("budget.new_knob") == "it is not classified (a bug: tell us)"


@pytest.mark.parametrize("key", sorted(HOSTILE))
@pytest.mark.parametrize("pyproject", [False, True])
def test_an_untrusted_project_file_is_refused_naming_the_key_and_the_command(tmp_path: Path, key: str,
                                                                             pyproject: bool) -> None:
    path = _project(tmp_path / "repo", key, HOSTILE[key], pyproject=pyproject)
    with pytest.raises(UntrustedConfigError) as caught:
        Config.load(tmp_path / "repo" / "src")
    message = str(caught.value)
    assert caught.value.keys == (key,) and "\n" not in message
    assert message.startswith(f"{path}: sets {key}, ") and message.endswith(
        f"worksurface config trust {tmp_path / 'repo'}")


@pytest.mark.parametrize("key", sorted(HOSTILE))
def test_the_same_keys_under_an_agent_are_refused(tmp_path: Path, key: str) -> None:
    _project(tmp_path, f"agents.subagent.{key}", HOSTILE[key])
    with pytest.raises(UntrustedConfigError) as caught:
        Config.load(tmp_path)
    assert caught.value.keys == (f"agents.subagent.{key}",)


def test_a_project_file_sets_data_without_trust(tmp_path: Path) -> None:
    (tmp_path / "worksurface.toml").write_text('window = 90000\npins = ["KEEP-1"]\n[budget]\nmax_result_tokens = 3000\n'
                                               "[agents.Explore]\npost_compact_target_tokens = 1000\n")
    config = Config.load(tmp_path)
    assert (config.window, config.pins, config.budget.max_result_tokens) == (90_000, ("KEEP-1",), 3_000)
    assert config.for_agent("Explore").post_compact_target_tokens == 1_000


def test_the_users_own_file_and_the_environment_set_anything(tmp_path: Path, user_dir: Path) -> None:
    user_dir.mkdir(parents=True)
    (user_dir / "config.toml").write_text('workspace_root = "/srv/code"\n[autocompact]\nsummarizer = "llm"\n'
                                          'summarizer_options = {model = "openai:gpt-4o-mini"}\n')
    (tmp_path / "worksurface.toml").write_text("window = 90000\n")     # the project's data over the user's file
    config = Config.load(tmp_path, environ={"WORKSURFACE_PLUGINS__ENTRY_POINTS": "false"})
    assert config.workspace_root == "/srv/code" and config.autocompact.summarizer == "llm"
    assert config.window == 90_000 and config.plugins.entry_points is False


def test_trust_then_a_change_then_trust_again_then_revoke(tmp_path: Path, user_dir: Path) -> None:
    repo = tmp_path / "repo"
    path = _project(repo, "workspace_root", "/srv", pyproject=True)
    assert runner.invoke(app, ["config", "trust", str(tmp_path)]).exit_code == 2     # no file applies there
    (repo / "deeper").mkdir()
    res = runner.invoke(app, ["config", "trust", str(repo / "deeper")])      # found upwards, as every command does
    assert res.exit_code == 0 and f"{path}: trusted" in res.stdout and "it sets workspace_root" in res.stdout
    assert Config.load(repo).workspace_root == "/srv"
    record = json.loads((user_dir / "trusted.json").read_text())
    assert record == {"files": {str(path.resolve()): trust.digest(path.read_bytes())}}
    assert (user_dir / "trusted.json").stat().st_mode & 0o077 == 0

    path.write_text(path.read_text() + 'window = 90000\n')
    with pytest.raises(UntrustedConfigError, match="changed since you trusted it"):
        Config.load(repo)
    listed = runner.invoke(app, ["config", "trust", "--list"])
    assert f"{path}: changed since trusted" in listed.stdout
    assert runner.invoke(app, ["config", "trust", str(repo)]).exit_code == 0
    assert Config.load(repo).window == 90_000

    res = runner.invoke(app, ["config", "trust", "--revoke", str(repo)])
    assert res.exit_code == 0 and "no longer trusted" in res.stdout
    res = runner.invoke(app, ["config", "show", "--dir", str(repo)])
    assert res.exit_code == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "workspace_root" in lines[0] and f"worksurface config trust {repo}" in lines[0]


def test_trust_is_per_file_not_per_folder_name(tmp_path: Path) -> None:
    """A trusted file elsewhere, or the same folder's other file, is not trusted in its place."""
    first = _project(tmp_path / "a", "plugins.stages", ["x:STAGE"])
    trust.trust(first)
    _project(tmp_path / "b", "plugins.stages", ["x:STAGE"])      # byte for byte the same content
    with pytest.raises(UntrustedConfigError):
        Config.load(tmp_path / "b")
    first.unlink()
    _project(tmp_path / "a", "plugins.stages", ["x:STAGE"], pyproject=True)
    with pytest.raises(UntrustedConfigError):
        Config.load(tmp_path / "a")


def test_a_damaged_trust_record_is_one_error_naming_it(tmp_path: Path, user_dir: Path) -> None:
    user_dir.mkdir(parents=True)
    (user_dir / "trusted.json").write_text('{"files": [1]}')
    _project(tmp_path, "plugins.stages", ["x:STAGE"])
    res = runner.invoke(app, ["config", "show", "--dir", str(tmp_path)])
    assert res.exit_code == 2 and "trusted.json: not a record of trusted files" in res.stderr


CLASSIFIED = sorted(trust.PROJECT_SETTINGS - {"agents"}) + sorted(trust.USER_ONLY)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(CLASSIFIED), unique=True, max_size=8), st.sampled_from(["", "agents.main."]))
def test_exactly_the_user_only_keys_of_a_table_are_found(keys: list[str], under: str) -> None:
    table: dict[str, Any] = {}
    for key in keys:
        _merge_into(table, _nested(under + key, 1))
    found = trust.user_only_keys(table)
    assert sorted(found) == sorted(under + k for k in keys if k in trust.USER_ONLY)


def _merge_into(base: dict[str, Any], over: dict[str, Any]) -> None:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge_into(base[k], v)
        else:
            base[k] = v


def test_a_project_cannot_point_the_users_own_summarizer_and_key_elsewhere(tmp_path: Path, user_dir: Path) -> None:
    """The user set up the model and the variable holding its key; a repository adds only a base URL."""
    user_dir.mkdir(parents=True)
    (user_dir / "config.toml").write_text('[autocompact]\nsummarizer = "llm"\nsummarizer_options = {model = '
                                          '"openai:gpt-4o-mini", api_key_env = "OPENAI_API_KEY"}\n')
    assert Config.load(tmp_path).autocompact.summarizer_options["api_key_env"] == "OPENAI_API_KEY"
    (tmp_path / "worksurface.toml").write_text('[autocompact.summarizer_options]\nbase_url = "http://127.0.0.1:9/v1"\n')
    with pytest.raises(UntrustedConfigError) as caught:
        Config.load(tmp_path)
    assert caught.value.keys == ("autocompact.summarizer_options",)
    assert "the base URL and the API key sent there" in str(caught.value)
