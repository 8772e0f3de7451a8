"""Small transcripts for the probe tests, built in code (the real ones live in ../shared/transcripts)."""

from __future__ import annotations

import random
from pathlib import Path

from worksurface.core.model import Message, Text, ToolCall, ToolResult
from shared import TRANSCRIPTS as _TRANSCRIPTS, PROBES as _PROBES

TRANSCRIPTS = _TRANSCRIPTS
PROBES = _PROBES
CWD = "/repo"


def _m(id: str, role: str, *blocks, **meta) -> Message:
    return Message(id, role, tuple(blocks), meta={"cwd": CWD, "git_branch": "fix-login", **meta})


def session() -> list[Message]:
    """A short coding session with one of each kind of fact a probe looks for."""
    return [
        _m("s0", "system", Text("You are a coding agent.")),
        _m("u1", "user", Text("Fix the flaky login test in tests/test_login.py. Never push to main "
                              "without a review.")),
        _m("a1", "assistant", Text("Reading the test."),
           ToolCall("c1", "Read", {"file_path": "/repo/tests/test_login.py"})),
        _m("r1", "user", ToolResult("c1", "def test_login():\n    time.sleep(2)\n    assert login()")),
        _m("a2", "assistant", ToolCall("c2", "Bash", {"command": "pytest tests/test_login.py"})),
        _m("r2", "user", ToolResult("c2", "E   AssertionError: expected 200, got 503\n"
                                          "1 failed, 3 passed in 0.51s", is_error=True)),
        _m("a3", "assistant", ToolCall("c3", "Edit", {"file_path": "/repo/tests/test_login.py",
                                                      "old_string": "time.sleep(2)",
                                                      "new_string": "time.sleep(5)"})),
        _m("r3", "user", ToolResult("c3", "The file /repo/tests/test_login.py has been updated.")),
        _m("a4", "assistant", ToolCall("c4", "TodoWrite", {"todos": [
            {"content": "Replace the sleep with a polling helper", "status": "in_progress"},
            {"content": "Run the whole test suite", "status": "pending"}]})),
        _m("r4", "user", ToolResult("c4", "Todos have been modified successfully.")),
        _m("u2", "user", Text("No, a longer sleep doesn't work. Use a polling helper instead of sleeping.")),
        _m("a5", "assistant", ToolCall("c5", "Write", {"file_path": "/repo/tests/helpers/poll.py",
                                                       "content": "def poll(check, timeout=5): ..."})),
        _m("r5", "user", ToolResult("c5", "File created successfully at: /repo/tests/helpers/poll.py")),
        # Parallel calls recorded as two assistant messages, then two result messages.
        _m("a6", "assistant", ToolCall("c6", "Bash", {"command": "pytest -q"})),
        _m("a7", "assistant", ToolCall("c7", "Bash", {"command": "git status"})),
        _m("r6", "user", ToolResult("c6", "....\n4 passed in 0.40s")),
        _m("r7", "user", ToolResult("c7", "On branch fix-login\nnothing to commit, working tree clean")),
        _m("a8", "assistant", Text("All four tests pass with the polling helper.")),
    ]


def long_session(rounds: int, seed: int = 0, tag: str = "", users: bool = True) -> list[Message]:
    """A system prompt, then `rounds` rounds of user text (unless not `users`) or tool steps of random
    sizes, some with parallel calls split over several assistant messages: material for budget and
    pairing tests. `tag` prefixes every id, to append one to another session."""
    rnd = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
    out = [Message("sys", "system", (Text("System prompt. " * 20),))]
    n = 0
    for r in range(rounds):
        kind = rnd.choice(["user", "single", "parallel"] if users else ["single", "parallel"])
        body = " ".join(rnd.choices(words, k=rnd.randint(5, 400)))
        if kind == "user":
            out.append(Message(f"{tag}u{r}", "user", (Text(f"request {r}: {body}"),)))
            continue
        calls = 1 if kind == "single" else rnd.randint(2, 3)
        ids = [f"{tag}c{n + k}" for k in range(calls)]
        n += calls
        for k, cid in enumerate(ids):
            out.append(Message(f"{tag}a{r}.{k}", "assistant",
                               (ToolCall(cid, "Bash", {"command": f"echo {r} {k}"}),)))
        for k, cid in enumerate(ids):
            out.append(Message(f"{tag}r{r}.{k}", "user", (ToolResult(cid, f"output {r}.{k}: {body}"),)))
    return out
