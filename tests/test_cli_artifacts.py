"""Artifacts that stay fetchable (issue 31, item 3): an offline compaction keeps its session beside
the output (or in the Claude Code session's own folder), says where, and `worksurface artifact OUT ID`
finds what a marker replaced from the output file alone; session data is private (0700/0600)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app

runner = CliRunner()
# A tool result well over the budget stage's cap (12,000 tokens): stored as an artifact, replaced by a marker.
BIG = "\n".join(f"line {i}: FAILED tests/test_mod_{i}.py::test_case - AssertionError" for i in range(1400))
CHAT = [{"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Run the tests and tell me what failed."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": BIG},
        {"role": "assistant", "content": "Many tests failed; the log is long."}]
MARKER = re.compile(r"artifact ([0-9a-f]{16})")


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT), encoding="utf-8")
    return path


def compact(*args: str) -> tuple[dict, str]:
    res = runner.invoke(app, ["compact", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), res.stderr


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_compact_keeps_artifacts_beside_the_output_and_artifact_finds_them_from_it(tmp_path: Path,
                                                                                chat: Path) -> None:
    out = tmp_path / "out.json"
    data, err = compact(str(chat), "-o", str(out))
    home = tmp_path / "out.json.worksurface"
    assert data["artifacts"]["session"] == str(home) and data["artifacts"]["count"] == 1
    where = [line for line in err.splitlines() if line.strip()]
    assert len(where) == 1 and str(home) in where[0] and "1 artifact;" in where[0]

    ids = set(MARKER.findall(out.read_text(encoding="utf-8")))
    assert len(ids) == 1, "the oversized result was replaced by one marker"
    res = runner.invoke(app, ["artifact", str(out), ids.pop()])
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip("\n") == BIG

    assert mode(home) == 0o700 and mode(home / "artifacts") == 0o700 and mode(home / "db") == 0o700
    files = list((home / "artifacts").iterdir())
    assert files and all(mode(f) == 0o600 for f in files)
    assert mode(home / "lock") == 0o600


def test_artifact_still_reads_a_session_directory_and_names_what_it_looked_for(tmp_path: Path, chat: Path) -> None:
    out = tmp_path / "out.json"
    compact(str(chat), "-o", str(out))
    artifact_id = MARKER.findall(out.read_text(encoding="utf-8"))[0]
    res = runner.invoke(app, ["artifact", str(tmp_path / "out.json.worksurface"), artifact_id, "--start-line", "2",
                              "--end-line", "2"])
    assert res.exit_code == 0 and res.stdout.strip() == BIG.splitlines()[1]

    elsewhere = tmp_path / "never-compacted.json"
    elsewhere.write_text("[]", encoding="utf-8")
    res = runner.invoke(app, ["artifact", str(elsewhere), artifact_id])
    assert res.exit_code == 2
    assert "no session kept for it" in res.stderr and "never-compacted.json.worksurface" in res.stderr


def test_no_session_warns_that_the_markers_point_at_nothing(tmp_path: Path, chat: Path) -> None:
    out = tmp_path / "out.json"
    data, err = compact(str(chat), "-o", str(out), "--no-session")
    assert data["artifacts"] == {"session": None, "count": 1}
    assert "point at nothing" in err and not (tmp_path / "out.json.worksurface").exists()
    res = runner.invoke(app, ["compact", str(chat), "-o", str(out), "--no-session", "--session", str(tmp_path / "s")])
    assert res.exit_code == 2 and "exclude each other" in res.stderr


def test_an_explicit_session_directory_is_used_and_reported(tmp_path: Path, chat: Path) -> None:
    session = tmp_path / "sessions" / "one"
    data, _ = compact(str(chat), "-o", str(tmp_path / "out.json"), "--session", str(session))
    assert data["artifacts"]["session"] == str(session) and (session / "db").is_dir()
    assert not (tmp_path / "out.json.worksurface").exists()


def test_a_failed_compaction_leaves_no_session_directory_behind(tmp_path: Path) -> None:
    # A Claude Code file whose only record is not a message: nothing to write, after the session opened.
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"type": "summary", "summary": "nothing", "leafUuid": "x"}) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["compact", str(empty), "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 2, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


def test_claude_projects_keeps_the_session_in_the_claude_session_folder(tmp_path: Path) -> None:
    session_id = "11111111-2222-4333-8444-555555555555"
    records = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": session_id, "cwd": "/work/app",
         "message": {"role": "user", "content": "Run the tests."}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": session_id, "cwd": "/work/app",
         "message": {"role": "assistant", "id": "msg_1", "content": [
             {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": session_id, "cwd": "/work/app",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": BIG}]}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "sessionId": session_id, "cwd": "/work/app",
         "message": {"role": "assistant", "id": "msg_2", "content": [{"type": "text", "text": "Many failed."}]}},
    ]
    source = tmp_path / "saved.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    projects = tmp_path / "projects"
    data, err = compact(str(source), "--claude-projects", str(projects))
    written = Path(data["output"])
    home = written.parent / session_id / "worksurface"
    assert written.name == f"{session_id}.jsonl" and data["artifacts"]["session"] == str(home)
    assert str(home) in err and (home / "db").is_dir()
    artifact_id = MARKER.findall(written.read_text(encoding="utf-8"))[0]
    res = runner.invoke(app, ["artifact", str(written), artifact_id])
    assert res.exit_code == 0 and res.stdout.rstrip("\n") == BIG


def test_compacting_again_to_the_same_output_reuses_its_session(tmp_path: Path, chat: Path) -> None:
    out = tmp_path / "out.json"
    first, _ = compact(str(chat), "-o", str(out))
    ids = set(MARKER.findall(out.read_text(encoding="utf-8")))
    again, _ = compact(str(chat), "-o", str(out), "--force")  # the session goes on: a second compaction
    assert again["artifacts"]["session"] == first["artifacts"]["session"] and again["boundary"]
    for artifact_id in ids:  # what the first output's markers named is still there
        res = runner.invoke(app, ["artifact", str(out), artifact_id])
        assert res.exit_code == 0 and res.stdout.rstrip("\n") == BIG


@pytest.mark.parametrize("plant", ["symlink", "file", "foreign folder"])
def test_a_default_session_place_that_is_not_ours_is_refused_before_any_work(tmp_path: Path, chat: Path,
                                                                            plant: str) -> None:
    home = tmp_path / "out.json.worksurface"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if plant == "symlink":
        home.symlink_to(elsewhere, target_is_directory=True)
    elif plant == "file":
        home.write_text("mine", encoding="utf-8")
    else:
        home.mkdir()
        (home / "notes.txt").write_text("mine", encoding="utf-8")
    res = runner.invoke(app, ["compact", str(chat), "-o", str(tmp_path / "out.json")])
    assert res.exit_code == 2 and str(home) in res.stderr and "refusing" in res.stderr
    assert not (tmp_path / "out.json").exists() and not any(elsewhere.iterdir())
