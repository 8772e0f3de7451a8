"""`worksurface batch` without a cluster: discovery, tasks and their error rows, the results folder,
resume, probe matching, the summary, the page and the CLI's serial mode (--workers 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shared import PROBES, TRANSCRIPTS, needs_shared
from worksurface.batch.discover import DiscoveryError, discover
from worksurface.batch.job import BatchError, BatchOptions, _probe_index, plan, run_batch
from worksurface.batch.page import render_batch_page
from worksurface.batch.results import ResultStore, ResultsError, comparable, load, summarize
from worksurface.batch.tasks import TaskSpec, content_hash, run_serial, run_task
from worksurface.cli import app

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "fixtures" / "small.jsonl"


def malformed_copy(folder: Path) -> Path:
    """A Claude Code file whose first records are fine (so it is recognised) and whose third is a
    record that cannot be read (a user record without its message)."""
    lines = SMALL.read_text(encoding="utf-8").splitlines(keepends=True)
    bad = folder / "broken.jsonl"
    bad.write_text("".join(lines[:2]) + '{"type": "user", "uuid": "u-bad", "message": 7}\n' + "".join(lines[2:]),
                   encoding="utf-8")
    return bad


def damaged_copy(folder: Path) -> Path:
    """A Claude Code file with a damaged third line (not JSON), as a PII redactor leaves one."""
    lines = SMALL.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = folder / "damaged.jsonl"
    damaged.write_text("".join(lines[:2]) + '{"type": "user", "message": {"content": "a\\[REDACTED]"}\n'
                       + "".join(lines[2:]), encoding="utf-8")
    return damaged


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """A folder like a shared corpus: two transcripts in nested folders, a licence, notes, a binary file."""
    root = tmp_path / "corpus"
    (root / "a" / "b").mkdir(parents=True)
    shutil.copy(SMALL, root / "a" / "one.jsonl")
    shutil.copy(SMALL, root / "a" / "b" / "two.jsonl")
    (root / "a" / "two.jsonl").write_text((root / "a" / "b" / "two.jsonl").read_text() + "\n")
    (root / "LICENSE").write_text("MIT License\n")
    (root / "a" / "SOURCE.txt").write_text("https://example.org\n")
    (root / "notes.json").write_text('{"not": "a transcript"}')
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (root / ".hidden.jsonl").write_text(SMALL.read_text())
    return root


# --- discovery ------------------------------------------------------------------------------------------

def test_discover_walks_folders_and_skips_what_is_not_a_transcript(corpus: Path) -> None:
    found = discover([str(corpus)])
    names = sorted(Path(p).relative_to(corpus).as_posix() for p in found.transcripts)
    assert names == ["a/b/two.jsonl", "a/one.jsonl", "a/two.jsonl"]
    skipped = {Path(p).name: why for p, why in found.skipped}
    assert set(skipped) == {"LICENSE", "SOURCE.txt", "notes.json", "blob.bin"}
    assert "not UTF-8" in skipped["blob.bin"] and "format" in skipped["notes.json"]


def test_discover_globs_manifests_and_explicit_files(corpus: Path, tmp_path: Path) -> None:
    found = discover([str(corpus / "**" / "two.jsonl")])
    assert sorted(Path(p).name for p in found.transcripts) == ["two.jsonl", "two.jsonl"]
    manifest = tmp_path / "list.txt"
    manifest.write_text("# two files\ncorpus/a/one.jsonl\n\ncorpus/notes.json\n")
    listed = discover([f"@{manifest}"])
    # Named files are always taken: the non-transcript then gives an error row, not silence.
    assert [Path(p).name for p in listed.transcripts] == ["one.jsonl", "notes.json"]
    with pytest.raises(DiscoveryError, match="no file matches"):
        discover([str(tmp_path / "*.nothing")])
    with pytest.raises(DiscoveryError, match="no such file"):
        discover([str(tmp_path / "missing")])


def test_discover_reads_a_json_document_longer_than_the_sniffed_bytes(tmp_path: Path) -> None:
    doc = [{"role": "user", "content": "fix the bug " + "x" * 200_000}, {"role": "assistant", "content": "done"}]
    (tmp_path / "big.json").write_text(json.dumps(doc))
    assert [Path(p).name for p in discover([str(tmp_path)]).transcripts] == ["big.json"]


@needs_shared()
def test_discover_the_shared_corpus_finds_every_format() -> None:
    from worksurface.formats import read_transcript

    found = discover([str(TRANSCRIPTS)])
    formats = {read_transcript(p).format for p in found.transcripts}
    assert {"claude-code", "swe-agent", "openhands", "mini-swe-agent", "aider"} <= formats
    assert not any(Path(p).name in ("LICENSE", "SOURCE.txt", "README.md") for p in found.transcripts)


# --- tasks ----------------------------------------------------------------------------------------------

def test_tasks_give_one_row_per_target_with_the_figures(tmp_path: Path) -> None:
    compact = run_task(TaskSpec(str(SMALL), "compact", (4_000, 20_000)))
    assert [r["target"] for r in compact] == [4_000, 20_000]
    for r in compact:
        assert r["error"] is None and r["format"] == "claude-code" and r["content_hash"] == content_hash(SMALL)
        assert r["view_tokens"] <= r["tokens_before"] == r["tokens"]
        assert r["stage_autocompact_after"] <= r["stage_autocompact_before"]
    assert compact[0]["view_tokens"] < compact[1]["view_tokens"]

    probe = run_task(TaskSpec(str(SMALL), "probe", (4_000,)))
    row = probe[0]
    assert row["probe_source"] == "derive" and row["probes"] > 0
    for method in ("worksurface", "truncate", "mask"):
        assert 0.0 <= row[f"retention_{method}"] <= 1.0
        assert row[f"retained_{method}"] == round(row[f"retention_{method}"] * row["probes"])
    assert row["retention_worksurface__request"] is not None

    inspect = run_task(TaskSpec(str(SMALL), "inspect"))
    assert len(inspect) == 1 and inspect[0]["target"] is None
    parts = ("stable_prefix", "dialogue", "tool_calls", "observations", "other")
    assert sum(inspect[0][f"tokens_{k}"] for k in parts) == inspect[0]["tokens"]

    replay = run_task(TaskSpec(str(SMALL), "replay", (20_000,)))[0]
    assert replay["calls"] > 1 and replay["cached_tokens"] <= replay["input_tokens"]
    assert "billed_cost_usd" in replay


def test_a_malformed_file_gives_an_error_row_naming_the_line(tmp_path: Path) -> None:
    bad = malformed_copy(tmp_path)
    rows = run_task(TaskSpec(str(bad), "compact", (4_000, 20_000)))
    assert len(rows) == 1
    assert rows[0]["error_kind"] == "FormatError" and f"{bad}:3" in rows[0]["error"]
    assert rows[0]["content_hash"] == content_hash(bad)  # so --resume recognises it


def test_a_damaged_line_is_counted_in_the_row_and_strict_makes_it_the_error(tmp_path: Path) -> None:
    damaged = damaged_copy(tmp_path)
    rows = run_task(TaskSpec(str(damaged), "inspect"))
    assert rows[0]["error"] is None and rows[0]["damaged_lines"] == 1
    strict = run_task(TaskSpec(str(damaged), "inspect", strict=True))
    assert strict[0]["error_kind"] == "StrictError" and f"{damaged}:3: broken JSON" in strict[0]["error"]


def test_a_malformed_file_in_a_folder_is_run_and_a_data_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "cut.json").write_text('[{"role": "user", "content": "fix it"}, {"role": "assis', encoding="utf-8")
    (tmp_path / "manifest.json").write_text('[{"file": "a.md", "turns": 3}]', encoding="utf-8")
    shutil.copy(SMALL, tmp_path / "first-line-damaged.jsonl")
    text = (tmp_path / "first-line-damaged.jsonl").read_text(encoding="utf-8")
    (tmp_path / "first-line-damaged.jsonl").write_text("{oops\n" + text, encoding="utf-8")
    found = discover([str(tmp_path)])
    assert sorted(Path(p).name for p in found.transcripts) == ["cut.json", "first-line-damaged.jsonl"]
    assert [Path(p).name for p, _ in found.skipped] == ["manifest.json"]
    rows = {Path(r["path"]).name: r for spec in found.transcripts for r in run_task(TaskSpec(spec, "inspect"))}
    assert "invalid JSON" in rows["cut.json"]["error"]
    assert rows["first-line-damaged.jsonl"]["error"] is None and rows["first-line-damaged.jsonl"]["damaged_lines"] == 1


def test_a_file_over_the_size_limit_is_an_error_row_without_parsing(tmp_path: Path) -> None:
    rows = run_task(TaskSpec(str(SMALL), "inspect", max_bytes=1_000))
    assert "over the 1,000-byte limit" in rows[0]["error"] and rows[0]["format"] is None
    missing = run_task(TaskSpec(str(tmp_path / "gone.jsonl"), "inspect"))
    assert missing[0]["error_kind"] == "FileNotFoundError"


@needs_shared(PROBES)
def test_probe_files_are_matched_by_their_transcript_path_or_by_name(tmp_path: Path) -> None:
    index = _probe_index(str(PROBES))
    for probe_file in PROBES.glob("*.json"):
        named = json.loads(probe_file.read_text())["transcript"]
        assert index.find(str(TRANSCRIPTS / named)) == str(probe_file.resolve())
    assert index.find(str(TRANSCRIPTS / "claude-code" / "short.jsonl")) is None
    (tmp_path / "short.probes.json").write_text('{"probes": []}')
    assert _probe_index(str(tmp_path)).find("/x/short.jsonl") == str((tmp_path / "short.probes.json").resolve())
    rows = run_task(TaskSpec(str(SMALL), "probe", (4_000,), probes=None))
    assert rows[0]["probe_source"] is None and rows[0]["error"] is None and "no probe file" in rows[0]["note"]


# --- results, resume, summary ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_parts_combine_into_one_table_and_a_later_row_replaces_an_earlier_one(tmp_path: Path, fmt: str) -> None:
    store = ResultStore(tmp_path / "out", fmt)
    first = run_serial([TaskSpec(str(SMALL), "compact", (4_000,))])
    lost = [{"path": "/x.jsonl", "content_hash": "h", "task": "compact", "target": None, "error": "died",
             "error_kind": "WorkerLost"}]
    store.write_part(first)
    store.write_part(lost)
    assert store.done_keys() == {(str(SMALL), content_hash(SMALL))}  # a lost worker is retried
    retried = [{"path": "/x.jsonl", "content_hash": "h", "task": "compact", "target": 4_000, "error": None}]
    store.write_part(retried)
    rows = store.combine()
    assert not store.part_paths() and store.table_path.exists()
    assert comparable(load(tmp_path / "out")[1]) == comparable(first + retried)
    assert len(rows) == 2


def test_serial_batch_resume_skips_done_transcripts_and_refuses_other_options(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    options = BatchOptions([str(corpus)], "compact", out, targets=(4_000,), workers=0)
    first = run_batch(options)
    assert first.stats.done == 3 and len(first.rows) == 3
    assert (out / "manifest.txt").read_text().count("\n") == 3
    with pytest.raises(BatchError, match="--resume"):
        plan(options)
    shutil.copy(SMALL, corpus / "three.jsonl")
    options.resume = True
    again = plan(options)
    assert again.skipped_done == 3 and [Path(s.path).name for s in again.specs] == ["three.jsonl"]
    with pytest.raises(ResultsError, match="targets"):
        plan(BatchOptions([str(corpus)], "compact", out, targets=(8_000,), workers=0, resume=True))
    run = json.loads((out / "run.json").read_text())
    assert run["options"]["task"] == "compact" and run["runs"][0]["done"] == 3


def test_summary_groups_by_format_and_target_and_counts_failures(tmp_path: Path) -> None:
    rows = run_serial([TaskSpec(str(SMALL), "probe", (4_000, 20_000)),
                       TaskSpec(str(malformed_copy(tmp_path)), "probe", (4_000, 20_000))])
    summary = summarize(rows)
    by_target = {line["target"]: line for line in summary if line["format"] == "claude-code"}
    assert set(by_target) == {4_000, 20_000}
    assert by_target[4_000]["retention"]["worksurface"] == rows[0]["retention_worksurface"]
    failed = [line for line in summary if line["failed"]]
    assert failed and failed[0]["format"] == "(unrecognised)"


def test_page_renders_summary_and_failures_escaped(tmp_path: Path) -> None:
    rows = run_serial([TaskSpec(str(SMALL), "probe", (4_000,)),
                       TaskSpec(str(malformed_copy(tmp_path)), "probe", (4_000,))])
    rows[1]["error"] = "<script>alert(1)</script>"
    html = render_batch_page({"rows": rows, "summary": summarize(rows), "run": {"options": {"task": "probe"}}})
    assert html.startswith("<!DOCTYPE html>") and "worksurface" in html and "broken.jsonl" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert f"{rows[0]['retention_worksurface']:.0%}" in html


# --- the command, serially --------------------------------------------------------------------------------

def test_cli_serial_batch_writes_the_table_and_prints_the_summary(corpus: Path, tmp_path: Path) -> None:
    bad = malformed_copy(corpus)
    out = tmp_path / "res"
    result = CliRunner().invoke(app, ["batch", str(corpus), str(bad), "--task", "inspect", "--workers", "0",
                                      "-o", str(out), "--results-format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert "claude-code" in result.output and "broken.jsonl" in result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and sum(1 for r in rows if r["error"]) == 1
    again = CliRunner().invoke(app, ["batch", str(corpus), "--task", "inspect", "--workers", "0", "-o", str(out),
                                     "--results-format", "jsonl"])
    assert again.exit_code == 2 and "--resume" in again.output
    bad_targets = CliRunner().invoke(app, ["batch", str(corpus), "--task", "compact", "--targets", "4k",
                                           "-o", str(tmp_path / "x")])
    assert bad_targets.exit_code == 2 and "--targets" in bad_targets.output


def test_report_batch_renders_a_results_folder(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "res"
    run_batch(BatchOptions([str(corpus)], "compact", out, targets=(4_000, 20_000), workers=0))
    result = CliRunner().invoke(app, ["report", "--batch", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "worksurface batch: compact" in page and "<svg" in page and "one.jsonl" in page
    missing = CliRunner().invoke(app, ["report", "--batch", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no batch results" in missing.output
