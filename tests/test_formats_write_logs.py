"""Writing the agent-log formats (SWE-agent, OpenHands, mini-swe-agent, aider) back in their own format:
unmodified files give equal JSON (aider: equal text), every message reads back the same when written
afresh, and a compacted view keeps worksurface's messages with their origin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builders import Convo, words
from shared import TRANSCRIPTS, needs_shared
from worksurface import Session
from worksurface.core.errors import FormatError
from worksurface.formats import (ADAPTERS, WRITABLE_FORMATS, Transcript, detect_format, dumps, dumps_report,
                                 loads, read_transcript)
from worksurface.formats import aider, mini_swe_agent, openhands, swe_agent
from worksurface.formats.convert import CALL_AS_TEXT, ERROR_MARKER, ORIGIN_FIELD
from worksurface.core.model import Message, Origin, Text, Thinking, ToolCall, ToolResult, orphans

LOG_FORMATS = ("swe-agent", "openhands", "mini-swe-agent", "aider")
FOLDER = {"swe-agent": "swe-agent", "openhands": "openhands", "mini-swe-agent": "mini-swe-agent", "aider": "aider"}
_NOT_TRANSCRIPTS = {"LICENSE", "SOURCE.txt", "README.md", "manifest.json"}


def _files() -> list[Path]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(p for f in FOLDER.values() for p in (TRANSCRIPTS / f).rglob("*")
                  if p.is_file() and p.name not in _NOT_TRANSCRIPTS)


FILES = _files()


def _id(p: Path) -> str:
    return str(p.relative_to(TRANSCRIPTS))[:70]


def _content(messages: list[Message], kinds: bool = False) -> list[Any]:
    """What a round trip must keep: role, origin, blocks (and for aider the kind of each message)."""
    return [(m.role, m.origin, m.blocks) + ((m.meta.get("kind"), m.meta.get("session_start")) if kinds else ())
            for m in messages]


def _no_source(t: Transcript) -> Transcript:
    """The transcript as if it had not been read from a file: its messages must be written afresh."""
    return Transcript(t.messages, t.format, t.path, t.extras,
                      {k: v for k, v in t.meta.items() if k not in (aider.SOURCE_TEXT, swe_agent.TRAJECTORY)})


def test_the_log_formats_are_writable() -> None:
    assert set(LOG_FORMATS) <= set(WRITABLE_FORMATS)


@needs_shared()
@pytest.mark.parametrize("path", FILES, ids=_id)
def test_unmodified_file_writes_back_equal_and_reads_back_the_same(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    t = read_transcript(path)
    out, dropped = dumps_report(t)
    if t.format == "aider":
        assert out == text
    else:
        assert json.loads(out) == json.loads(text)
    assert dropped.empty and not dropped.carried
    again = loads(out, t.format)
    assert again.messages == t.messages
    assert _content(again.messages, kinds=True) == _content(t.messages, kinds=True)
    assert detect_format(out, str(path)) == t.format


@needs_shared()
@pytest.mark.parametrize("path", FILES, ids=_id)
def test_messages_written_afresh_read_back_the_same(path: Path) -> None:
    t = read_transcript(path)
    out = dumps(_no_source(t))
    again = loads(out, t.format)
    assert _content(again.messages, kinds=t.format == "aider") == _content(t.messages, kinds=t.format == "aider")
    # Ids are kept where the format has them (OpenHands events, provider call ids).
    if t.format == "openhands":
        assert [m.id for m in again.messages] == [m.id for m in t.messages]
    assert orphans(again.messages) == orphans(t.messages)


def _compacted(path: Path) -> tuple[Transcript, list[Message]]:
    t = read_transcript(path)
    view = Session.open(None, post_compact_target_tokens=3_000).prepare(t, force=True).messages
    return t, view


COMPACT_SAMPLES = ["swe-agent/demos__ctf__crypto__katy.traj",
                   "swe-agent/trajectories__demonstrations__function_calling_simple.traj",
                   "openhands/basic_gui_mode.json", "mini-swe-agent/github_issue.traj.json",
                   "aider/sessions/session_03_2024-08-09_193247.md", "aider/website_examples/pong.md"]


@needs_shared()
@pytest.mark.parametrize("rel", COMPACT_SAMPLES)
def test_compacted_view_is_written_in_the_format_and_reads_back_with_origins(rel: str) -> None:
    t, view = _compacted(TRANSCRIPTS / rel)
    own = [m for m in view if m.origin is not Origin.CONVERSATION]
    assert {m.origin for m in own} >= {Origin.BOUNDARY, Origin.SUMMARY}
    out = dumps(t, view)
    assert detect_format(out) == t.format
    again = loads(out, t.format)
    # Every message comes back with its role, origin and blocks; only position-made ids differ.
    assert _content(_ids_off(again.messages)) == _content(_ids_off(view))
    assert orphans(again.messages)[1] == set()
    # Written a second time, nothing changes.
    assert dumps(again) == dumps(loads(dumps(again), t.format))


def _ids_off(messages: list[Message]) -> list[Message]:
    """Messages with the call ids SWE-agent and mini-swe-agent make from positions numbered in order."""
    names: dict[str, str] = {}

    def fix(cid: str) -> str:
        if cid.startswith(("swe-", "mswea-")):
            return names.setdefault(cid, f"pos-{len(names)}")
        return cid
    out = []
    for m in messages:
        blocks = tuple(ToolCall(fix(b.id), b.name, b.input) if isinstance(b, ToolCall)
                       else ToolResult(fix(b.call_id), b.content, b.is_error, b.images) if isinstance(b, ToolResult)
                       else b for b in m.blocks)
        out.append(Message(m.id, m.role, blocks, m.origin))
    return out


@needs_shared()
def test_swe_agent_compacted_view_keeps_the_trajectory_and_marks_worksurface_entries() -> None:
    path = TRANSCRIPTS / "swe-agent/demos__ctf__crypto__katy.traj"
    t, view = _compacted(path)
    doc = json.loads(dumps(t, view))
    assert doc["trajectory"] == json.loads(path.read_text())["trajectory"]   # the run's record
    marked = [h for h in doc["history"] if ORIGIN_FIELD in h]
    assert {h[ORIGIN_FIELD] for h in marked} >= {"boundary", "summary"}
    assert all(h.get("agent") == "primary" for h in doc["history"])


def _hand_made() -> list[Message]:
    """A session shaped like another harness's: parallel calls, a failed call, a non-shell tool,
    thinking, and worksurface's own messages."""
    c = Convo("h")
    c.system("You are a coding agent.")
    c.user("Fix the parser. " + words(20))
    c.messages.append(Message("h-par", "assistant", (Thinking("plan it", "sig"), Text("Reading both."),
                                                      ToolCall("c-1", "bash", {"command": "cat a.py"}),
                                                      ToolCall("c-2", "Read", {"file_path": "/repo/b.py"}))))
    c.messages.append(Message("h-res", "user", (ToolResult("c-1", "print(1)"),
                                                ToolResult("c-2", "no such file", is_error=True))))
    c.messages.append(Message("ws-b", "system", (Text("[compacted]"),), Origin.BOUNDARY))
    c.messages.append(Message("ws-s", "user", (Text("Summary: reading files."),), Origin.SUMMARY))
    c.tool("bash", {"command": "pytest -q"}, "1 failed", is_error=True, text="Run the tests.")
    c.say("One test fails; fixing it next.")
    return c.messages


@pytest.mark.parametrize("fmt", LOG_FORMATS)
def test_hand_made_session_written_in_each_log_format_reads_back(fmt: str) -> None:
    msgs = _hand_made()
    out, dropped = dumps_report(Transcript([], fmt), msgs)
    assert detect_format(out) == fmt
    back = loads(out, fmt).messages
    assert orphans(back) == (set(), set())
    assert [m.origin for m in back if m.is_worksurface] == [Origin.BOUNDARY, Origin.SUMMARY]
    assert [m.text for m in back if m.is_worksurface] == ["[compacted]", "Summary: reading files."]
    assert dropped.thinking == 1
    text = "\n".join(json.dumps(b.__dict__, default=str) for m in back for b in m.blocks)
    if fmt == "openhands":     # OpenHands has an error observation: the flag itself survives
        assert [r.call_id for m in back for r in m.tool_results if r.is_error] == ["c-2", "call-h-6"]
        assert "c-2" in {c.id for m in back for c in m.tool_calls}
    else:                      # no error flag: the failure is in the text
        assert text.count(ERROR_MARKER.strip()) == 2 and dropped.carried["is_error"] == 2
        assert not any(r.is_error for m in back for r in m.tool_results)
    if fmt == "swe-agent":     # native tool calls keep ids, names and inputs, parallel ones included
        calls = {c.id: c for m in back for c in m.tool_calls}
        assert calls["c-2"].name == "Read" and calls["c-2"].input == {"file_path": "/repo/b.py"}
    if fmt == "mini-swe-agent":  # one bash block per turn, each followed by its output; Read is text
        calls = [c for m in back for c in m.tool_calls]
        assert [c.input["command"] for c in calls] == ["cat a.py", "pytest -q"]
        assert any(f'{CALL_AS_TEXT} Read {{"file_path":"/repo/b.py"}}' in m.text for m in back)
    if fmt == "aider":         # no tool calls at all: calls are text, results notices
        assert not any(m.tool_calls for m in back)
        assert any(m.meta.get("kind") == "tool_output" and "print(1)" in m.text for m in back)


def test_formats_say_in_one_line_what_they_cannot_hold() -> None:
    read_call = [Message("u", "user", (Text("look at x"),)),
                 Message("a", "assistant", (ToolCall("c", "Read", {"file_path": "/x"}),)),
                 Message("r", "user", (ToolResult("c", "x"),))]
    with pytest.raises(FormatError, match="mini-swe-agent runs only bash"):
        mini_swe_agent.write(Transcript([], "mini-swe-agent"), read_call)
    with pytest.raises(FormatError, match="aider chat history holds no tool calls"):
        aider.write(Transcript([], "aider"), read_call)
    # Through dumps both are converted instead (the call becomes text).
    for fmt in ("mini-swe-agent", "aider"):
        assert CALL_AS_TEXT in loads(dumps(Transcript([], fmt), read_call), fmt).messages[1].text


def test_unknown_worksurface_origin_is_a_clear_error() -> None:
    doc = [{"role": "user", "content": "hi", ORIGIN_FIELD: "gossip"},
           {"role": "assistant", "content": "x\n```mswea_bash_command\nls\n```"}]
    with pytest.raises(FormatError, match="unknown worksurface_origin 'gossip'"):
        mini_swe_agent.read(json.dumps(doc), "run.traj.json")


def test_aider_marks_worksurface_messages_with_lines_aider_skips() -> None:
    msgs = [Message("0", "user", (Text("add a test"),)), Message("1", "assistant", (Text("Done."),)),
            Message("2", "system", (Text("[compacted]"),), Origin.BOUNDARY),
            Message("3", "user", (Text("Summary line one\nline two"),), Origin.SUMMARY)]
    out = dumps(Transcript([], "aider"), msgs)
    check0 = aider.mark_check(0, Origin.BOUNDARY, "system", "[compacted]")
    check1 = aider.mark_check(1, Origin.SUMMARY, "user", "Summary line one\nline two")
    assert f"# worksurface: boundary system {check0}\n> [compacted]  \n" in out
    assert f"# worksurface: summary user {check1}\n#### Summary line one  \n#### line two  \n" in out
    back = loads(out, "aider").messages
    assert _content(back) == _content(msgs)


def test_openhands_ids_of_new_events_follow_the_source_ids() -> None:
    if not (TRANSCRIPTS / "openhands/basic_gui_mode.json").exists():
        pytest.skip("shared transcripts not available")
    t = read_transcript(TRANSCRIPTS / "openhands/basic_gui_mode.json")
    extra = Message("ws-s", "user", (Text("Summary."),), Origin.SUMMARY)
    doc = json.loads(openhands.write(t, [*t.messages, extra]))
    ids = [ev["id"] for ev in doc]
    assert len(ids) == len(set(ids)) and doc[-1][ORIGIN_FIELD] == "summary"
    assert doc[-1]["id"] > max(ev["id"] for ev in json.loads((TRANSCRIPTS / "openhands/basic_gui_mode.json")
                                                            .read_text()))


def test_adapters_all_declare_writability() -> None:
    assert all(isinstance(a.WRITABLE, bool) and (not a.WRITABLE or callable(getattr(a, "write", None)))
               for a in ADAPTERS.values())


@needs_shared()
def test_a_transcript_cut_at_a_point_writes_only_what_it_holds() -> None:
    """`--at N` keeps the file's meta but not all its messages: the source text and the whole
    trajectory must not come back."""
    from worksurface.probes.cut import cut_transcript
    chat = read_transcript(TRANSCRIPTS / "aider/sessions/session_03_2024-08-09_193247.md")
    cut = cut_transcript(chat, chat.messages[:5])
    assert isinstance(cut, Transcript)
    back = loads(dumps(cut), "aider").messages
    assert _content(back, kinds=True) == _content(chat.messages[:5], kinds=True)
    run = read_transcript(TRANSCRIPTS / "swe-agent/demos__ctf__crypto__katy.traj")
    cut = cut_transcript(run, run.messages[:7])
    assert isinstance(cut, Transcript)
    doc = json.loads(dumps(cut))
    actions = sum(1 for m in run.messages[:7] if m.tool_calls)
    assert len(doc["history"]) == 7 and actions == 3
    assert doc["trajectory"] == json.loads((TRANSCRIPTS / "swe-agent/demos__ctf__crypto__katy.traj")
                                           .read_text())["trajectory"][:actions]


@pytest.mark.parametrize("fmt", LOG_FORMATS)
def test_written_file_reads_and_writes_back_to_the_same_file(fmt: str) -> None:
    """The other direction: write, read, write gives the first file again (JSON equal; aider text)."""
    first = dumps(Transcript([], fmt), _hand_made())
    again = dumps(loads(first, fmt))
    assert again == first if fmt == "aider" else json.loads(again) == json.loads(first)


@needs_shared()
@pytest.mark.parametrize("path", FILES[::3], ids=_id)
def test_file_written_afresh_reads_and_writes_back_to_the_same_file(path: Path) -> None:
    t = read_transcript(path)
    first = dumps(_no_source(t))
    again = dumps(loads(first, t.format))
    assert again == first if t.format == "aider" else json.loads(again) == json.loads(first)
