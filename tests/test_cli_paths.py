"""Input and output paths on the command line (issue 12): refused up front with one error line, exit 2,
nothing written or replaced; and the workspace file reader never returns content from outside its root."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.core.errors import OutputPathError, WorkspaceReadError
from worksurface.core.fileio import check_output_path, read_confined

runner = CliRunner()
CHAT = [{"role": "user", "content": "fix the parser"}, {"role": "assistant", "content": "done"}]


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(CHAT))
    return p


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("worksurface: error: ") and "Traceback" not in output
    return lines[0]


def _dir(p: Path) -> None:
    p.mkdir()


def _fifo(p: Path) -> None:
    os.mkfifo(p)


@pytest.mark.parametrize(("make", "problem"), [
    (_dir, "is a directory"),
    (_fifo, "FIFO"),
])
@pytest.mark.parametrize("command", [["compact"], ["probe", "derive"]])
def test_output_that_is_not_a_regular_file_is_refused(tmp_path: Path, chat: Path, command: list[str],
                                                      make: Callable[[Path], None], problem: str) -> None:
    out = tmp_path / "out"
    make(out)
    before = sorted(os.listdir(tmp_path))
    result = runner.invoke(app, [*command, str(chat), "-o", str(out)])
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert str(out) in line and problem in line
    assert sorted(os.listdir(tmp_path)) == before          # no temp file left behind


@pytest.mark.parametrize("command", [["compact"], ["probe", "derive"]])
def test_output_symlink_is_refused_and_left_alone(tmp_path: Path, chat: Path, command: list[str]) -> None:
    target = tmp_path / "target.json"
    target.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = runner.invoke(app, [*command, str(chat), "-o", str(link)])
    assert result.exit_code == 2 and "symbolic link" in one_error_line(result.output)
    assert link.is_symlink() and target.read_text() == "keep me"


def test_output_under_a_file_and_in_proc_are_one_line_errors(tmp_path: Path, chat: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("x")
    result = runner.invoke(app, ["compact", str(chat), "-o", str(plain / "x.json")])
    assert result.exit_code == 2 and f"{plain} is not a directory" in one_error_line(result.output)
    assert plain.read_text() == "x"
    if Path("/proc/self").exists():
        result = runner.invoke(app, ["compact", str(chat), "-o", "/proc/x.json"])
        assert result.exit_code == 2 and "/proc/x.json" in one_error_line(result.output)


def test_output_equal_to_input_needs_in_place(chat: Path) -> None:
    original = chat.read_text()
    result = runner.invoke(app, ["compact", str(chat), "-o", str(chat)])
    assert result.exit_code == 2 and "--in-place" in one_error_line(result.output)
    assert chat.read_text() == original
    result = runner.invoke(app, ["compact", str(chat), "--in-place", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["output"] == str(chat)
    assert chat.read_text() != original and json.loads(chat.read_text())      # replaced, still valid JSON


def test_check_output_path_accepts_new_and_regular_files(tmp_path: Path) -> None:
    check_output_path(tmp_path / "new" / "deeper" / "out.json")     # parents are created on write
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    check_output_path(existing)
    with pytest.raises(OutputPathError, match="input file"):
        check_output_path(existing, inputs=[existing])
    check_output_path(existing, inputs=[existing], in_place=True)
    with pytest.raises(OutputPathError, match="NUL"):
        check_output_path(str(tmp_path / "a\0b"))


@pytest.mark.parametrize("command", [["inspect"], ["status"], ["compact"], ["probe", "derive"]])
def test_fifo_and_device_inputs_are_refused_without_hanging(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "FIFO"), (zero, "character device")):
        result = runner.invoke(app, [*command, str(path)])
        assert result.exit_code == 2
        line = one_error_line(result.output)
        assert str(path) in line and kind in line


# ---- the workspace file reader ------------------------------------------------------------------------------

@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('inside')\n")
    (tmp_path / "secret.env").write_text("TOKEN=outside\n")
    return ws


def test_read_confined_reads_inside_and_refuses_the_rest(workspace: Path) -> None:
    assert read_confined(workspace, "src/app.py", 1_000) == b"print('inside')\n"
    assert read_confined(workspace, str(workspace / "src" / "app.py"), 1_000).startswith(b"print")
    for path, reason in (("../secret.env", "outside"), ("src/a\0b.py", "NUL"), ("missing.py", "not found"),
                         ("src", "not a regular file")):
        with pytest.raises(WorkspaceReadError, match=reason):
            read_confined(workspace, path, 1_000)
    with pytest.raises(WorkspaceReadError, match="too large"):
        read_confined(workspace, "src/app.py", 4)
    (workspace / "link.env").symlink_to(workspace.parent / "secret.env")
    with pytest.raises(WorkspaceReadError, match="outside"):
        read_confined(workspace, "link.env", 1_000)


def test_a_folder_swapped_for_a_symlink_after_resolving_is_not_followed(workspace: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: the path resolves inside the root, then `src` becomes a symlink to the parent folder
    (where a file of the same name holds outside content) before the file is opened."""
    outside = workspace.parent
    (outside / "app.py").write_text("TOKEN=outside\n")
    real_resolve = Path.resolve

    def resolve_then_swap(self: Path, strict: bool = False) -> Path:
        resolved = real_resolve(self, strict=strict)
        if resolved.name == "app.py" and (workspace / "src").is_dir() and not (workspace / "src").is_symlink():
            (workspace / "src").rename(workspace / "src.old")
            (workspace / "src").symlink_to(outside)
        return resolved

    monkeypatch.setattr(Path, "resolve", resolve_then_swap)
    with pytest.raises(WorkspaceReadError, match="changed while being opened"):
        read_confined(workspace, "src/app.py", 1_000)


def test_files_reinjector_reports_a_nul_path_instead_of_crashing(workspace: Path) -> None:
    from worksurface.reinjectors.files import read_inside

    assert read_inside(str(workspace), "src/a\0b.py") == (None, "the path contains a NUL byte: not read")
    assert read_inside(str(workspace), "../secret.env")[0] is None
    assert read_inside(str(workspace), "src/app.py") == ("print('inside')\n", "")


def test_prepare_with_a_nul_byte_in_a_tool_path_and_a_workspace_root(workspace: Path) -> None:
    from worksurface.core.config import Config
    from worksurface.formats import loads
    from worksurface.session.session import Session

    msgs: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    for i in range(3):
        args = json.dumps({"file_path": f"src/a\u0000b{i}.py"})
        msgs.append({"role": "assistant", "tool_calls": [{"id": f"c{i}", "type": "function",
                                                          "function": {"name": "Read", "arguments": args}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 50})
    msgs.append({"role": "user", "content": "next"})
    transcript = loads(json.dumps(msgs), "openai", "nul.json")
    with Session.open(None, config=Config(workspace_root=str(workspace))) as session:
        prepared = session.prepare(transcript, force=True)
    files = next(r for r in prepared.report.reinjected if r.name == "files")
    reasons = {s["why"] for s in files.details.get("skipped_visible", [])}
    assert prepared.messages and "the path contains a NUL byte: not read" in reasons
