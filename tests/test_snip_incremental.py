"""Snip reads only what is new since the previous call (its index in the session's scratch) and
decides exactly what a reading of the whole view decides: on every call of replays with re-reads,
exact and near duplicates, status messages, rewinds and compactions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builders import Convo, words
from shared import TRANSCRIPTS
from worksurface import Session
from worksurface.formats import read_transcript
from worksurface.stages import snip

REPO = Path(__file__).resolve().parents[1]
REDUNDANT: list[bool] = []  # per reading: whether the whole view held anything redundant


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every incremental reading is compared with the whole-view reading of the same call."""
    used: list[bool] = []
    incremental = snip._read_incrementally

    def both(view: Any, config: Any, ctx: Any) -> Any:
        found = incremental(view, config, ctx)
        whole = snip._read_whole_view(view, config, ctx)
        if found is not None:
            assert found[0] == whole[0]
            assert list(found[1].items()) == list(whole[1].items())  # same verdicts, same order
            assert [m.id for m in found[2]] == [m.id for m in whole[2]]
        used.append(found is not None)
        REDUNDANT.append(bool(whole[1]))
        return found

    monkeypatch.setattr(snip, "_read_incrementally", both)
    return used


def _redundant_session(steps: int = 60) -> Convo:
    c = Convo().system("You are a coding agent.").user("Refactor the parser.")
    for i in range(steps):
        if i % 5 == 0:
            c.tool("Read", {"file_path": f"/r/m{i % 3}.py"}, words(900, seed=i % 3))  # full re-reads
        elif i % 5 == 1:
            c.tool("Read", {"file_path": f"/r/m{i % 3}.py", "offset": 10, "limit": 40}, words(300, seed=i))
        elif i % 5 == 2:
            c.tool("Bash", {"command": "pytest -q"}, words(700, seed=7) + f"\n{i % 2} failed")  # near copies
        elif i % 5 == 3:
            c.tool("Bash", {"command": "git status"}, words(500, seed=11))  # exact copies
        else:
            c.tool("Grep", {"pattern": f"def f{i}"}, words(400, seed=100 + i))
        c.say(f"step {i}")
        if i % 17 == 16:
            c.user(f"also part {i}")
    return c


def _replay(messages: list[Any], rewind_at: int | None = None, **config: Any) -> None:
    with Session.open(None, **config) as session:
        n, step = 2, 0
        while n <= len(messages):
            if messages[n - 1].role == "assistant":
                step += 1
                session.prepare(messages[:n], now=1_000.0 + 10 * step)
                if rewind_at is not None and step == rewind_at:
                    session.prepare(messages[:n - 6], now=1_000.0 + 10 * step + 5)
            n += 1


def test_a_replay_with_redundancy_decides_like_the_whole_view(checked: list[bool]) -> None:
    REDUNDANT.clear()
    _replay(_redundant_session().messages, window=60_000, snip={"min_gain_tokens": 1_500})
    assert sum(checked) > 20 and sum(REDUNDANT) > 10


def test_rewinds_and_compactions_start_the_index_over(checked: list[bool]) -> None:
    _replay(_redundant_session(80).messages, rewind_at=30, window=30_000)
    assert sum(checked) > 20


@pytest.mark.parametrize("path", [REPO / "fixtures" / "small.jsonl",
                                  TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl"], ids=lambda p: p.name)
def test_real_transcripts_decide_like_the_whole_view(path: Path, checked: list[bool]) -> None:
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    _replay(read_transcript(path).messages, window=40_000)
    assert sum(checked) > 5


@pytest.mark.parametrize("path", [REPO / "fixtures" / "long.jsonl",
                                  TRANSCRIPTS / "field" / "EntityProcess-agentv" / "0b" / "9f2ac6f3aa" / "3" / "full.jsonl"],
                         ids=lambda p: p.parent.name if p.name == "full.jsonl" else p.name)
def test_after_an_edit_the_index_goes_on_from_the_changed_message(path: Path, checked: list[bool],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Default settings: other stages' edits change the view several times in each session; the index
    is taken back to where the view changed, and still decides like the whole view."""
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    rewound: list[bool] = []
    rewind = snip._Index.rewind

    def recorded(self: Any, n: int, config: Any) -> bool:
        rewound.append(rewind(self, n, config))
        return rewound[-1]

    monkeypatch.setattr(snip._Index, "rewind", recorded)
    _replay(read_transcript(path).messages)
    assert sum(checked) > 50 and sum(rewound) >= 3


def test_a_result_gone_after_the_rewind_point_no_longer_supersedes_an_earlier_one() -> None:
    """The later of two full reads of a file supersedes the earlier; once the later one's message
    changes so that it is no result to decide (here: it failed), the earlier read is decided again."""
    from types import SimpleNamespace

    from worksurface.core.config import Config
    from worksurface.core.model import ToolResult

    c = Convo().system("s").user("go")
    c.tool("Read", {"file_path": "/r/a.py"}, words(900, seed=1))
    c.say("read it")
    c.tool("Read", {"file_path": "/r/a.py"}, words(900, seed=2))
    c.say("again")
    first = c.messages
    config = Config().snip
    memory = snip.SnipMemory()
    ctx = SimpleNamespace(inputs={snip.SnipMemory: memory}, protected=frozenset())
    found = snip._read_incrementally(first, config, ctx)  # type: ignore[arg-type]
    assert found is not None and found[1]  # the earlier read is superseded
    failed = replace(first[6], blocks=(ToolResult(first[6].tool_results[0].call_id, "no such file", True),))
    second = first[:6] + [failed] + first[7:]
    again = snip._read_incrementally(second, config, ctx)  # type: ignore[arg-type]
    whole = snip._read_whole_view(second, config, ctx)  # type: ignore[arg-type]
    assert again is not None and list(again[1].items()) == list(whole[1].items()) == []


def test_a_waiting_batch_does_not_count_its_markers_again_on_every_call() -> None:
    """Redundant results that wait for their batch keep the same markers from call to call: those are
    counted once (the memory holds the last call's)."""
    messages = _redundant_session(40).messages
    with Session.open(None, window=60_000, snip={"min_gain_tokens": 1_000_000}) as session:
        counted: list[str] = []
        text = session.counter.text

        def recorded(value: str) -> int:
            counted.append(value)
            return text(value)

        session.counter.text = recorded  # type: ignore[method-assign]
        markers_per_call, skipped = [], []
        for n in range(2, len(messages) + 1):
            if messages[n - 1].role == "assistant":
                counted.clear()
                report = session.prepare(messages[:n], now=1_000.0 + n).report
                markers_per_call.append(sum(v.startswith("[snipped:") for v in counted))
                skipped.append(next(s.skipped for s in report.stages if s.name == "snip"))
    waiting = [s for s in skipped if s and "below the batch minimum" in s]
    assert len(waiting) > 10  # the redundant set waited on many calls
    # A call counts only the markers that are new or changed, not every waiting one.
    assert sum(markers_per_call) < len(waiting)
    assert max(markers_per_call) <= 3
