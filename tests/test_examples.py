"""The examples run offline and show what they claim: the model is sent a smaller view than the
history the harness keeps."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Each example stays short enough to read in one screen (the limit).
MAX_LINES = 60


def run(name: str) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True,
                          timeout=120, cwd=EXAMPLES.parent)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", ["langgraph_agent.py", "openai_loop.py"])
def test_examples_are_short(name: str) -> None:
    assert len((EXAMPLES / name).read_text().splitlines()) < MAX_LINES


def test_langgraph_agent_example() -> None:
    pytest.importorskip("langchain_core")
    out = run("langgraph_agent.py")
    sent = int(re.search(r"model sees the run_tests result as (\d+) characters", out).group(1))
    kept = int(re.search(r"graph state keeps the full result: (\d+) characters", out).group(1))
    assert sent < kept // 2
    assert "answer: All 400 tests pass." in out


def test_openai_loop_example() -> None:
    out = run("openai_loop.py")
    sent = int(re.search(r"I was sent (\d+) characters of log", out).group(1))
    kept = int(re.search(r"history keeps the full log: (\d+) characters", out).group(1))
    assert sent < kept // 2
