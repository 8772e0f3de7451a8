"""Per-agent settings (config `agents`): the main agent and sub-agents (all of them, or one type) get
their own overrides, merged over the base configuration; a Claude Code sidechain's session uses the
sub-agent's, typed by the parent's call that launched it, and the main session does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cc_records
from builders import words
from worksurface import Session
from worksurface.cli import app
from worksurface.core.config import Config
from worksurface.core.errors import ConfigError
from worksurface.formats import read_transcript
from worksurface.subagents.agents import agent_of

AGENTS = {"main": {"pins": ["MAIN-ONLY"]},
          "subagent": {"post_compact_target_tokens": 1000, "autocompact": {"summary_tokens": 600}},
          "Explore": {"autocompact": {"keep_tail_tokens": 300}}}


def test_an_agent_gets_its_overrides_merged_over_the_base() -> None:
    base = Config(window=100_000, autocompact={"user_messages_tokens": 2_000}, agents=AGENTS)
    explore = base.for_agent("Explore")
    assert (explore.post_compact_target, explore.autocompact.summary_tokens, explore.autocompact.keep_tail_tokens) \
        == (1000, 600, 300)
    assert explore.autocompact.user_messages_tokens == 2_000 and explore.window == 100_000  # the base stays
    assert explore.max_output == 10_000  # window-relative defaults follow the window, as elsewhere
    assert explore.pins == () and not explore.agents  # applied: no agents table left
    assert explore.for_agent("main") == explore  # resolving again changes nothing
    other = base.for_agent("Plan")  # a type with no settings of its own: the sub-agents' ones
    assert (other.post_compact_target, other.autocompact.keep_tail_tokens) == (1000, base.autocompact.keep_tail_tokens)
    main = base.for_agent(None)
    assert main.pins == ("MAIN-ONLY",) and main.post_compact_target == base.post_compact_target
    assert main.autocompact == base.autocompact


def test_a_session_opened_for_an_agent_uses_its_settings() -> None:
    with Session.open(None, agents=AGENTS, agent="Explore") as sub, Session.open(None, agents=AGENTS) as main:
        assert sub.config.autocompact.keep_tail_tokens == 300 and sub.config.post_compact_target == 1000
        assert main.config.post_compact_target == Config().post_compact_target and main.config.pins == ("MAIN-ONLY",)


@pytest.mark.parametrize("agents, problem", [
    ({"subagent": {"autocompact": {"summary_tokens": 3}}},
     r"agents.subagent: autocompact.summary_tokens: Input should be greater than or equal to 200"),
    ({"Explore": {"windw": 1}}, r"agents.Explore: windw: not a setting \(did you mean window\?\)"),
    ({"main": {"agents": {}}}, r"agents.main cannot hold agents of its own"),
])
def test_an_agents_bad_setting_is_named(agents: dict, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Config.from_mapping({"agents": agents})


def _claude_sessions(folder: Path) -> tuple[Path, Path]:
    return cc_records.subagent_pair(folder, words)


def test_a_sidechain_is_a_subagent_of_the_type_its_parent_launched(tmp_path: Path) -> None:
    main_path, side_path = _claude_sessions(tmp_path)
    assert agent_of(read_transcript(main_path)) == "main"
    assert agent_of(read_transcript(side_path)) == "Explore"
    (main_path).unlink()  # no parent beside it: a sub-agent of no known type
    assert agent_of(read_transcript(side_path)) == "subagent"


def test_the_subagents_session_uses_its_override_and_the_main_one_does_not(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    main_path, side_path = _claude_sessions(tmp_path / "projects")
    (tmp_path / "worksurface.toml").write_text('[agents.Explore]\npost_compact_target_tokens = 1000\n'
                                               '[agents.Explore.autocompact]\nkeep_tail_tokens = 300\n')
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    shown = runner.invoke(app, ["config", "show", "--agent", "Explore"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["post_compact_target_tokens"] == 1000
    assert json.loads(runner.invoke(app, ["config", "show"]).stdout)["agents"]["Explore"]  # the table, as written

    def compacted(path: Path, *extra: str) -> dict:
        res = runner.invoke(app, ["compact", str(path), "--force", "--no-session", "--no-usage", "--json",
                                  "-o", str(tmp_path / f"{path.stem}.{len(extra)}.out.jsonl"), *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    main, side = compacted(main_path), compacted(side_path)
    assert main["tokens_before"] > 8_000 and side["tokens_before"] > 8_000
    assert side["tokens_after"] <= 2_000 < main["tokens_after"]  # the Explore target and tail, not the main ones
    # Told otherwise on the command line, the sidechain is compacted with the main agent's settings.
    assert compacted(side_path, "--agent", "main")["tokens_after"] > 2_000


def test_agents_from_the_environment_are_one_json_table(tmp_path: Path) -> None:
    from worksurface.core.config import env_names, environment_overrides

    environ = {"WORKSURFACE_AGENTS": '{"subagent": {"window": 100000}}'}
    assert Config.load(tmp_path, environ=environ).for_agent("Explore").window == 100_000
    assert env_names(environment_overrides(environ)) == ["WORKSURFACE_AGENTS"]  # as the user set it
