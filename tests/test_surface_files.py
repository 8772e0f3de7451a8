"""File reads recognised in every supported format: lone `cat` / `sed -n A,Bp` / `head -n` / `tail -n`
/ `nl -ba` shell reads (without the harness's output wrapper), numbered-listing pipelines, and aider's
`/add` and `/read` notices (issue 19, Surface)."""

from __future__ import annotations

import json

from builders import Convo
from shared import TRANSCRIPTS, needs_shared
from worksurface.facts import file_activity
from worksurface.facts.fileviews import command_output
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text

BODY = "\n".join(f"line {i}" for i in range(1, 21)) + "\n"


def _fact(c: Convo, path: str):
    return next(f for f in file_activity(c.messages) if f.path.endswith(path))


def test_sed_range_read_places_lines_and_head_of_a_short_file_is_whole():
    c = Convo()
    c.user("fix it")
    c.tool("bash", {"command": "sed -n '5,7p' /w/app.py"}, "line 5\nline 6\nline 7\n")
    f = _fact(c, "/w/app.py")
    assert "read" in f.actions and f.partial
    assert "line 5\nline 6\nline 7" in f.content and "lines 1-4 not seen" in f.content
    c.tool("bash", {"command": "head -n 50 /w/short.py"}, "a = 1\nb = 2\n")
    g = _fact(c, "/w/short.py")
    assert g.content == "a = 1\nb = 2" and not g.partial


def test_mini_swe_agent_wrapper_is_not_file_content_and_failed_reads_give_none():
    c = Convo()
    c.user("fix it")
    c.tool("bash", {"command": "cat /w/x.py"}, "<returncode>0</returncode>\n<output>\nprint(1)\n</output>")
    assert _fact(c, "/w/x.py").content == "print(1)"
    c.tool("bash", {"command": "cat /w/gone.py"},
           "<returncode>1</returncode>\n<output>\ncat: /w/gone.py: No such file or directory\n</output>")
    assert _fact(c, "/w/gone.py").content is None
    assert command_output("x = 1\n[The command completed with exit code 0.]") == "x = 1"
    assert command_output("boom\n[The command completed with exit code 2.]") is None


def test_numbered_listing_pipeline_keeps_the_files_line_numbers():
    c = Convo()
    c.user("fix it")
    listing = "\n".join(f"    {i}\tline {i}" for i in range(10, 13))
    c.tool("bash", {"command": "nl -ba /w/m.py | sed -n '10,12p'"}, listing)
    f = _fact(c, "/w/m.py")
    assert "line 10\nline 11\nline 12" in f.content and "lines 1-9 not seen" in f.content
    c.tool("bash", {"command": "nl -ba /w/all.py"}, "\n".join(f"     {i}\t{t}" for i, t in enumerate("abc", 1)))
    assert _fact(c, "/w/all.py").content == "a\nb\nc"


def test_a_command_that_prints_a_file_name_adds_no_content_for_it():
    c = Convo()
    c.user("fix it")
    c.tool("bash", {"command": "cat /w/notes.txt | grep secret"}, "see /w/secret.env")
    assert not any(f.path == "/w/secret.env" for f in file_activity(c.messages))
    assert _fact(c, "/w/notes.txt").content is None  # a filtered cat is not the file


@needs_shared(TRANSCRIPTS / "mini-swe-agent")
def test_mini_swe_agent_transcript_content_has_no_wrapper():
    t = read_transcript(TRANSCRIPTS / "mini-swe-agent" / "github_issue.traj.json")
    [f] = [f for f in file_activity(t.messages) if f.path.endswith("missing_colon.py")]
    assert f.content is not None and "<returncode>" not in f.content and "def division" in f.content


@needs_shared(TRANSCRIPTS / "aider")
def test_aider_read_only_files_are_read():
    paths = set()
    for p in sorted((TRANSCRIPTS / "aider").glob("*/*.md")):
        paths |= {f.path for f in file_activity(read_transcript(p).messages) if "read" in f.actions}
    assert "/Users/gauthier/Projects/aider/tmp.one.md" in paths  # `/read tmp.one.md`


def _openhands_events(path: str, observed: str) -> list[dict]:
    tcm = {"function_name": "str_replace_editor", "tool_call_id": "toolu_1", "model_response": {
        "id": "resp-1", "choices": [{"message": {"role": "assistant", "content": "Reading it", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "str_replace_editor",
             "arguments": json.dumps({"command": "view", "path": path})}}]}}]}}
    return [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix app.py"}},
        {"id": 1, "source": "agent", "action": "read", "args": {"path": path}, "tool_call_metadata": tcm},
        {"id": 2, "source": "agent", "observation": "read", "cause": 1, "content": observed,
         "extras": {"path": path}, "tool_call_metadata": tcm},
    ]


def test_openhands_read_observation_gives_the_files_content(tmp_path):
    observed = ("Here's the result of running `cat -n` on /workspace/app.py:\n"
                "     1\timport os\n     2\t\n     3\tprint(os.getcwd())\n")
    p = tmp_path / "oh.json"
    p.write_text(json.dumps(_openhands_events("/workspace/app.py", observed)))
    [f] = file_activity(read_transcript(p).messages)
    assert f.path == "/workspace/app.py" and f.content == "import os\n\nprint(os.getcwd())" and not f.partial


def test_openhands_directory_view_is_not_a_file_read(tmp_path):
    observed = ("Here's the files and directories up to 2 levels deep in /workspace, excluding hidden items:\n"
                "/workspace/\n/workspace/app.py\n")
    p = tmp_path / "oh.json"
    p.write_text(json.dumps(_openhands_events("/workspace", observed)))
    assert file_activity(read_transcript(p).messages) == []


@needs_shared(TRANSCRIPTS / "aider")
def test_aider_applied_edit_blocks_give_the_content_of_a_file_the_session_made():
    t = read_transcript(TRANSCRIPTS / "aider" / "website_examples" / "hello-world-flask.md")
    [app] = [f for f in file_activity(t.messages) if f.path == "app.py"]
    assert not app.stale and app.content is not None
    assert "def fibonacci_x(x):" in app.content and "@app.route('/add/<int:num1>/<int:num2>')" in app.content
    assert "@app.route('/hello')" not in app.content  # the last edit removed it


def test_aider_edit_block_text_in_run_output_is_not_applied():
    c = Convo()
    c.messages.append(Message("u0", "user", (Text("/run cat notes.md"),), meta={"kind": "command"}))
    c.messages.append(Message("o0", "user", (Text(
        "evil.py\n```\n<<<<<<< SEARCH\n=======\nimport os\n>>>>>>> REPLACE\n```\nApplied edit to evil.py"),),
        meta={"kind": "tool_output"}))
    assert not any(f.path.endswith("evil.py") for f in file_activity(c.messages))
