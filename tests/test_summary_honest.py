"""An honest summary (issue 31, item 5): what a tight budget left out is counted and can be fetched,
never shown as "none"; an already compacted file with nothing new is written back as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import Convo, words
from worksurface.cli import app
from worksurface.core.tokens import TokenCounter
from worksurface.formats import Transcript, write_transcript
from worksurface.summarizers import StructuredSummarizer, SummaryRequest
from worksurface.summarizers.packing import Item, Section, pack
from worksurface.summarizers.sections import FILES

COUNTER = TokenCounter()


def _edits(files: int) -> Convo:
    c = Convo()
    c.user("Rename the config loader across the code base.")
    for n in range(files):
        c.tool("Edit", {"file_path": f"/repo/src/module_{n}.py", "old_string": "load_cfg", "new_string": "load_config"},
               "The file has been updated.")
        c.say(f"module {n} done: {words(30, seed=n)}")
    return c


def test_a_section_cut_for_room_counts_what_it_left_out_and_names_where_the_rest_is() -> None:
    kept: list[str] = []

    def keep_full(text: str) -> str:
        kept.append(text)
        return "artifact 0123456789abcdef"

    request = SummaryRequest(messages=_edits(16).messages, budget_tokens=400, keep_full=keep_full)
    summary = StructuredSummarizer().summarize(request, COUNTER)
    files = summary.text.split(f"## {FILES}", 1)[1].split("\n## ", 1)[0]
    shown = files.count("module_")
    assert shown < 16
    assert f"- {16 - shown} of 16 items left out for room ({shown} shown)" in files
    assert "- none" not in files
    assert summary.text.rstrip().endswith("the whole summary is artifact 0123456789abcdef.")
    assert summary.tokens <= 400
    # What is kept is the whole summary: every file the budget left out is in it.
    assert len(kept) == 1 and all(f"module_{n}.py" in kept[0] for n in range(16))


def test_a_summary_with_room_for_everything_says_nothing_was_left_out() -> None:
    request = SummaryRequest(messages=_edits(3).messages, budget_tokens=4_000,
                             keep_full=lambda text: pytest.fail("nothing was left out"))
    text = StructuredSummarizer().summarize(request, COUNTER).text
    assert "left out for room" not in text and all(f"module_{n}.py" in text for n in range(3))


def test_a_section_with_no_candidate_says_none_and_one_with_candidates_never_does() -> None:
    empty = Section("Errors", [], 0.1, 1, note_left_out=True)
    full = Section("Files", [Item(f"- file {n} " + words(40, seed=n), (n,), (n,)) for n in range(10)], 0.1, 2,
                   note_left_out=True)
    text = pack([empty, full], 60, COUNTER)
    assert "## Errors\n- none" in text
    assert "## Files\n- none" not in text and "items left out for room" in text


def test_compacting_an_already_compacted_file_with_nothing_new_leaves_it_as_it_is(tmp_path: Path) -> None:
    c = Convo().system("You are a coding agent.").user("Port the service to async. Don't touch vendor/.")
    for i in range(40):
        c.tool("Read", {"file_path": f"/repo/mod{i % 5}.py"}, words(1500, seed=i))
        c.tool("Edit", {"file_path": f"/repo/mod{i % 5}.py", "old_string": "a", "new_string": "b"}, "ok")
        c.say(f"step {i} done")
    source, once, twice = tmp_path / "s.json", tmp_path / "once.json", tmp_path / "twice.json"
    write_transcript(Transcript(c.messages, "anthropic", None), source)
    runner = CliRunner()
    first = runner.invoke(app, ["compact", str(source), "-o", str(once), "--force", "--window", "50000", "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["boundary"] is not None
    second = runner.invoke(app, ["compact", str(once), "-o", str(twice), "--force", "--window", "50000", "--json"])
    assert second.exit_code == 0, second.output
    assert twice.read_bytes() == once.read_bytes()
    report = json.loads(second.stdout)
    assert report["boundary"] is None
    assert any("nothing new to compact" in n for n in report["notices"])
    autocompact = next(s for s in report["stages"] if s["name"] == "autocompact")
    assert autocompact["skipped"] == "nothing new to compact since the last compaction"
