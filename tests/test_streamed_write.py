"""A transcript file is written as its lines are made (`write_transcript`, `atomic_write_chunks`): the
bytes are those of the whole text written at once, in every format and across batch boundaries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import TRANSCRIPTS, needs_shared
from worksurface import Session
from worksurface.core import fileio
from worksurface.core.fileio import atomic_write, atomic_write_chunks
from worksurface.formats import dumps, read_transcript, write_transcript

FIELD_CODEX = TRANSCRIPTS / "field" / "EntityProcess-agentv" / "00" / "34f597b72d" / "1" / "full.jsonl"
CLAUDE_CODE = TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl"

# Text as transcripts hold it: astral characters (the joined text is widened to 4 bytes per character),
# lone surrogates from a cut emoji (written as escapes), line breaks a JSON string may carry.
_chunk = st.text(alphabet=st.sampled_from(["a", "é", "€", "😀", "\ud83d", "\n", "\u2028", "{", '"']), max_size=12)


@settings(max_examples=80, deadline=None)
@given(chunks=st.lists(_chunk, max_size=30), batch=st.integers(1, 16))
def test_chunks_are_written_as_the_joined_text_would_be(tmp_path_factory, chunks, batch):
    folder = tmp_path_factory.mktemp("write")
    whole, streamed = folder / "whole.jsonl", folder / "streamed.jsonl"
    atomic_write(whole, "".join(chunks))
    old = fileio.WRITE_BATCH_CHARS
    fileio.WRITE_BATCH_CHARS = batch  # batches end inside the text, not only at its end
    try:
        atomic_write_chunks(streamed, iter(chunks))
    finally:
        fileio.WRITE_BATCH_CHARS = old
    assert streamed.read_bytes() == whole.read_bytes()


def test_a_chunk_that_fails_leaves_no_file_and_the_old_one_unchanged(tmp_path: Path):
    out = tmp_path / "out.jsonl"
    out.write_text("before\n")

    def chunks():
        yield "a line\n" * 1000
        raise ValueError("the writer failed half way")

    old = fileio.WRITE_BATCH_CHARS
    fileio.WRITE_BATCH_CHARS = 10  # the first batch is written before the failure
    try:
        with pytest.raises(ValueError, match="half way"):
            atomic_write_chunks(out, chunks())
    finally:
        fileio.WRITE_BATCH_CHARS = old
    assert out.read_text() == "before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left beside it


@pytest.mark.parametrize("path", [
    pytest.param(CLAUDE_CODE, marks=needs_shared(CLAUDE_CODE), id="claude-code"),
    pytest.param(FIELD_CODEX, marks=needs_shared(FIELD_CODEX), id="codex"),
])
def test_a_compacted_view_written_to_a_file_is_the_text_dumps_gives(tmp_path: Path, path: Path):
    transcript = read_transcript(path)
    with Session.open(None) as session:
        view = session.prepare(transcript.messages, force=True).messages
    out = tmp_path / "out.jsonl"
    write_transcript(transcript, out, view)
    # The records a compaction makes are stamped with the time they are written.
    assert _unstamped(out.read_text(encoding="utf-8")) == _unstamped(dumps(transcript, view))
    assert read_transcript(out).messages[-1].text == view[-1].text  # it reads back, ending as the view ends


def _unstamped(text: str) -> str:
    return re.sub(r'"timestamp": ?"[^"]*"', '"timestamp": ""', text)
