"""The ledger's incremental error reading (`facts.errors.ErrorReader`) says exactly what a one-shot
`tool_errors` says of the same window, on every call of a growing session: while calls wait for
their results, when an error is fixed, retried, worked around or never resolved."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from facts_transcripts import CLAUDE_CODE, LONG_SESSIONS, load
from shared import needs_shared
from worksurface.core.model import Message, ToolCall, ToolResult
from worksurface.facts import tool_errors
from worksurface.facts.errors import ErrorReader
from worksurface.offline.replay import call_points

COMMANDS = ("pytest tests/test_a.py", "pytest tests/test_a.py -x", "make build", "ls src", "git status")
OUTPUTS = ("ok", "Exit code 1\nE   AssertionError: boom", "Exit code 2\nerror: no rule to make target",
           "Traceback (most recent call last):\n  File x\nValueError: bad", "1 passed in 0.1s")


def _session(steps: list[tuple[int, int, int, bool]]) -> list[list[Message]]:
    """The transcripts a harness sends on each call: each step calls a command (or edits a file), and
    its result arrives on that call or `delay` calls later."""
    messages: list[Message] = []
    waiting: list[tuple[int, str, str]] = []  # (due step, call id, output)
    sent = []
    for k, (command, output, delay, edit) in enumerate(steps):
        cid = f"c{k}"
        call = (ToolCall(cid, "Edit", {"file_path": "/r/a.py", "old_string": "x", "new_string": f"y{k}"})
                if edit else ToolCall(cid, "Bash", {"command": COMMANDS[command]}))
        messages.append(Message(f"a{k}", "assistant", (call,)))
        waiting.append((k + delay, cid, "The file was updated." if edit else OUTPUTS[output]))
        for due, done, out in [w for w in waiting if w[0] <= k]:
            messages.append(Message(f"r{done}", "user", (ToolResult(done, out, out.startswith("Exit")),)))
            waiting.remove((due, done, out))
        sent.append(list(messages))
    return sent


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(COMMANDS) - 1), st.integers(0, len(OUTPUTS) - 1),
                          st.sampled_from((0, 0, 0, 1, 3)), st.booleans()), min_size=1, max_size=40),
       st.integers(4, 30))
def test_incremental_reading_equals_one_shot_on_every_call(steps, width) -> None:
    reader = ErrorReader()
    start = 0
    for transcript in _session(steps):
        start = max(start, len(transcript) - width)  # a window that only moves forward, like the ledger's
        window = transcript[start:]
        assert reader.read(window) == tool_errors(window)


@needs_shared(CLAUDE_CODE / LONG_SESSIONS[0])
@pytest.mark.slow
def test_incremental_reading_equals_one_shot_on_a_real_session() -> None:
    messages, _ = load(LONG_SESSIONS[0])
    reader = ErrorReader()
    seen = 0
    for n in call_points(messages):
        window = list(messages[max(0, n - 122):n])
        found = reader.read(window)
        assert found == tool_errors(window)
        seen += sum(1 for e in found if e.resolved)
    assert seen > 0  # the session has errors it got past, so resolutions were compared too
