"""Status details of issue 19: unknown is not "none" after a commit, test output written to a file,
no fake time on transcripts without timestamps, escaping only what the wrapper needs."""

from __future__ import annotations

from pathlib import Path

from shared import TRANSCRIPTS, needs_shared
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.status import derive_events, reduce, render
from worksurface.status.replay import replay


def bash(n: int, command: str, output: str) -> list[Message]:
    return [Message(f"a{n}", "assistant", (ToolCall(f"c{n}", "Bash", {"command": command}),)),
            Message(f"r{n}", "user", (ToolResult(f"c{n}", output),))]


def test_a_commit_without_git_status_leaves_changed_files_unknown_not_none():
    msgs = bash(0, "git status --short", " M a.py\n M b.py\n")
    assert reduce(derive_events(msgs)).sections["repository"]["changed_files"].value == ["a.py", "b.py"]
    msgs += bash(1, "git add a.py && git commit -m fix", "[main 1a2b3c4] fix\n 1 file changed")
    repo = reduce(derive_events(msgs)).sections["repository"]
    assert "changed_files" not in repo and repo["last_commit"].value == "1a2b3c4 fix"
    text = render(reduce(derive_events(msgs)), epoch=1, seq=1, now=1.7e9)
    assert "changed-files" not in text
    msgs += bash(2, "git status", "On branch main\nnothing to commit, working tree clean")
    assert reduce(derive_events(msgs)).sections["repository"]["changed_files"].value == []


def test_test_output_written_to_a_file_reaches_the_bar():
    msgs = bash(0, "pytest -q > out.txt; cat out.txt", "== 1 failed, 4 passed in 0.3s ==")
    run = reduce(derive_events(msgs)).sections["verification"]["pytest"].value
    assert (run["passed"], run["failed"]) == (4, 1)
    later = bash(0, "mix test > test.log 2>&1", "") + bash(1, "tail -3 test.log", "73 tests, 0 failures")
    run = reduce(derive_events(later)).sections["verification"]["exunit"].value
    assert (run["passed"], run["failed"], run["command"]) == (73, 0, "mix test > test.log 2>&1")


def test_no_generated_at_without_a_real_time():
    msgs = [Message("u", "user", (Text("fix it"),))] + bash(0, "pytest", "== 3 passed in 0.1s ==")
    snap = reduce(derive_events(msgs))
    assert "generated-at" not in render(snap, epoch=1, seq=1, now=0.0)
    assert 'generated-at="2023-11-14T22:13:20Z"' in render(snap, epoch=1, seq=1, now=1.7e9)


@needs_shared()
def test_swe_agent_status_has_no_1970_time():
    path = next(iter(sorted((TRANSCRIPTS / "swe-agent").glob("*.traj"))))
    result = replay(list(read_transcript(path).messages), strategy="replace")
    text = render(result.snapshot, epoch=1, seq=1, now=result.now)
    assert "1970" not in text and "generated-at" not in text


def test_attributes_escape_only_what_the_wrapper_needs():
    msgs = [Message("u", "user", (Text("Don't touch the <config> & \"secrets\" file"),))]
    text = render(reduce(derive_events(msgs)), epoch=1, seq=1, now=1.7e9)
    assert "Don&#x27;t" not in text and "Don't touch the &lt;config&gt; &amp; &quot;secrets&quot; file" in text
