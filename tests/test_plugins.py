"""Third-party stages, reinjectors and summarizers, added without editing the package: entry points of
a distribution on sys.path (a `*.dist-info/entry_points.txt` made here) and `module:OBJECT`
references in config; the parts really run in `Session.prepare`, and what fails says where."""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builders import Convo, words
from worksurface import Session
from worksurface.core.errors import ConfigError, PluginError
from worksurface.core.model import Origin, message_text

_COUNTER = itertools.count()

# A third party's module: a stage that redacts a word from tool results (its own config type, read
# from plugins.options.redact), a reinjector that reminds of it after a compaction, a summarizer.
PLUGIN = '''
from pydantic import BaseModel, ConfigDict, Field

from worksurface.core.edits import ReplaceResult
from worksurface.engine.reinject import MESSAGE_READS, reinjected, report
from worksurface.engine.state import Reinjection, Reinjector, Stage, StageReport, StageResult
from worksurface.summarizers.base import Summary


class RedactConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    word: str = Field("SECRET", description="What to redact.")


def run(state, config, ctx):
    edits = [ReplaceResult("redact", r.call_id, "[redacted by plugin]")
             for m in state["view"] if m.id not in ctx.protected for r in m.tool_results if config.word in r.content]
    return StageResult(edits, StageReport("redact", state["tokens"], state["tokens"], items=len(edits)))


STAGE = Stage("redact", RedactConfig, run, reads=frozenset({"protected"}), after="budget")


def remind(view, config, ctx, budget):
    msg = reinjected(ctx, "reminder", "0", "<reminder>the build needs the release flag</reminder>")
    return Reinjection([msg], report("reminder", 0, ctx.counter.message(msg), [{"what": "reminder"}], [], []))


REINJECTOR = Reinjector("reminder", remind, reads=MESSAGE_READS, after="constraints")


class EchoSummarizer:
    name = "echo"

    def __init__(self, prefix="echo"):
        self.prefix = prefix

    def summarize(self, request, counter):
        text = f"{self.prefix}: {len(request.messages)} messages summarized"
        return Summary(text, self.name, counter.text(text))


NOT_A_PART = 42
'''


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str = PLUGIN) -> str:
    """A fresh module on sys.path (a new name each time, so no earlier import is reused)."""
    name = f"ws_plugin_{next(_COUNTER)}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def _distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, groups: dict[str, dict[str, str]]) -> None:
    """An installed distribution as importlib.metadata finds one: a dist-info folder on sys.path."""
    info = tmp_path / "ws_demo_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ws-demo-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) for group, items in groups.items()))
    monkeypatch.syspath_prepend(str(tmp_path))


def _session_with_secret() -> Convo:
    c = Convo()
    c.user("deploy the service")
    c.tool("Bash", {"command": "cat .env"}, "TOKEN=SECRET-123\n" + words(300))
    c.tool("Bash", {"command": "ls"}, words(200, seed=1))
    c.say("Done: the service is deployed.")
    c.user("now run the tests")
    return c


def _installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = _module(tmp_path, monkeypatch)
    _distribution(tmp_path, monkeypatch, {"worksurface.stages": {"redact": f"{name}:STAGE"},
                                          "worksurface.reinjectors": {"reminder": f"{name}:REINJECTOR"},
                                          "worksurface.summarizers": {"echo": f"{name}:EchoSummarizer"}})
    return name


def _assert_parts_ran(session: Session, c: Convo) -> None:
    prepared = session.prepare(c.messages, now=1.0)
    names = [s.name for s in prepared.report.stages]
    assert names[:3] == ["ingest", "budget", "redact"]  # where the stage declared it runs
    redact = next(s for s in prepared.report.stages if s.name == "redact")
    assert redact.items == 1
    assert "SECRET" not in "\n".join(message_text(m) for m in prepared.messages)
    assert "[redacted by plugin]" in "\n".join(message_text(m) for m in prepared.messages)
    compacted = session.compact(c.messages, now=2.0)
    reinjected = [r.name for r in compacted.report.reinjected]
    assert reinjected.index("reminder") == reinjected.index("constraints") + 1
    reminders = [m for m in compacted.messages if m.meta.get("reinjector") == "reminder"]
    assert len(reminders) == 1 and reminders[0].origin is Origin.REINJECTION
    assert "release flag" in message_text(reminders[0])


def test_installed_entry_points_add_a_stage_a_reinjector_and_a_summarizer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_plugin(tmp_path, monkeypatch)
    c = _session_with_secret()
    with Session.open(None, autocompact={"summarizer": "echo", "summarizer_options": {"prefix": "ECHO"}}) as s:
        _assert_parts_ran(s, c)
    with Session.open(None, autocompact={"summarizer": "echo", "summarizer_options": {"prefix": "ECHO"}}) as s:
        summary = [m for m in s.compact(c.messages, now=2.0).messages if m.origin is Origin.SUMMARY]
        assert "ECHO: " in message_text(summary[0])


def test_entry_points_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_plugin(tmp_path, monkeypatch)
    with Session.open(None, plugins={"entry_points": False}) as s:
        prepared = s.prepare(_session_with_secret().messages, now=1.0)
    assert "redact" not in [st.name for st in prepared.report.stages]
    assert "SECRET" in "\n".join(message_text(m) for m in prepared.messages)


def test_references_in_config_add_the_same_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _module(tmp_path, monkeypatch)
    c = _session_with_secret()
    # A Stage object, and a module declaring REINJECTOR (as the shipped modules do).
    plugins = {"stages": [f"{name}:STAGE"], "reinjectors": [name], "options": {"redact": {"word": "SECRET-123"}}}
    with Session.open(None, plugins=plugins) as s:
        _assert_parts_ran(s, c)
    with Session.open(None, autocompact={"summarizer": f"{name}:EchoSummarizer"}) as s:
        summary = [m for m in s.compact(c.messages, now=2.0).messages if m.origin is Origin.SUMMARY]
        assert "echo: " in message_text(summary[0])


def test_the_cli_reads_references_from_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from worksurface.cli import app
    from worksurface.formats import write_transcript
    from worksurface.formats.base import Transcript

    name = _module(tmp_path, monkeypatch)
    (tmp_path / "worksurface.toml").write_text(f'[plugins]\nstages = ["{name}:STAGE"]\n')
    src = tmp_path / "in.json"
    write_transcript(Transcript(_session_with_secret().messages, "openai"), src)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    compact = ["compact", str(src), "-o", str(tmp_path / "out.json"), "--json"]
    refused = CliRunner().invoke(app, compact)     # a project's file names code only once the user trusts it
    assert refused.exit_code == 2 and "sets plugins.stages" in refused.output
    assert CliRunner().invoke(app, ["config", "trust", str(tmp_path)]).exit_code == 0
    result = CliRunner().invoke(app, compact)
    assert result.exit_code == 0, result.output
    out = (tmp_path / "out.json").read_text()
    assert "[redacted by plugin]" in out and "SECRET" not in out


@pytest.mark.parametrize("plugins, problem", [
    ({"stages": ["no_such_module_xyz:STAGE"]}, r"plugins.stages\[0\] = 'no_such_module_xyz:STAGE': cannot import"),
    ({"stages": ["{m}:MISSING"]}, r"plugins.stages\[0\] = '{m}:MISSING': {m} has no attribute 'MISSING'"),
    ({"stages": ["{m}:NOT_A_PART"]}, r"names int, not a worksurface.engine.state.Stage"),
    ({"stages": ["{m}:REINJECTOR"]}, r"names Reinjector, not a worksurface.engine.state.Stage"),
    ({"stages": ["not a reference"]}, r"not a module:OBJECT reference"),
    ({"reinjectors": ["{m}:STAGE"]}, r"plugins.reinjectors\[0\] .*names Stage, not a worksurface.engine.state.Reinjector"),
    ({"stages": ["{m}:STAGE"], "options": {"redact": {"wrod": "x"}}},
     r"plugins.options.redact: invalid settings for RedactConfig: wrod: Extra inputs"),
    ({"stages": ["{m}:STAGE"], "options": {"redcat": {}}}, r"plugins.options: no added stage or reinjector .*'redcat'"),
])
def test_a_bad_reference_names_the_key_and_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       plugins: dict[str, Any], problem: str) -> None:
    name = _module(tmp_path, monkeypatch)
    plugins = {k: [v.format(m=name) for v in vs] if isinstance(vs, list) else vs for k, vs in plugins.items()}
    with pytest.raises(ConfigError, match=problem.format(m=name)):
        Session.open(None, plugins=plugins)


@pytest.mark.parametrize("declaration, problem", [
    ('Stage("snip", RedactConfig, run, reads=frozenset(), after="budget")', r"stage name 'snip' is taken"),
    ('Stage("late", RedactConfig, run, reads=frozenset())', r"stage 'late' declares no place: set Stage.after"),
    ('Stage("late", RedactConfig, run, reads=frozenset(), after="nope")', r"stage 'late' runs after 'nope', which is no stage \(known: ingest, budget"),
    ('Stage("late", RedactConfig, run, reads=frozenset({"mood"}), after="snip")', r"'late' reads \['mood'\], which StageContext does not have"),
])
def test_a_stage_that_declares_wrongly_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  declaration: str, problem: str) -> None:
    name = _module(tmp_path, monkeypatch, PLUGIN + f"\nBAD = {declaration}\n")
    with pytest.raises(PluginError, match=rf"plugins.stages\[0\] = '{name}:BAD': {problem}"):
        Session.open(None, plugins={"stages": [f"{name}:BAD"]})


def test_an_entry_point_that_fails_to_load_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _module(tmp_path, monkeypatch, "raise RuntimeError('boom at import')\n")
    _distribution(tmp_path, monkeypatch, {"worksurface.reinjectors": {"broken": f"{name}:REINJECTOR"}})
    with pytest.raises(PluginError, match=rf"entry point worksurface.reinjectors:broken = '{name}:REINJECTOR': "
                                          r"does not load \(RuntimeError: boom at import\)"):
        Session.open(None)


def test_a_bad_summarizer_reference_names_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _module(tmp_path, monkeypatch)
    with pytest.raises(PluginError, match=rf"autocompact.summarizer = '{name}:NOT_A_PART': names int, not a summarizer"):
        Session.open(None, autocompact={"summarizer": f"{name}:NOT_A_PART"})
    with pytest.raises(PluginError, match=r"building it with summarizer_options \['colour'\] failed \(TypeError"):
        Session.open(None, autocompact={"summarizer": f"{name}:EchoSummarizer", "summarizer_options": {"colour": 1}})
    _distribution(tmp_path, monkeypatch, {"worksurface.summarizers": {"gone": "no_such_module_xyz:S"}})
    with pytest.raises(PluginError, match=r"entry point worksurface.summarizers:gone = 'no_such_module_xyz:S': "
                                          r"does not load \(ModuleNotFoundError"):
        Session.open(None, autocompact={"summarizer": "gone"})
