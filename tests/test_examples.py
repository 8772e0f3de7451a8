"""The examples run offline and show what they claim: the model is sent a smaller view than the
history the harness keeps."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Each example stays short enough to read in one screen (the limit).
MAX_LINES = 60


def run(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run the example as a script, in this process (a subprocess would pay the imports again)."""
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


@pytest.mark.parametrize("name", ["langchain_agent.py", "langgraph_postgres.py", "openai_loop.py"])
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
