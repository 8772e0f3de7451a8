"""One size everywhere: `compact`, `report`, `replay`, `batch --task probe`, `probe check` and `probe
curve` give the same compaction for the same flags, say in which unit each figure is, and switch
between the units with `--no-usage` only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fixturegen import write_session
from worksurface.cli import app

runner = CliRunner()
# A generated Claude Code session (records carry `message.usage`) and flags under which it compacts
# twice when replayed: threshold 16,000 - 1,600 - 1,040 = 13,360.
FLAGS = ["--window", "16000"]
TARGET = 3_000


def run(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.stdout + (result.stderr if result.stderr_bytes else "")
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def transcript(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sizing")
    path = write_session(folder / "session.jsonl", 40_000, seed=5)
    probes = folder / "session.probes.json"
    assert runner.invoke(app, ["probe", "derive", str(path), "-o", str(probes)]).exit_code == 0
    return path, probes


@pytest.mark.parametrize("usage", [[], ["--no-usage"]], ids=["measured", "counted"])
def test_one_shot_commands_make_the_same_compaction(transcript, tmp_path, usage) -> None:
    path, probes = transcript
    sized = [*FLAGS, "--target", str(TARGET), *usage]
    compact = run("compact", str(path), "--force", "--json", "-o", str(tmp_path / "out.jsonl"), *sized)
    report = run("report", str(path), "--force", "--json", "-o", str(tmp_path / "page.html"), *sized)
    check = run("probe", "check", str(path), "--probes", str(probes), "--json", "--baseline", "truncate", *sized)
    unit = "counted" if usage else "measured"
    assert compact["sizes"]["unit"] == report["prepare"]["sizes"]["unit"] == check["usage"]["unit"] == unit
    after = compact["sizes"]["after"]
    assert report["prepare"]["sizes"]["after"] == check["usage"]["after"] == after
    assert report["prepare"]["boundary"]["summary_tokens"] == compact["boundary"]["summary_tokens"]
    assert check["methods"]["worksurface"]["tokens"] == after["counted"]
    out = tmp_path / "batch"
    assert runner.invoke(app, ["batch", str(path), "--task", "probe", "--probes-from", str(probes.parent),
                               "--targets", f"{TARGET},{TARGET * 3}", "--workers", "0", "--results-format", "jsonl",
                               "-o", str(out), *FLAGS, *usage]).exit_code == 0
    rows = {r["target"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows[TARGET]["tokens_worksurface"] == after["counted"] and rows[TARGET]["unit"] == unit
    # --targets is honoured: a larger target keeps more.
    assert rows[TARGET * 3]["tokens_worksurface"] > rows[TARGET]["tokens_worksurface"]


@pytest.mark.parametrize("usage", [[], ["--no-usage"]], ids=["measured", "counted"])
def test_replay_and_probe_curve_compact_at_the_same_calls(transcript, usage) -> None:
    path, probes = transcript
    replay = run("replay", str(path), "--json", "--no-baselines", *FLAGS, *usage)
    curve = run("probe", "curve", str(path), "--probes", str(probes), "--json", *FLAGS, *usage)
    compacted = [(c["messages"], c["view_tokens"]) for c in replay["calls"] if c["compaction"]]
    assert len(compacted) >= 2
    assert [(p["messages"], p["tokens_after"]) for p in curve] == compacted
    unit = "counted" if usage else "measured"
    assert replay["summary"]["unit"] == unit and {p["sizes"]["unit"] for p in curve} == {unit}
    for call in replay["calls"]:
        assert call["measured_tokens"] >= 0 and (not usage or call["measured_tokens"] == call["view_tokens"])


def test_the_window_a_transcript_records_is_the_default(tmp_path) -> None:
    from worksurface.formats import Transcript
    from worksurface.offline.sizing import SizeFlags

    recorded = Transcript([], "codex", meta={"context_window": 258_400})
    assert SizeFlags().config(recorded).window == 258_400
    assert SizeFlags(window=100_000).config(recorded).window == 100_000  # --window wins
    assert SizeFlags().config(Transcript([], "codex")).window == 200_000


def test_usage_that_cannot_be_the_whole_request_is_named_with_its_file_and_not_used(tmp_path) -> None:
    # A harness that records only the uncached input: a few tokens for a context of thousands.
    path = write_session(tmp_path / "uncached.jsonl", 12_000, seed=2)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for r in records:
        if r.get("type") == "assistant":
            r["message"]["usage"] = {"input_tokens": 9, "output_tokens": 4}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    compact = run("compact", str(path), "--force", "--json", "-o", str(tmp_path / "out.jsonl"))
    assert compact["sizes"]["unit"] == "counted" and compact["sizes"]["anchor"] is None
    assert any(n.startswith(f"{path}: the usage recorded at message") and "not used" in n
               for n in compact["notices"])
    replay = run("replay", str(path), "--json", "--no-baselines")
    assert replay["summary"]["unit"] == "counted" and replay["summary"]["notices"][0].startswith(str(path))


def test_compacting_a_file_again_into_the_same_output_counts_instead_of_anchoring_on_stale_usage(tmp_path) -> None:
    # The session beside the output holds the first run's compaction: the usage the file recorded
    # measured the history before it, so anchoring on it would size the compacted view as the whole
    # history again (and refuse the run as over the threshold).
    path = write_session(tmp_path / "session.jsonl", 40_000, seed=5)
    out = tmp_path / "out.jsonl"
    first = run("compact", str(path), *FLAGS, "--force", "--json", "-o", str(out))
    assert first["sizes"]["unit"] == "measured" and first["sizes"]["anchor"] is not None
    again = run("compact", str(path), *FLAGS, "--force", "--json", "-o", str(out))
    assert again["sizes"]["unit"] == "counted" and again["sizes"]["anchor"] is None
    assert any("measured the transcript before the edits this session already holds" in n for n in again["notices"])
    assert again["sizes"]["after"]["counted"] <= first["sizes"]["before"]["counted"]
