"""Damaged lines of a session file (issue 24, item 1): a line that is not a JSON record (a PII redactor
broke an escape, a harness still writing the last line) is skipped with one notice naming the file,
the line and the problem, kept verbatim at its place on write-back, counted by inspect, and refused
by --strict; a record whose call sat on a damaged line is kept in the file and left out of the view."""

from __future__ import annotations

import json

import pytest

from worksurface import Session
from worksurface.core.errors import FormatError
from worksurface.core.view import pairing_problems
from worksurface.formats import DamagedLine, StrictError, codex, damaged_lines, dumps, loads
from worksurface.formats import claude_code as cc

from notices import worksurface_notices

PATH = "/tmp/session.jsonl"
# What the M-Claude redactor left: a backslash before a bracket inside a JSON string.
REDACTED = '"origin\\[REDACTED_EMAIL]:repo.git (fetch)"'


def compact(value: object) -> str:
    """JSON as Claude Code and Codex write a line (so an unchanged file writes back byte for byte)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def rec(**fields: object) -> str:
    return compact({"sessionId": "s", "cwd": "/repo", **fields})


def user(uid: str, parent: str | None, content: object) -> str:
    return rec(type="user", uuid=uid, parentUuid=parent, message={"role": "user", "content": content})


def call(uid: str, parent: str, call_id: str, api: str) -> str:
    return rec(type="assistant", uuid=uid, parentUuid=parent, message={
        "id": api, "role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "Bash",
                                                     "input": {"command": "git remote -v"}}]})


def result_line(uid: str, parent: str, call_id: str, content: str) -> str:
    """A tool_result record with `content` spliced in as raw JSON text (so it can be broken)."""
    head = rec(type="user", uuid=uid, parentUuid=parent, message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": "@@"}]})
    return head.replace('"@@"', content)


def session(damaged: str) -> str:
    return "\n".join([
        user("u1", None, "list the remotes"),
        call("a1", "u1", "t1", "msg_1"),
        damaged,
        user("u2", "r1", "and now push"),
        call("a2", "u2", "t2", "msg_2"),
        result_line("r2", "a2", "t2", '"pushed"'),
    ]) + "\n"


def test_a_broken_line_is_skipped_kept_in_place_and_the_file_writes_back_byte_for_byte() -> None:
    text = session(result_line("r1", "a1", "t1", REDACTED))
    t = cc.read(text, PATH)
    assert [m.id for m in t.messages] == ["u1", "a1", "u2", "a2", "r2"]
    assert t.messages[1].meta["interrupted"] == ["t1"]  # its result is on the damaged line
    [damaged] = damaged_lines(t.extras)
    assert (damaged.line, damaged.cut) == (3, False) and damaged.problem.startswith("broken JSON: Invalid \\escape")
    assert t.extras[0][0] == "a1"  # anchored after the message it followed
    assert cc.write(t) == text
    again = cc.read(cc.write(t), PATH)
    assert again.messages == t.messages and damaged_lines(again.extras) == [damaged]


def test_a_cut_last_line_is_the_harness_still_writing() -> None:
    whole = session(result_line("r1", "a1", "t1", '"origin git@host:repo.git"'))
    text = whole + user("u3", "r2", "one more")[:40]  # no newline: the harness is mid-write
    t = cc.read(text, PATH)
    [cut] = damaged_lines(t.extras)
    assert cut.cut and cut.line == 7 and "cut off" in cut.problem
    assert [m.id for m in t.messages] == ["u1", "a1", "r1", "u2", "a2", "r2"]
    assert cc.write(t) == text + "\n"  # kept; a newline so nothing written after it joins the line


def test_a_result_whose_call_was_on_a_damaged_line_is_kept_in_the_file_and_left_out_of_the_view() -> None:
    broken_call = call("a1", "u1", "t1", "msg_1").replace('"git remote -v"', '"git \\[x]"')
    text = session(result_line("r1", "a1", "t1", '"origin"')).replace(call("a1", "u1", "t1", "msg_1"), broken_call)
    t = cc.read(text, PATH)
    assert [m.id for m in t.messages] == ["u1", "u2", "a2", "r2"] and not pairing_problems(t.messages)
    lines = damaged_lines(t.extras)
    assert [d.line for d in lines] == [2, 3] and "answers tool call 't1'" in lines[1].problem
    assert cc.write(t) == text


def test_one_notice_per_file_names_file_lines_and_problems() -> None:
    text = session(result_line("r1", "a1", "t1", REDACTED)) + "{oops\n" + "[1]\n" + "{no\n"
    with worksurface_notices() as notices:
        loads(text, "auto", PATH)
    [notice] = notices
    assert notice.startswith(f"{PATH}: skipped 4 lines that are not JSON records (line 3: broken JSON")
    assert "line 7" in notice and "line 8: record is a JSON list" in notice and "and 1 more" in notice
    assert "--strict" in notice


def test_strict_refuses_the_file_naming_the_first_damaged_line() -> None:
    text = session(result_line("r1", "a1", "t1", REDACTED)) + "{oops\n"
    with pytest.raises(StrictError) as info:
        loads(text, "auto", PATH, strict=True)
    assert isinstance(info.value, FormatError) and info.value.line == 3
    assert str(info.value).startswith(f"{PATH}:3: broken JSON") and "and 1 more damaged line" in str(info.value)


def test_a_damaged_first_line_does_not_hide_the_format() -> None:
    text = '{"type": "user", "uuid": "x", "message": \\[\n' + session(result_line("r1", "a1", "t1", '"ok"'))
    t = loads(text, "auto", PATH)
    assert t.format == "claude-code" and damaged_lines(t.extras)[0].line == 1


def test_a_compaction_keeps_the_damaged_line_in_the_history_and_chains_only_readable_records() -> None:
    text = session(result_line("r1", "a1", "t1", REDACTED))
    t = cc.read(text, PATH)
    with Session.open(None, post_compact_target_tokens=2_000) as s:
        view = s.prepare(t, force=True).messages
    written = cc.write_session(t, view, now="2026-01-01T00:00:00.000Z")
    lines = written.split("\n")
    assert lines[2] == result_line("r1", "a1", "t1", REDACTED)  # the history, as it was
    records = [json.loads(line) for line in lines[lines.index(lines[2]) + 1:] if line.strip()]
    uuids = {r.get("uuid") for r in (json.loads(x) for x in lines if x.strip() and x != lines[2])}
    chain = records[next(i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary"):]
    assert all(r.get("parentUuid") is None or r["parentUuid"] in uuids for r in chain)


def test_codex_reads_around_a_damaged_line_and_writes_it_back_in_place() -> None:
    meta = compact({"timestamp": "t0", "type": "session_meta", "payload": {"id": "s1", "cwd": "/r"}})
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]},
             {"type": "function_call", "name": "exec", "arguments": "{}", "call_id": "c1"},
             {"type": "function_call_output", "call_id": "c1", "output": "done"}]
    lines = [meta] + [compact({"timestamp": f"t{i}", "type": "response_item", "payload": p})
                      for i, p in enumerate(items, 1)]
    broken = lines[2].replace('"exec"', '"ex\\[ec"')
    text = "\n".join([lines[0], lines[1], broken, lines[3]]) + "\n"
    t = codex.read(text, PATH)
    assert [m.role for m in t.messages] == ["user"] and not pairing_problems(t.messages)
    assert [(d.line, "broken JSON" in d.problem) for d in damaged_lines(t.extras)] == [(3, True), (4, False)]
    assert "answers tool call 'c1'" in damaged_lines(t.extras)[1].problem
    assert codex.write(t) == text
    assert dumps(t) == text


def test_damaged_lines_are_no_record_to_the_readers_of_extras() -> None:
    """Whatever reads Transcript.extras (the ledger's attachment announcements, conversions) sees
    a DamagedLine, never a half-parsed record."""
    t = cc.read(session(result_line("r1", "a1", "t1", REDACTED)), PATH)
    assert all(isinstance(r, (dict, DamagedLine)) for _, r in t.extras)
    with Session.open(None) as s:
        assert s.prepare(t).messages
    assert json.loads(dumps(t, format="openai"))  # another format leaves the source's lines behind
