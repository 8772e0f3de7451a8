"""Pairing and the invariants over shared transcripts of every format (issue 26, the pairing and
invariants families), sampled small: at three targets the view pairs every call with its result
(DESIGN 9.1), reads back from its own format with the same calls answered and worksurface's messages
still marked (9.7), and its summary never says "Active request: none" when the user asked something."""

from __future__ import annotations

import pytest

from shared import TRANSCRIPTS
from worksurface import compact
from worksurface.core.model import Message, Origin
from worksurface.core.view import pairing_problems
from worksurface.facts.requests import is_user_message
from worksurface.formats import WRITABLE_FORMATS, dumps, loads, read_transcript
from worksurface.summarizers.sections import ACTIVE_REQUEST, split_sections

SAMPLES = ["claude-code/short.jsonl", "aider/sessions/session_18_2024-08-11_095457.md", "openhands/basic.json",
           "mini-swe-agent/github_issue.traj.json", "swe-agent/demos__ctf__misc__networking_1.traj",
           "swe-agent/trajectories__demonstrations__function_calling_simple.traj"]
TARGETS = (1000, 2000, 8000)


def unanswered(messages: list[Message]) -> set[str]:
    """Calls without a result, those of the last assistant turn aside (they may still be running)."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    pending = {c.id for c in messages[last].tool_calls} if last >= 0 else set()
    return {p.split()[2] for p in pairing_problems(messages) if "has no result" in p} - pending


@pytest.mark.parametrize("name", SAMPLES)
def test_views_pair_read_back_marked_and_keep_the_request(name: str) -> None:
    path = TRANSCRIPTS / name
    if not path.exists():
        pytest.skip("shared transcripts not available")
    t = read_transcript(path)
    fmt = t.format if t.format in WRITABLE_FORMATS else "openai"
    asked = any(is_user_message(m) for m in t.messages)
    for target in TARGETS:
        view = list(compact(t, force=True, post_compact_target_tokens=target).messages)
        assert not [p for p in pairing_problems(view) if "has no result" not in p], (name, target)
        assert not unanswered(view), (name, target)
        back = list(loads(dumps(t, view, fmt), fmt).messages)
        assert unanswered(back) <= unanswered(list(t.messages)), (name, target)
        assert sorted(m.origin.value for m in back if m.is_worksurface) == \
            sorted(m.origin.value for m in view if m.is_worksurface and m.text.strip()), (name, target)
        summary = next((m.text for m in view if m.origin is Origin.SUMMARY), None)
        if summary is not None and asked:
            assert split_sections(summary)[ACTIVE_REQUEST].strip() != "- none", (name, target)
