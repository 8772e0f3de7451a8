"""The one-shot path (no session) and a ledger folded over the same messages answer alike: what
lets `MessageFacts`, a second implementation re-running the extractors, give way to `Ledger.over`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from shared import TRANSCRIPTS, needs_shared
from worksurface.formats import read_transcript
from worksurface.ledger import Ledger, MessageFacts
from worksurface.ledger.source import FactSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUESTIONS = [n for n in dir(FactSource) if not n.startswith("_")]
SAMPLE = ["claude-code/tool_heavy.jsonl", "claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
          "field/FSM1-cipher-box/49/85d640fadb/8/full.jsonl"]


def _answers(src: object, name: str) -> object:
    value = getattr(src, name)(*((12,) if name.startswith("recent_") else ()))
    if name == "file_activity":
        # The ledger keeps the content of the newest files only (the others are re-read or named).
        return [dataclasses.replace(f, content=None, content_message_id=None, partial=False) for f in value]
    if name in ("recent_outcomes", "task_specs"):
        # Same records; parallel calls whose results arrive out of call order may rank differently.
        return sorted(value, key=repr)
    return value


def _check(path: Path) -> None:
    messages = list(read_transcript(path).messages)
    one_shot, ledger = MessageFacts(messages), Ledger.over(messages).upto()
    for name in QUESTIONS:
        assert _answers(one_shot, name) == _answers(ledger, name), (path.name, name)


def test_fixture_facts_equal_the_ledger() -> None:
    _check(FIXTURES / "long.jsonl")


@needs_shared()
@pytest.mark.parametrize("name", SAMPLE)
def test_shared_sample_facts_equal_the_ledger(name: str) -> None:
    _check(TRANSCRIPTS / name)
