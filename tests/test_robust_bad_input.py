"""Bad input and hostile surface commands (issue 26, items 6 and 7): numbers JSON holds but Python would
not write back (a 5,000-digit integer, `1e400`, `NaN`) are refused with the file and line in every
JSON document format; in a session file (JSON Lines) such a line is read around like any damaged line
and `--strict` refuses it on every command; a byte order mark is skipped; `fetch_artifact` answers anything the
model sends with a result, never an exception; the report, artifact, brief and status commands give
one-line errors, never tracebacks; and the only user request of a trajectory is never dropped."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from shared import TRANSCRIPTS
from test_robust_input import TEMPLATES
from worksurface import compact
from worksurface.cli.app import app
from worksurface.core.artifacts import fetch
from worksurface.core.errors import ArtifactNotFoundError, FormatError
from worksurface.core.model import Origin
from worksurface.formats import dumps, loads, read_transcript
from worksurface.summarizers.sections import ACTIVE_REQUEST, split_sections

runner = CliRunner()
CC_LINE = {"type": "user", "uuid": "u1", "sessionId": "s", "cwd": "/r", "timestamp": "2025-01-01T00:00:00Z",
           "message": {"role": "user", "content": "hi"}}
# Numbers that are JSON (or that Python's json reads) but would not be written back as they were read.
UNREADABLE = st.one_of(
    st.integers(4301, 6000).map(lambda n: "9" * n),
    st.sampled_from(["1e400", "-1e400", "1E+999", "NaN", "Infinity", "-Infinity", "123e45678"]))


def with_number(name: str, literal: str) -> str:
    """A valid document of format `name` holding `literal` as the value of an extra field."""
    doc = TEMPLATES[name]()
    marker = "__NUMBER__"
    if isinstance(doc, dict):
        doc["extra"] = marker
    else:
        doc[0]["extra"] = marker
    return json.dumps(doc).replace(f'"{marker}"', literal)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(TEMPLATES)), literal=UNREADABLE)
@example(name="openai", literal="9" * 5000)
@example(name="openai", literal="1e400")
@example(name="anthropic", literal="NaN")
def test_a_number_that_would_not_round_trip_is_a_format_error_naming_the_file(name: str, literal: str) -> None:
    text = with_number(name, literal)
    for fmt in (name, "auto"):
        with pytest.raises(FormatError) as caught:
            loads(text, fmt, "/tmp/in.json")
        assert caught.value.path == "/tmp/in.json" and caught.value.line == 1
        assert "not read" in str(caught.value)


@settings(max_examples=30, deadline=None)
@given(literal=UNREADABLE, line=st.integers(1, 4))
@example(literal="9" * 5000, line=2)
def test_in_json_lines_the_line_is_read_around_kept_as_it_was_and_refused_by_strict(literal: str, line: int) -> None:
    """In a session file such a line is a damaged line (as a redactor's broken escape is): read around,
    written back byte for byte, and `strict` refuses the file naming the line."""
    records = [json.dumps({**CC_LINE, "uuid": f"u{i}"}) for i in range(1, 5)]
    records[line - 1] = records[line - 1][:-1] + f', "n": {literal}}}'
    text = "\n".join(records) + "\n"
    transcript = loads(text, "claude-code", "s.jsonl")
    assert [m.id for m in transcript.messages] == [f"u{i}" for i in range(1, 5) if i != line]
    assert records[line - 1] in dumps(transcript).split("\n")
    with pytest.raises(FormatError) as caught:
        loads(text, "claude-code", "s.jsonl", strict=True)
    assert caught.value.line == line and caught.value.path == "s.jsonl"


@settings(max_examples=40, deadline=None)
@given(value=st.one_of(st.integers(-10**18, 10**18), st.floats(allow_nan=False, allow_infinity=False)))
def test_finite_numbers_write_back_as_json(value: float) -> None:
    """What is refused above is all that is refused: finite numbers round-trip as valid JSON."""
    text = with_number("openai", json.dumps(value))
    out = dumps(loads(text, "openai"))
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} written back")) is not None
    assert "Infinity" not in out and "NaN" not in out


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_a_byte_order_mark_is_skipped(name: str) -> None:
    text = json.dumps(TEMPLATES[name]())
    assert loads("\ufeff" + text, "auto").messages == loads(text, "auto").messages
    assert loads("\ufeff" + json.dumps(CC_LINE) + "\n").format == "claude-code"


@pytest.mark.parametrize("command", [["inspect"], ["status"], ["brief", "--task", "x"], ["probe", "derive"],
                                     ["report", "-o", "{tmp}/r.html"], ["compact", "-o", "{tmp}/o.json"]],
                         ids=lambda c: c[0] if c[0] != "probe" else "probe derive")
@pytest.mark.parametrize("literal", ["9" * 5000, "1e400", "NaN"], ids=["5000-digit integer", "1e400", "NaN"])
def test_every_command_with_strict_names_the_file_and_line_of_a_bad_number(tmp_path: Path, command: list[str],
                                                               literal: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(CC_LINE) + "\n" + json.dumps({**CC_LINE, "uuid": "u2"})[:-1] + f', "n": {literal}}}\n')
    args = [command[0], *command[1:2] * (command[0] == "probe"), str(src)]
    args += [a.replace("{tmp}", str(tmp_path)) for a in command[1 + (command[0] == "probe"):]]
    result = runner.invoke(app, [*args, "--strict"])
    assert result.exit_code == 2 and f"{src}:2:" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# ---- fetch_artifact never raises ---------------------------------------------------------------------

class Store:
    def __init__(self, fails: Exception | None = None) -> None:
        self.fails = fails

    def artifact(self, artifact_id: str) -> str:
        if self.fails is not None:
            raise self.fails
        if artifact_id != "art-1":
            raise ArtifactNotFoundError(artifact_id)
        return "\n".join(f"line {n}" for n in range(1, 21))


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                       max_leaves=6)
ARGUMENTS = st.one_of(JSONISH, st.fixed_dictionaries({"id": st.sampled_from(["art-1", "nope", ""]) | JSONISH},
                                                     optional={"start_line": JSONISH, "end_line": JSONISH}))


@settings(max_examples=150, deadline=None)
@given(arguments=ARGUMENTS)
@example(arguments={"id": "art-1", "start_line": "abc"})
@example(arguments={"id": "art-1", "start_line": [1]})
@example(arguments={"id": "art-1", "start_line": math.inf})
@example(arguments={"id": "art-1", "start_line": math.nan})
@example(arguments=None)
def test_fetch_artifact_answers_anything_with_a_result(arguments: Any) -> None:
    answer = fetch(Store(), arguments)
    assert isinstance(answer, str) and answer
    valid = isinstance(arguments, dict) and arguments.get("id") == "art-1" and all(
        isinstance(arguments.get(k), int) and not isinstance(arguments.get(k), bool) and 1 <= arguments[k] <= 20
        for k in ("start_line", "end_line") if arguments.get(k) is not None)
    if valid and not (arguments.get("end_line") or 20) < (arguments.get("start_line") or 1):
        assert answer.startswith("line ")


def test_fetch_artifact_reports_a_store_that_cannot_be_read() -> None:
    assert fetch(Store(OSError("disk gone")), {"id": "x"}).startswith("error:")
    assert fetch(Store(), {"id": "art-1", "start_line": "3", "end_line": 4.0}) == "line 3\nline 4"


# ---- surface commands on hostile input -----------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["artifact", "{tmp}/nowhere", "x"], ["artifact", "{tmp}", "x"], ["artifact", "{tmp}/sess", "../../etc/passwd"],
    ["brief", "{tmp}/in.json", "--task", ""], ["brief", "{tmp}/in.json", "--task", "x", "--budget", "-5"],
    ["status", "{tmp}"], ["status", "{tmp}/empty.json"], ["report", "{tmp}/in.json", "--at", "abc", "-o", "{tmp}/r.html"],
    ["report", "{tmp}/in.json", "--probes", "{tmp}/in.json", "-o", "{tmp}/r.html"], ["report", "--batch", "{tmp}"],
    ["compact", "{tmp}/in.json", "--at", "-5", "-o", "{tmp}/o.json"], ["inspect", "{tmp}/bin.json"],
])
def test_surface_commands_on_hostile_input_give_one_line_errors(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "in.json").write_text(json.dumps(TEMPLATES["openai"]()))
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "bin.json").write_bytes(b"\x00\xff\xfe")
    (tmp_path / "sess" / "db").mkdir(parents=True)
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


# ---- the only request of a trajectory ---------------------------------------------------------------------

TRAJECTORIES = [("swe-agent/demos__ctf__crypto__BabyEncryption.traj", 2000),
                ("swe-agent/demos__ctf__crypto__BabyTimeCapsule.traj", 2000),
                ("mini-swe-agent/github_issue.traj.json", 1000)]


@pytest.mark.parametrize("name,target", TRAJECTORIES)
def test_the_only_user_request_of_a_trajectory_is_never_dropped(name: str, target: int) -> None:
    path = TRANSCRIPTS / name
    if not path.exists():
        pytest.skip("shared transcripts not available")
    t = read_transcript(path)
    request = next(m for m in t.messages if m.role == "user" and m.origin is Origin.CONVERSATION and m.text.strip())
    for at in (target, target // 2):
        view = list(compact(t, force=True, post_compact_target_tokens=at).messages)
        summary = next(m.text for m in view if m.origin is Origin.SUMMARY)
        active = split_sections(summary)[ACTIVE_REQUEST]
        assert active.strip() != "- none"
        # The request is quoted whole in the summary, or kept verbatim in the view.
        assert request.text in summary or any(m.id == request.id and m.text == request.text for m in view)
