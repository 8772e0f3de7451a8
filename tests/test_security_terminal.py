"""Terminal output as an attack surface (issue 50, "terminal output"): a file name, a path, a tool name or
a line quoted from a transcript can hold what a terminal acts on (clear screen, window title, OSC 8
links, carriage return, C1 controls, bidi overrides) or rich markup. Every such value the CLI prints
for a person passes one escaper (core.escape.for_terminal, and rich.markup.escape where rich reads
markup): driven here through real CLI invocations, asserting no raw control reaches stdout or stderr."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st
from typer.testing import CliRunner

from builders import Convo, words
from worksurface.cli import app
from worksurface.cli.output import console, markup, shown
from worksurface.core.escape import for_terminal
from worksurface.formats import Transcript, write_transcript

runner = CliRunner()
# Clear screen, window title (OSC 0, BEL), an OSC 8 link, carriage return, a C1 CSI, bidi override and
# isolate, backspace, form feed, DEL, and rich markup that would make a link.
HOSTILE = ("ev\x1b[2J\x1b]0;pwned\x07il\r\x9b31m\u202egpj.exe\u2066x\u2069\x08\x0c\x7f"
           "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\[link=http://evil.example]y[/link]")
# What must never reach a terminal raw (newline and tab aside, every C0, DEL, C1, separators, bidi).
RAW = set(map(chr, [*range(0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)])) | set(
    "\u2028\u2029\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _raw_in(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in RAW})


@settings(max_examples=200, deadline=None)
@given(st.text())
@example(HOSTILE)
def test_the_escaper_leaves_no_control_and_changes_nothing_else(value: str) -> None:
    one = for_terminal(value)
    assert not _raw_in(one) and "\n" not in one and "\t" not in one
    multi = for_terminal(value, lines=True)
    assert not _raw_in(multi)
    assert multi.count("\n") == value.count("\n")
    if not any(c in RAW or c in "\n\t" for c in value):
        assert one == value == multi


def test_escapes_are_visible_and_name_the_character() -> None:
    assert for_terminal("a\x1b[2Jb\rc\u202ed\x9b") == "a\\x1b[2Jb\\rc\\u202ed\\x9b"
    assert for_terminal("a\nb\tc", lines=True) == "a\nb\tc" and for_terminal("a\nb\tc") == "a\\nb\\tc"


@settings(max_examples=60, deadline=None)
@given(value=st.text(max_size=40))
@example(value=HOSTILE)
def test_a_value_in_markup_prints_as_written_and_never_styles_or_links(value: str) -> None:
    out = console(width=400)
    out.file = io.StringIO()
    out.print(f"[bold]name:[/bold] {markup(value)}", highlight=False, soft_wrap=True)
    printed = out.file.getvalue()
    assert not _raw_in(printed)
    assert shown(value) in printed.replace("\n", "") or not value.strip()


def test_the_console_escapes_what_reaches_it_in_a_table_or_text() -> None:
    from rich.table import Table
    from rich.text import Text

    out = console(width=200)
    out.file = io.StringIO()
    table = Table()
    table.add_column("name")
    table.add_row(Text(HOSTILE))
    out.print(table)
    out.print(Text(HOSTILE))
    assert not _raw_in(out.file.getvalue()) and "\\x1b[2J" in out.file.getvalue()


@pytest.fixture()
def hostile(tmp_path: Path) -> Path:
    """A transcript whose file name, tool names and commands hold terminal controls."""
    c = Convo().user(f"Fix {HOSTILE}.")
    c.tool("TodoWrite", {"todos": [{"content": f"todo {HOSTILE}", "status": "in_progress"}]}, "ok")
    for i in range(12):
        c.tool(f"Bash{HOSTILE}" if i % 2 else "Read",
               {"command": f"cat {HOSTILE}{i}"} if i % 2 else {"file_path": f"/repo/{HOSTILE}{i}.py"},
               words(400, seed=i) + HOSTILE)
    c.say("done " + HOSTILE)
    path = tmp_path / f"s{HOSTILE.replace('/', '_')}.json"
    write_transcript(Transcript(c.messages, "anthropic", None), path)
    return path


def _damaged(tmp_path: Path) -> Path:
    """A Claude Code session with a hostile name and a damaged line (a notice names the file)."""
    records = []
    for n in range(6):
        kind = "user" if n % 2 == 0 else "assistant"
        record = {"type": kind, "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None, "sessionId": "s",
                  "cwd": "/r", "message": {"role": kind, "content": f"hello {n} {HOSTILE}"}}
        if kind == "assistant":
            record["message"]["id"] = f"m{n}"
        records.append(json.dumps(record))
    records.insert(3, "{not json " + HOSTILE)
    path = tmp_path / f"cc{HOSTILE.replace('/', '_')}.jsonl"
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    return path


def _commands(hostile: Path, tmp_path: Path) -> list[list[str]]:
    out = tmp_path / f"out{HOSTILE.replace('/', '_')}.json"
    damaged = _damaged(tmp_path)
    return [["inspect", str(hostile)], ["inspect", str(damaged)], ["status", str(hostile)],
            ["compact", str(hostile), "--force", "--window", "50000", "-o", str(out)],
            ["compact", str(damaged), "--force", "-o", str(tmp_path / "d.jsonl")],
            ["replay", str(hostile), "--window", "50000"],
            ["inspect", str(tmp_path / f"missing{HOSTILE.replace('/', '_')}")],
            ["compact", str(hostile), "--pin", f"@{tmp_path / ('no' + HOSTILE.replace('/', '_'))}"],
            ["compact", str(hostile), "--format", f"x{HOSTILE}"]]


def test_no_command_prints_a_raw_control_from_a_name_path_or_quoted_text(hostile: Path, tmp_path: Path) -> None:
    for args in _commands(hostile, tmp_path):
        result = runner.invoke(app, args)
        assert result.exit_code in (0, 2), (args[0], result.output)
        assert not _raw_in(result.output), (args[0], _raw_in(result.output), result.output[-300:])
        assert "\\x1b" in result.output or args[0] in ("replay",), (args[0], result.output[-300:])


@pytest.mark.slow  # a process of its own starts in seconds; the CliRunner tests above cover the same calls
def test_a_real_process_writes_no_raw_control_to_its_streams(tmp_path: Path) -> None:
    damaged = _damaged(tmp_path)
    for args in (["compact", str(damaged), "--force", "-o", str(tmp_path / "o.jsonl")],
                 ["inspect", str(tmp_path / f"gone{HOSTILE.replace('/', '_')}")]):
        done = subprocess.run([sys.executable, "-m", "worksurface", *args], capture_output=True, timeout=120)
        streams = (done.stdout + done.stderr).decode("utf-8", "backslashreplace")
        assert not _raw_in(streams), (args[0], _raw_in(streams))
        assert "\\x1b[2J" in streams, (args[0], streams[-300:])


def test_config_show_names_a_hostile_config_path_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / f"proj{HOSTILE.replace('/', '_')}"
    project.mkdir()
    (project / "worksurface.toml").write_text("window = 100000\n", encoding="utf-8")
    monkeypatch.chdir(project)
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert not _raw_in(result.output) and "\\x1b[2J" in result.output
