"""Claude Code adapter on damaged input (issue 12 reproducers) and `compact --claude-projects`:
every bad file is a FormatError naming the line and the problem, and nothing is overwritten."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core.errors import FormatError
from worksurface.core.model import Text
from worksurface.formats import claude_code as cc
from worksurface.formats import loads, read_transcript
from worksurface.formats.claude_code_projects import project_dir_name
from worksurface.core.view import pairing_problems, live_slice

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMALL = FIXTURES / "small.jsonl"
runner = CliRunner()
# The small fixture is far under any threshold; counting text only keeps its forced compaction from
# depending on how autocompact sizes a tail against a measured offset (these tests are about files).
COMPACT = ["--force", "--no-usage"]
HEAD = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s1",
        "version": "2.1.39", "gitBranch": "main", "timestamp": "2026-01-01T00:00:00Z"}


def line(**record) -> str:
    return json.dumps({**HEAD, **record})


def user(uuid: str, content) -> str:
    return line(type="user", uuid=uuid, message={"role": "user", "content": content})


def assistant(uuid: str, content, mid: str = "m1") -> str:
    return line(type="assistant", uuid=uuid, message={"id": mid, "role": "assistant", "content": content})


def call(cid: str) -> dict:
    return {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": "ls"}}


def boundary(uuid: str, meta) -> str:
    return line(type="system", subtype="compact_boundary", uuid=uuid, content="Conversation compacted",
                compactMetadata=meta)


@pytest.mark.parametrize(("bad", "problem"), [
    (boundary("b1", "auto"), "compactMetadata must be an object, not a string"),
    (boundary("b1", ["auto", 5]), "compactMetadata must be an object, not a list"),
    (boundary("b1", {"trigger": "auto", "preTokens": "many"}), "compactMetadata.preTokens must be a number"),
    (assistant("a9", [{"type": "thinking", "thinking": 42}]), "'thinking' must be a string, not int"),
    (assistant("a9", [{"type": "text", "text": 7}]), "'text' must be a string, not int"),
    (assistant("a9", [{"type": "redacted_thinking", "data": [1]}]), "'data' must be a string"),
    (user("u2", [{"type": "image", "source": "http://x/y.png"}]), "'source' must be an object"),
    (user("u2", [{"type": "tool_result", "tool_use_id": "t0", "content": [{"type": "text", "text": 1}]}]),
     "'text' must be a string"),
    (user("u2", [{"type": "tool_result", "tool_use_id": "t0", "content": "x", "is_error": "yes"}]),
     "is_error must be true or false"),
    (user("u1", "again"), "uuid 'u1' is used twice (first on line 1)"),
    (assistant("a2", [call("t0")], "m2"), "tool_use id 't0' is used twice (first on line 2)"),
])
def test_damaged_record_is_a_format_error_naming_line_and_problem(bad: str, problem: str) -> None:
    text = "\n".join([user("u1", "hi"), assistant("a1", [call("t0")]),
                      user("u0", [{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}]), bad])
    with pytest.raises(FormatError) as info:
        cc.read(text, "/tmp/s.jsonl")
    assert info.value.line == 4 and problem in str(info.value), str(info.value)


def test_a_line_nested_too_deeply_is_read_around_and_strict_refuses_it() -> None:
    text = "\n".join([user("u1", "hi"), "[" * 20_000 + "]" * 20_000, user("u2", "again")]) + "\n"
    assert [m.id for m in cc.read(text, "/tmp/s.jsonl").messages] == ["u1", "u2"]
    with pytest.raises(FormatError) as info:
        loads(text, "claude-code", "/tmp/s.jsonl", strict=True)
    assert info.value.line == 2 and "nested too deeply" in str(info.value)


def test_a_call_id_may_repeat_after_a_compact_boundary() -> None:
    """A kept tail copied into a new chain repeats its calls; inside one segment that is an error."""
    text = "\n".join([assistant("a1", [call("t0")]),
                      user("u1", [{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}]),
                      boundary("b1", {"trigger": "manual", "preTokens": 10}),
                      assistant("a2", [call("t0")], "m2"),
                      user("u2", [{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}])])
    t = cc.read(text, "s.jsonl")
    assert not pairing_problems(live_slice(t.messages))


def test_empty_file_is_an_error_and_compact_leaves_the_output_alone(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(FormatError, match="empty file"):
        read_transcript(empty, "claude-code")
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    res = runner.invoke(app, ["compact", str(empty), "--format", "claude-code", "-o", str(out)])
    assert res.exit_code == 2 and "empty file" in res.output and "Traceback" not in res.output
    assert out.read_text() == "precious\n"


@pytest.mark.parametrize("bad", [boundary("b1", ["x"]), user("u1", "dup")])
def test_compact_exits_2_with_one_line_on_damaged_input(tmp_path: Path, bad: str) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text("\n".join([user("u1", "hi"), assistant("a1", [{"type": "text", "text": "ok"}]), bad]) + "\n")
    res = runner.invoke(app, ["compact", str(src), "--force", "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and f"{src}:3" in res.output
    assert "InvariantError" not in res.output and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "o.jsonl").exists()


# ------------------------------------------------------------------------------- --claude-projects


def _session_with_sidechain(tmp_path: Path) -> tuple[Path, str, str]:
    t = read_transcript(SMALL)
    sid = next(m.meta["raw"]["sessionId"] for m in t.messages)
    cwd = next(m.meta["cwd"] for m in t.messages if m.meta.get("cwd"))
    src = tmp_path / "in" / f"{sid}.jsonl"
    src.parent.mkdir()
    shutil.copy(SMALL, src)
    side = src.parent / sid / "subagents"
    side.mkdir(parents=True)
    (side / "agent-a1.jsonl").write_text(json.dumps({**HEAD, "sessionId": sid, "type": "user", "uuid": "x1",
                                                     "isSidechain": True, "agentId": "a1",
                                                     "message": {"role": "user", "content": "sub"}}) + "\n")
    return src, sid, cwd


def test_claude_projects_writes_where_claude_code_looks_and_keeps_sidechains(tmp_path: Path) -> None:
    src, sid, cwd = _session_with_sidechain(tmp_path)
    projects = tmp_path / "projects"
    res = runner.invoke(app, ["compact", str(src), *COMPACT, "--claude-projects", str(projects), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    dest = projects / project_dir_name(cwd) / f"{sid}.jsonl"
    assert data["output"] == str(dest) and dest.exists()
    assert (dest.parent / sid / "subagents" / "agent-a1.jsonl").exists()
    assert {"unit", "anchor", "before", "after", "calibration"} <= set(data["sizes"])
    out = [json.loads(x) for x in dest.read_text().splitlines()]
    assert out[: len(src.read_text().splitlines())] == [json.loads(x) for x in src.read_text().splitlines()]
    assert sum(r.get("subtype") == "compact_boundary" for r in out) == 1

    # Compacting the projects file itself again is fine while it is unchanged...
    again = runner.invoke(app, ["compact", str(dest), *COMPACT, "--claude-projects", str(projects)])
    assert again.exit_code == 0, again.output
    # ...but a different file at the destination (Claude Code wrote to it) is never replaced.
    before = dest.read_text()
    res = runner.invoke(app, ["compact", str(src), *COMPACT, "--claude-projects", str(projects)])
    assert res.exit_code == 2 and "refusing to overwrite" in res.output
    assert dest.read_text() == before


def test_a_session_file_that_changes_during_the_compaction_is_not_replaced(tmp_path: Path) -> None:
    from worksurface.formats.claude_code_projects import SessionChangedError, projects_target, write_target
    from worksurface.formats.claude_code_projects import content_hash

    src, sid, cwd = _session_with_sidechain(tmp_path)
    projects = tmp_path / "projects"
    dest = projects / project_dir_name(cwd) / f"{sid}.jsonl"
    dest.parent.mkdir(parents=True)
    shutil.copy(src, dest)
    text = dest.read_text()
    t = cc.read(text, str(dest))
    target = projects_target(projects, t, dest, None, content_hash(text))
    with dest.open("a") as fh:  # Claude Code appends a record meanwhile
        fh.write(user("late", "one more thing") + "\n")
    changed = dest.read_text()
    with pytest.raises(SessionChangedError, match="changed after it was read"):
        write_target(t, t.messages, target)
    assert dest.read_text() == changed


def test_as_new_session_moves_records_and_file_name(tmp_path: Path) -> None:
    src, sid, cwd = _session_with_sidechain(tmp_path)
    projects = tmp_path / "projects"
    res = runner.invoke(app, ["compact", str(src), *COMPACT, "--claude-projects", str(projects),
                              "--as-new-session", "--json"])
    assert res.exit_code == 0, res.output
    new_id = json.loads(res.stdout)["session_id"]
    assert new_id != sid
    dest = projects / project_dir_name(cwd) / f"{new_id}.jsonl"
    records = [json.loads(x) for x in dest.read_text().splitlines()]
    assert {r["sessionId"] for r in records if "sessionId" in r} == {new_id}
    side = dest.parent / new_id / "subagents" / "agent-a1.jsonl"
    assert json.loads(side.read_text())["sessionId"] == new_id
    assert src.read_text() == SMALL.read_text()  # the original session is untouched
    # Deterministic: the same input gives the same new id.
    res2 = runner.invoke(app, ["compact", str(src), *COMPACT, "--as-new-session", "-o",
                               str(tmp_path / "copy.jsonl"), "--json"])
    assert json.loads(res2.stdout)["session_id"] == new_id


def test_project_folder_name_matches_claude_code() -> None:
    assert project_dir_name("/home/u/my.repo_x") == "-home-u-my-repo-x"
    long = "/" + "a" * 250
    name = project_dir_name(long)
    assert name.startswith("-" + "a" * 199 + "-") and len(name) > 200


def test_record_types_of_newer_claude_code_are_kept_verbatim() -> None:
    """Claude Code 2.1.3xx appends attachment, cost-state, api-request, atis-latch, ... records."""
    newer = [json.dumps({"type": "atis-latch", "atis": {}, "sessionId": "s1"}),
             line(type="attachment", uuid="at1", parentUuid="u1", attachment={"type": "date", "date": "2026-11-30"}),
             json.dumps({"type": "cost-state", "sessionId": "s1", "totalCostUSD": 0})]
    text = "\n".join([user("u1", "hi"), *newer, assistant("a1", [{"type": "text", "text": "ok"}])])
    t = cc.read(text, "s.jsonl")
    assert [m.id for m in t.messages] == ["u1", "a1"] and len(t.extras) == 3
    assert cc.write(t) == text + "\n"  # every record unchanged: each line as it was read


def test_an_unchanged_record_is_written_as_its_line_and_a_changed_one_encoded_again() -> None:
    """Spacing, key order and escapes of an untouched line survive byte for byte; an edited message's
    record is encoded again (compact), and a line too long to hold twice is encoded again too."""
    from worksurface.formats.base import MAX_VERBATIM_LINE

    spaced = '{"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s1", "message": ' \
             '{"role": "user", "content": "caf\\u00e9 \\/ ok"}}'
    long_text = "x" * (MAX_VERBATIM_LINE + 10)
    text = "\n".join([spaced, assistant("a1", [{"type": "text", "text": "fine"}]), user("u2", long_text)])
    t = cc.read(text, "s.jsonl")
    out = cc.write(t).split("\n")
    assert out[0] == spaced
    assert out[2] != text.split("\n")[2] and '": ' not in out[2]  # encoded again (compact), not held
    assert json.loads(out[2]) == json.loads(text.split("\n")[2])
    edited = [t.messages[0], replace(t.messages[1], blocks=(Text("changed"),)), t.messages[2]]
    lines_out = cc.write(t, edited).split("\n")
    assert lines_out[0] == spaced
    assert json.loads(lines_out[1])["message"]["content"][0]["text"] == "changed"
    assert '": ' not in lines_out[1]  # encoded again, compact
