"""`--help` of every command and sub-command reads as paragraphs: a help paragraph is one line that
rich wraps to the terminal, never the docstring's own line breaks, and brackets are shown as written
(not taken for rich markup)."""

from __future__ import annotations

import inspect
from typing import Any, Iterator

import pytest
import typer
from typer.testing import CliRunner

from worksurface.cli import app

WIDE = 400  # columns: wide enough that rich wraps no paragraph of ours


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


ROOT = typer.main.get_command(app)
COMMANDS = list(_commands(ROOT))


def _paragraphs(help_text: str) -> list[str]:
    """What each paragraph of a help text says, whitespace folded, as a reader sees it."""
    return [" ".join(p.split()).replace("\\[", "[") for p in inspect.cleandoc(help_text).split("\n\n")
            if p.strip() and not p.startswith("\b")]


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "worksurface")
def test_every_help_paragraph_is_one_line_at_a_wide_terminal(path: tuple[str, ...]) -> None:
    command = dict(COMMANDS)[path]
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDE)}, terminal_width=WIDE)
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.strip(" │").split()) for line in result.output.splitlines()]
    for paragraph in _paragraphs(command.help or ""):
        assert paragraph in lines, f"{' '.join(path)}: {paragraph!r} is broken over lines:\n{result.output}"
    for param in command.params:
        for paragraph in _paragraphs(getattr(param, "help", None) or ""):
            assert any(paragraph in line for line in lines), (path, param.name, paragraph)


def test_brackets_in_help_are_shown_not_taken_for_markup() -> None:
    result = CliRunner().invoke(app, ["config", "--help"], env={"COLUMNS": str(WIDE)}, terminal_width=WIDE)
    assert "[tool.worksurface] in pyproject.toml" in result.output
