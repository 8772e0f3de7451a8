"""Large inputs (issue 28): `inspect` reads a session file line by line with the same report as the
whole-file reader, keeping huge texts as samples; fact extractors read a bounded head and tail of a
huge tool output, while the output is still budgeted at its whole size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worksurface import Config, Session
from worksurface.core import fileio
from worksurface.core.config import IngestConfig
from worksurface.engine.reduce_output import REDUCE_HEAD_CHARS, REDUCE_TAIL_CHARS, reduce_output
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.facts import commits, tool_calls
from worksurface.facts.calls import SCAN_HEAD_CHARS, SCAN_TAIL_CHARS
from worksurface.formats import read_transcript, stream_transcript
from worksurface.offline.inspect import (MAX_EXACT_CHARS, SAMPLE_CHARS, BoundedCounter, inspect_file,
                                         inspect_transcript, keep_sampled)

from notices import worksurface_notices

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def whole_file_report(path: Path) -> dict[str, object]:
    """What `inspect` reported before it streamed: the whole text read, then counted."""
    return inspect_transcript(read_transcript(path), BoundedCounter())


def log_lines(chars: int, start: int = 0) -> str:
    """Distinct log lines, about `chars` characters."""
    return "".join(f"2026-01-01T00:00:00Z INFO worker-{i % 7} processed batch {i} ok\n"
                   for i in range(start, start + chars // 52))


def huge_result_session(path: Path, output: str) -> Path:
    """A Claude Code session whose one Bash result is `output`."""
    base = {"sessionId": "s", "cwd": "/repo", "version": "2.1.39"}
    records = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None,
         "message": {"role": "user", "content": "run the job"}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {
            "id": "msg_1", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "./job.sh"}}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "a1", "toolUseResult": {"stdout": output},
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "u2", "message": {
            "id": "msg_2", "role": "assistant", "content": [{"type": "text", "text": "It finished."}]}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["long.jsonl", "codex/session.jsonl", "codex/compacted.jsonl"])
def test_streamed_inspect_reports_what_the_whole_file_reader_reports(name: str) -> None:
    path = FIXTURES / name
    assert inspect_file(path) == whole_file_report(path)


def test_streamed_inspect_of_a_damaged_file_counts_the_same_and_names_file_and_line(tmp_path: Path) -> None:
    lines = (FIXTURES / "small.jsonl").read_text(encoding="utf-8").splitlines()
    lines[5] = lines[5][: len(lines[5]) // 2]          # broken in the middle of the file
    path = tmp_path / "damaged.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40], encoding="utf-8")  # and a cut last line
    with worksurface_notices() as caught:
        streamed = inspect_file(path)
    notices = [n for n in caught if "skipped" in n]
    assert len(notices) == 1 and str(path) in notices[0] and "line 6:" in notices[0]
    # line 7 answers the call line 6 held: read around too, in the same single pass
    assert [d["line"] for d in streamed["damaged_lines"]] == [6, 7, len(lines)]
    assert "line 6" in streamed["damaged_lines"][1]["problem"] and streamed["damaged_lines"][2]["cut"] is True
    assert streamed == whole_file_report(path)


def test_a_file_of_lines_far_larger_than_the_read_chunk_streams_with_huge_texts_kept_as_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = "first line: job 7 started\n" + log_lines(3 * MAX_EXACT_CHARS) + "last line: done\n"
    path = huge_result_session(tmp_path / "huge.jsonl", output)
    monkeypatch.setattr(fileio, "LINE_CHUNK_BYTES", 4096)  # the 3 MB line arrives in 700+ chunks
    kept = stream_transcript(path, keep=keep_sampled)
    result = next(r for m in kept.messages for r in m.tool_results)
    assert len(result.content) == SAMPLE_CHARS and result.content.startswith("first line: job 7")
    assert result.content.endswith("last line: done\n")
    raw = kept.messages[2].meta["raw"]
    assert len(raw["toolUseResult"]["stdout"]) == SAMPLE_CHARS  # the source record holds no copy either
    report = inspect_file(path)
    assert report == whole_file_report(path) and report["estimated_texts"] == 1
    assert report["largest_results"][0]["tokens"] > 100_000


def _job(output: str) -> list[Message]:
    return [Message("u1", "user", (Text("run the job and commit"),)),
            Message("a1", "assistant", (ToolCall("t1", "Bash", {"command": "./job.sh && git commit -am wip"}),)),
            Message("u2", "user", (ToolResult("t1", output),))]


def test_extractors_read_a_huge_outputs_head_and_tail_and_not_its_middle() -> None:
    filler = log_lines(SCAN_HEAD_CHARS + SCAN_TAIL_CHARS)
    output = ("[main 1111111] head commit\n" + filler + "[main 2222222] middle commit\n" + filler
              + "[main 3333333] tail commit\n")
    found = {c.hash for c in commits(_job(output))}
    assert found == {"1111111", "3333333"}  # the middle is beyond SCAN_HEAD_CHARS and SCAN_TAIL_CHARS
    record = tool_calls(_job(output))[0]
    assert len(record.output) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS and record.full_output == output
    normal = "[main 1111111] head commit\n" + log_lines(100_000) + "[main 2222222] middle commit\n"
    assert {c.hash for c in commits(_job(normal))} == {"1111111", "2222222"}  # an output within the bound: all


def test_a_huge_output_read_in_part_by_the_extractors_is_still_budgeted_at_its_whole_size() -> None:
    output = "[main 1111111] head commit\n" + log_lines(2 * (SCAN_HEAD_CHARS + SCAN_TAIL_CHARS)) + "done\n"
    counter = BoundedCounter()
    whole = counter.text(output)
    with Session.open(None, config=Config()) as session:
        prepared = session.prepare(_job(output))
        shown = next(r.content for m in prepared.messages for r in m.tool_results)
        acted = [s for s in prepared.report.stages if s.items]
        assert acted and len(shown) < 100_000 and "done" in shown
        saved = acted[0].tokens_before - acted[0].tokens_after
        assert saved > 0.95 * whole  # its whole size, not the bounded part the extractors read
        assert session.artifact(next(e.artifact for e in session.edits if getattr(e, "artifact", None))) == output


def test_a_huge_output_is_reduced_on_arrival_from_its_ends_with_a_note_of_the_middle_it_did_not_read() -> None:
    filler = log_lines(REDUCE_HEAD_CHARS + REDUCE_TAIL_CHARS)
    output = "error: at the head\n" + filler + "error: in the middle\n" + filler + "error: at the tail\n"
    reduced = reduce_output(output, IngestConfig())
    assert reduced.lossy and reduced.kinds[0] == "ends" and len(reduced.text) < 100_000
    assert "error: at the head" in reduced.text and "error: at the tail" in reduced.text
    assert "error: in the middle" not in reduced.text and "of the output not read on arrival" in reduced.text
    small = "error: at the head\n" + log_lines(50_000) + "error: in the middle\n" + log_lines(50_000)
    assert "error: in the middle" in reduce_output(small, IngestConfig()).text  # within the bound: all read
