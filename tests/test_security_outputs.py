"""Nothing lost, nothing exposed (issue 26, item 4): `compact --in-place` while a harness is still
appending never drops a record; `--claude-projects` takes only a Claude Code session id (a UUID) as a
file name; every output keeps its source's file mode (a 0600 session stays 0600); and one output-path
policy holds for every writer: `-` is standard output where a command prints, never a file."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from worksurface.cli.app import app
from worksurface.core.errors import OutputPathError, SourceChangedError
from worksurface.core.fileio import check_output_path, output_file, output_folder, replace_unchanged

runner = CliRunner()
SESSION_ID = "0b7d6c1e-2f4a-4c7e-9d3b-5a1f8e2c4d60"
needs_posix_modes = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def record(n: int, sid: str = SESSION_ID, parent: str | None = None, role: str = "user") -> str:
    body = ({"role": "user", "content": f"message {n}: " + "word " * 40} if role == "user" else
            {"role": "assistant", "id": f"m{n}", "content": [{"type": "text", "text": f"reply {n} " + "text " * 40}]})
    return json.dumps({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/w",
                       "sessionId": sid, "version": "1.0.0", "type": role, "uuid": f"u{n}",
                       "timestamp": f"2025-01-01T00:{n // 60:02d}:{n % 60:02d}Z", "message": body})


def session_file(path: Path, n: int = 40, sid: str = SESSION_ID, mode: int = 0o600) -> Path:
    lines, parent = [], None
    for i in range(n):
        lines.append(record(i, sid, parent, "user" if i % 2 == 0 else "assistant"))
        parent = f"u{i}"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(mode)
    return path


# ---- concurrent writers ----------------------------------------------------------------------------

@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.integers(1, 30), pause=st.sampled_from([0.0, 0.001, 0.01]))
@example(lines=14, pause=0.0)
def test_in_place_while_a_harness_appends_never_drops_a_record(tmp_path: Path, lines: int, pause: float) -> None:
    src = session_file(tmp_path / f"s-{lines}-{pause}.jsonl")
    appended = [record(1000 + i, parent="u39") for i in range(lines)]

    def harness() -> None:
        for line in appended:
            with src.open("a") as fh:  # as Claude Code appends: open, write, close
                fh.write(line + "\n")
            time.sleep(pause)

    writer = threading.Thread(target=harness)
    writer.start()
    result = runner.invoke(app, ["compact", str(src), "--in-place", "--force", "--no-usage"])
    writer.join()
    # A Claude Code file compacted keeps every record it read (as history): count records by uuid.
    texts = [src.read_text()] + [p.read_text() for p in tmp_path.glob(f"{src.name}.appended-*")]
    kept = {json.loads(line).get("uuid") for text in texts for line in text.splitlines() if line.strip()}
    lost = [line for line in appended if json.loads(line)["uuid"] not in kept]
    assert not lost, f"{len(lost)} appended records lost ({result.output[-300:]})"
    if result.exit_code != 0:
        assert "changed after it was read" in result.output or "appended to it while" in result.output


def test_replace_unchanged_refuses_a_file_that_changed_and_writes_one_that_did_not(tmp_path: Path) -> None:
    import hashlib
    target = tmp_path / "f.txt"
    target.write_text("one\n")
    read = hashlib.sha256(b"one\n").hexdigest()
    target.write_text("one\ntwo\n")
    with pytest.raises(SourceChangedError):
        replace_unchanged(target, "compacted\n", read)
    assert target.read_text() == "one\ntwo\n"
    replace_unchanged(target, "compacted\n", hashlib.sha256(b"one\ntwo\n").hexdigest())
    assert target.read_text() == "compacted\n"
    replace_unchanged(tmp_path / "new.txt", "x", None)  # None: it must not exist yet
    with pytest.raises(SourceChangedError):
        replace_unchanged(tmp_path / "new.txt", "y", None)


# ---- file modes ------------------------------------------------------------------------------------

@needs_posix_modes
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644])
def test_every_output_keeps_the_source_mode(tmp_path: Path, mode: int) -> None:
    src = session_file(tmp_path / f"{SESSION_ID}.jsonl", mode=mode)
    outputs = {
        "compact -o": (["compact", str(src), "--force", "--no-usage", "-o", str(tmp_path / "o.jsonl")], tmp_path / "o.jsonl"),
        "report": (["report", str(src), "-o", str(tmp_path / "r.html")], tmp_path / "r.html"),
        "probe derive": (["probe", "derive", str(src), "-o", str(tmp_path / "p.json")], tmp_path / "p.json"),
    }
    for name, (args, out) in outputs.items():
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (name, result.output)
        assert stat.S_IMODE(out.stat().st_mode) == mode, name
    result = runner.invoke(app, ["compact", str(src), "--force", "--no-usage", "--in-place"])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(src.stat().st_mode) == mode
    projects = tmp_path / "projects"
    result = runner.invoke(app, ["compact", str(src), "--force", "--no-usage", "--claude-projects", str(projects)])
    assert result.exit_code == 0, result.output
    assert all(stat.S_IMODE(p.stat().st_mode) == mode for p in projects.rglob("*.jsonl"))


# ---- session ids as file names ----------------------------------------------------------------------

HOSTILE_IDS = st.one_of(
    st.sampled_from(["../escape", "../../etc/x", "/tmp/abs", "a/b", "..", ".", "", "x\0y",
                     SESSION_ID + "/../../x", "~/x"]),
    st.text(min_size=1, max_size=40).filter(lambda s: not _is_uuid(s)))


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text.lower() and len(text) == 36
    except ValueError:
        return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sid=HOSTILE_IDS)
@example(sid="../escape")
@example(sid="/tmp/abs")
def test_claude_projects_takes_only_a_uuid_session_id(tmp_path: Path, sid: str) -> None:
    work = tmp_path / uuid.uuid4().hex
    work.mkdir()
    try:
        src = session_file(work / "s.jsonl", n=4, sid=sid)
    except ValueError:  # a NUL cannot even be written into the file
        return
    projects = work / "projects"
    result = runner.invoke(app, ["compact", str(src), "--force", "--no-usage", "--claude-projects", str(projects)])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    created = {p for p in work.rglob("*")} - {src}
    assert all(p == projects or projects in p.parents for p in created)
    assert not list(projects.rglob("*.jsonl")) if projects.exists() else True


# ---- one output-path policy --------------------------------------------------------------------------

def test_dash_is_standard_output_never_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = session_file(tmp_path / "s.jsonl", n=6)
    for args in (["compact", str(src), "--force", "--no-usage", "-o", "-"], ["report", str(src), "-o", "-"],
                 ["probe", "derive", str(src), "-o", "-"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert result.stdout.strip()
    assert json.loads(runner.invoke(app, ["compact", str(src), "--force", "--no-usage", "-o", "-",
                                          "--out-format", "openai"]).stdout)["messages"]
    result = runner.invoke(app, ["batch", str(src), "--task", "inspect", "-o", "-", "--workers", "0"])
    assert result.exit_code != 0 and "standard output" in result.output
    assert not (tmp_path / "-").exists()
    with pytest.raises(OutputPathError):
        check_output_path("-")
    with pytest.raises(OutputPathError):
        output_file("-")
    with pytest.raises(OutputPathError):
        output_folder("-")
    assert output_file("-", stdout=True) is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["symlink", "directory", "fifo", "file-as-parent", "ok"]))
def test_every_writer_refuses_the_same_bad_paths(tmp_path: Path, kind: str) -> None:
    work = tmp_path / uuid.uuid4().hex
    work.mkdir()
    target = work / "out"
    if kind == "symlink":
        (work / "real").write_text("x")
        target.symlink_to(work / "real")
    elif kind == "directory":
        target.mkdir()
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            return
        os.mkfifo(target)
    elif kind == "file-as-parent":
        (work / "file").write_text("x")
        target = work / "file" / "out"
    if kind == "ok":
        check_output_path(target)
        output_folder(work / "results")
        return
    with pytest.raises(OutputPathError):
        check_output_path(target)
    if kind != "directory":
        with pytest.raises(OutputPathError):
            output_folder(target)
