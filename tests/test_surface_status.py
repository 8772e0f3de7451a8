"""A Session opened on a transcript that already holds compactions carries the history before the
last boundary into its status bar, and its epoch follows the boundaries: `worksurface status` and
the Session agree on one file (issue 19, Surface)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from builders import Convo
from shared import LONG_CC, needs_shared
from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Origin, Text
from worksurface.session.session import Session
from worksurface.status.replay import replay, transcript_epoch


def _published(messages: list[Message]) -> str:
    status = [m for m in messages if m.origin is Origin.STATUS]
    assert status, "the session published no status"
    return status[-1].text


def _parts(bar: str) -> dict[str, str | None]:
    """What both must agree on: the epoch, the task block (goal, request, todo counts) and the
    tools line (calls, failures, repeats)."""
    epoch = re.search(r'<agent-status [^>]*epoch="(\d+)"', bar)
    task = re.search(r"<task[\s\S]*?</task>|<task[^>]*/>", bar)
    tools = re.search(r"<tools [^>]*/>", bar)
    return {"epoch": epoch.group(1) if epoch else None, "task": task.group(0) if task else None,
            "tools": tools.group(0) if tools else None}


@pytest.mark.slow
@needs_shared()
@pytest.mark.parametrize("path", LONG_CC, ids=lambda p: p.name[:8])
def test_cli_status_and_session_agree_after_a_harness_compaction(path):
    result = CliRunner().invoke(app, ["status", str(path), "--json"])
    assert result.exit_code == 0, result.output
    cli = json.loads(result.output)
    transcript = read_transcript(path)
    assert any(m.meta.get("compact_boundary") for m in transcript.messages), "needs a compacted session"
    with Session.open(None) as session:
        prepared = session.prepare(transcript)
    ours = _parts(_published(prepared.messages))
    theirs = _parts(cli["rendered"])
    assert ours == theirs
    assert ours["epoch"] == "2" and cli["replay"]["epochs"] == 2  # one Claude Code boundary
    goal = cli["snapshot"]["sections"]["task"]["goal"]
    # The goal is the first request, which only the history before the boundary holds.
    first = next(i for i, m in enumerate(transcript.messages) if m.id == goal["message_id"])
    boundary = next(i for i, m in enumerate(transcript.messages) if m.meta.get("compact_boundary"))
    assert first < boundary


def _boundary(epoch: int) -> Message:
    return Message(f"boundary-{epoch}", "system", (Text(f"[compacted, epoch {epoch}]"),), Origin.BOUNDARY,
                   {"epoch": epoch})


def _cc_boundary(n: int) -> Message:
    return Message(f"cc-boundary-{n}", "system", (Text("Conversation compacted"),), Origin.CONVERSATION,
                   {"compact_boundary": True})


def test_epoch_follows_worksurface_and_claude_code_boundaries():
    c = Convo()
    c.user("Fix the signature check in payments")
    c.tool("Bash", {"command": "ls"}, "a.py")
    c.messages.append(_cc_boundary(1))              # Claude Code's: epoch 2
    c.user("continue")
    c.tool("Bash", {"command": "ls"}, "a.py")
    assert transcript_epoch(c.messages) == 2
    c.messages.append(_boundary(5))                 # worksurface's names its epoch
    assert transcript_epoch(c.messages) == 5
    c.messages.append(_cc_boundary(2))
    assert transcript_epoch(c.messages) == 6
    assert replay(c.messages, strategy="delta").state.epoch == 6


def test_session_carries_goal_todos_and_counts_across_a_boundary():
    c = Convo()
    c.user("Fix the signature check in payments")
    c.tool("TodoWrite", {"todos": [{"content": f"step {i}", "status": "completed" if i < 5 else "pending",
                                    "activeForm": f"step {i}"} for i in range(6)]}, "Todos updated")
    for i in range(4):
        c.tool("Bash", {"command": f"grep -rn sig{i} ."}, f"a.py:{i}: sig")
    c.messages.append(_cc_boundary(1))
    c.user("go on")
    c.tool("Bash", {"command": "pytest"}, "1 passed")
    with Session.open(None) as session:
        bar = _published(session.prepare(c.messages).messages)
    assert 'goal="Fix the signature check in payments"' in bar
    assert "5 of 6 done" in bar
    assert 'epoch="2"' in bar
    assert _parts(bar)["tools"] == _parts(_render_replay(c.messages))["tools"]


def _render_replay(messages: list[Message]) -> str:
    from worksurface.status.render import render
    r = replay(messages, strategy="delta")
    return render(r.snapshot, epoch=r.state.epoch, seq=r.state.seq, now=r.now)




@pytest.mark.slow
@needs_shared()
def test_approved_plan_is_reinjected_with_its_state_on_8463c716():
    path = next((p for p in LONG_CC if p.name.startswith("8463c716")), None)
    if path is None:
        pytest.skip("8463c716 not in the shared transcripts")
    with Session.open(None) as session:
        prepared = session.compact(read_transcript(path))
    [plan] = [m.text for m in prepared.messages if m.meta.get("reinjector") == "plan"]
    assert plan.startswith("<plan>\nApproved plan")        # the state: approved with ExitPlanMode
    assert "# Plan: Enrich TranscriptRenderer with metadata (spotter-fum.1)" in plan
    assert "drifting-tumbling-whisper.md" in plan          # the plan file the agent wrote
    # The file holds one Claude Code compaction (epoch 2): this one is epoch 3, for boundary and bar alike.
    epochs = {m.origin: m.meta.get("epoch") for m in prepared.messages
              if m.origin in (Origin.BOUNDARY, Origin.SUMMARY, Origin.STATUS)}
    assert epochs == {Origin.BOUNDARY: 3, Origin.SUMMARY: 3, Origin.STATUS: 3}


def test_a_view_compacted_by_worksurface_keeps_its_goal_and_epoch_in_a_new_session():
    c = Convo()
    c.user("Port the parser to the new API")
    for i in range(12):
        c.tool("Bash", {"command": f"grep -rn old_api_{i} src"}, f"src/p{i}.py:3: old_api_{i}()\n" * 30)
    c.user("Now the tests")
    c.tool("Bash", {"command": "pytest -q"}, "3 passed")
    with Session.open(None) as first:
        compacted = first.compact(c.messages).messages
    assert any(m.origin is Origin.BOUNDARY for m in compacted)
    epoch = next(m.meta["epoch"] for m in compacted if m.origin is Origin.BOUNDARY)
    # What a harness would send back: the compacted view without the old status, plus a new turn.
    fed = [m for m in compacted if m.origin is not Origin.STATUS]
    fed.append(Message("late-user", "user", (Text("and the docs"),)))
    with Session.open(None) as second:
        bar = _published(second.prepare(fed).messages)
    assert 'goal="Port the parser to the new API"' in bar
    assert f'epoch="{epoch}"' in bar
    cli = _render_replay(fed)
    assert _parts(cli)["epoch"] == str(epoch) and 'goal="Port the parser to the new API"' in cli
