"""File reads recognised in every supported format: lone `cat` / `sed -n A,Bp` / `head -n` / `tail -n`
/ `nl -ba` shell reads (without the harness's output wrapper), numbered-listing pipelines, and aider's
`/add` and `/read` notices (issue 19, Surface)."""

from __future__ import annotations

from builders import Convo
from shared import TRANSCRIPTS, needs_shared
from worksurface.facts import file_activity
from worksurface.facts.files import command_output
from worksurface.formats import read_transcript

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
