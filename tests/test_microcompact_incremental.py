"""Microcompact's walk over the view goes on from the previous call's, and after an edit (its own
clearing, another stage's) from where the view first changed: on every call it holds what a walk of
the whole view holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import Convo, words
from replaying import after_each_assistant, replay_all
from shared import TRANSCRIPTS
from worksurface import Session
from worksurface.formats import read_transcript
from worksurface.stages import microcompact

REPO = Path(__file__).resolve().parents[1]


def _entries(tail: Any) -> list[tuple[Any, ...]]:
    return [(i, m.id, call.id, r.call_id, size) for i, m, call, r, size in tail.results]


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every continued walk is compared with a walk of the whole view; returns, per call, how many
    messages the continued walk had read before it (0: it started over)."""
    went_on: list[int] = []
    continued = microcompact._tail

    def both(view: Any, config: Any, ctx: Any) -> Any:
        memory = ctx.inputs.get(microcompact.MicrocompactMemory)
        before = memory.tail.prefix if memory is not None and memory.tail is not None else []
        kept = microcompact.shared_length(view, before) if before else 0
        tail = continued(view, config, ctx)
        whole = microcompact._Tail(config)
        whole.read(view, ctx.counter)
        assert _entries(tail) == _entries(whole)
        assert {k: v[1].id for k, v in tail.calls.items()} == {k: v[1].id for k, v in whole.calls.items()}
        went_on.append(kept if len(tail.prefix) == len(view) and kept < len(view) else 0)
        return tail

    monkeypatch.setattr(microcompact, "_tail", both)
    return went_on


def _session(steps: int) -> list[Any]:
    c = Convo().system("You are a coding agent.").user("Find the slow query.")
    for i in range(steps):
        c.tool("Bash", {"command": f"psql -c 'explain {i}'"}, words(900, seed=i))
        c.tool("Read", {"file_path": f"/r/q{i % 4}.sql"}, words(700, seed=50 + i))
        c.say(f"step {i}")
        if i % 9 == 8:
            c.user(f"keep going ({i})")
    return c.messages


def _replay(messages: list[Any], **config: Any) -> None:
    with Session.open(None, **config) as session:
        replay_all(session, messages, after_each_assistant(messages), now=lambda step, n: 1_000.0 + 10 * step)


def test_clearings_go_on_from_the_first_changed_message(walks: list[int]) -> None:
    _replay(_session(60), window=40_000, microcompact={"trigger_tokens": 12_000, "clear_at_least": 1_000})
    assert any(walks), "no call went on from an edited view"


@pytest.mark.parametrize("path", [REPO / "fixtures" / "long.jsonl",
                                  TRANSCRIPTS / "field" / "EntityProcess-agentv" / "0b" / "9f2ac6f3aa" / "3" / "full.jsonl"],
                         ids=lambda p: p.parent.name if p.name == "full.jsonl" else p.name)
def test_long_sessions_walk_like_the_whole_view(path: Path, walks: list[int]) -> None:
    """Default settings: microcompact clears several times in each, and the calls after go on."""
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    _replay(read_transcript(path).messages)
    assert len(walks) > 50 and sum(1 for w in walks if w) >= 3
