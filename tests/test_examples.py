"""The examples run as written, offline, with no environment of their own, and show what they claim:
the model is sent a smaller view than the history the harness keeps. The plugin example is a package
whose entry point adds its stage to every session."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Each example stays short enough to read in one screen (the limit).
MAX_LINES = 60
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def run(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run the example as a script, in this process (a subprocess would pay the imports again)."""
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def run_as_written(name: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python examples/NAME` as a newcomer types it: another folder, no WORKSURFACE_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKSURFACE_")}
    return subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_example_runs_as_written_with_no_environment(name: str, tmp_path: Path) -> None:
    result = run_as_written(name, tmp_path)
    if result.returncode == 2 and name == "langgraph_postgres.py":
        # No database named and no server binaries to start one: one line saying what to pass.
        assert result.stderr.count("\n") == 1 and "pass a database URL" in result.stderr, result.stderr
        pytest.skip(f"no PostgreSQL server binaries here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert re.search(r"\d+ characters", result.stdout), result.stdout  # each prints what the model was sent


@pytest.mark.parametrize("name", [*SCRIPTS, "redact_plugin/worksurface_redact.py"])
def test_examples_are_short(name: str) -> None:
    assert len((EXAMPLES / name).read_text().splitlines()) < MAX_LINES


def test_langchain_agent_example(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langchain_core")
    out = run("langchain_agent.py", capsys)
    sent = int(re.search(r"model sees the run_tests result as (\d+) characters", out).group(1))
    kept = int(re.search(r"graph state keeps the full result: (\d+) characters", out).group(1))
    assert sent < kept // 2
    assert "fetch_artifact returns: 400 passed" in out  # the model opened what the marker replaced
    assert "answer: All 400 tests pass." in out


def test_openai_loop_example(capsys: pytest.CaptureFixture[str]) -> None:
    out = run("openai_loop.py", capsys)
    sent = int(re.search(r"I was sent (\d+) characters of log", out).group(1))
    kept = int(re.search(r"history keeps the full log: (\d+) characters", out).group(1))
    assert sent < kept // 2


def test_langgraph_postgres_example(capsys: pytest.CaptureFixture[str], postgres_url: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langgraph.checkpoint.postgres")
    from worksurface.session.locations import list_sessions
    before = set(list_sessions(postgres_url))
    monkeypatch.setattr(sys, "argv", ["langgraph_postgres.py", postgres_url])
    out = run("langgraph_postgres.py", capsys)
    sent = int(re.search(r"model sees the run_tests result as (\d+) characters", out).group(1))
    kept = int(re.search(r"graph state keeps the full result: (\d+) characters", out).group(1))
    stored = int(re.search(r"read back from the database: (\d+) messages", out).group(1))
    assert sent < kept // 2 and stored >= 3
    assert "answer: All 400 tests pass." in out
    assert set(list_sessions(postgres_url)) == before  # the example removes its thread's session


def test_the_plugin_example_package_adds_its_stage_through_its_entry_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package as pip would install it: its module on sys.path and a dist-info whose entry points
    are the ones its pyproject.toml declares."""
    from builders import Convo, words
    from worksurface import Session
    from worksurface.core.model import message_text

    package = EXAMPLES / "redact_plugin"
    project = tomllib.loads((package / "pyproject.toml").read_text())
    info = tmp_path / "worksurface_redact-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['project']['name']}\nVersion: 0.1.0\n")
    groups = project["project"]["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) for group, items in groups.items()))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.delitem(sys.modules, "worksurface_redact", raising=False)

    c = Convo()
    c.user("deploy the service")
    c.tool("Bash", {"command": "cat .env"}, "TOKEN=HUNTER2-123\n" + words(300))
    c.say("Deployed.")
    c.user("now run the tests")
    with Session.open(None, plugins={"options": {"redact": {"word": "HUNTER2"}}}) as session:
        prepared = session.prepare(c.messages, now=1.0)
        names = [s.name for s in prepared.report.stages]
        text = "\n".join(message_text(m) for m in prepared.messages)
        replaced = [e for e in session.edits if getattr(e, "stage", None) == "redact"]
    assert names[:3] == ["ingest", "budget", "redact"]
    assert "HUNTER2" not in text and "[redacted]" in text
    assert replaced, "the redaction is a stored (sticky) edit"
    with Session.open(None, plugins={"entry_points": False}) as session:
        assert "redact" not in [s.name for s in session.prepare(c.messages, now=1.0).report.stages]
