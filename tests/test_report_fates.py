"""Fates of messages in the view (worksurface.report.fates): from hand-made edits, and from a real
session's compaction checked against the boundary's covered ids."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from builders import Convo, words
from worksurface import Session
from worksurface.core.edits import Compact, Insert, ReplaceMessages, ReplaceResult, apply_edits
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Origin, Text
from worksurface.report.fates import Fate, clip, compute_cells
from worksurface.core.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]


def _convo() -> tuple[Convo, list[str]]:
    c = Convo()
    c.system("you are a coding agent")
    c.user("fix the bug in app.py")
    calls = [c.tool("Read", {"file_path": f"src/f{i}.py"}, words(200, seed=i)) for i in range(5)]
    c.say("done")
    return c, calls


def _cells(messages: list[Message], edits: list, **kw):
    view = apply_edits(messages, edits)
    return compute_cells(messages, edits, view, TokenCounter(), **kw), view


def _by_id(cells):
    return {c.id: c for c in cells}


def test_untouched_transcript_is_all_kept_one_cell_per_message_in_order():
    c, _ = _convo()
    cells, _ = _cells(c.messages, [])
    assert [x.id for x in cells] == [m.id for m in c.messages]
    assert {x.fate for x in cells} == {Fate.KEPT}
    assert all(x.source == "transcript" and x.tokens > 0 and x.tokens == x.tokens_after for x in cells)
    tools = [x.tool for x in cells]
    assert tools[2] == "Read" and tools[3] == "Read"  # the call and its result both name the tool


def test_replaced_results_take_the_fate_of_their_stage_with_artifact_and_reason():
    c, calls = _convo()
    edits = [ReplaceResult("budget", calls[0], "[result too large: stored as artifact a1]", artifact="a1"),
             ReplaceResult("snip", calls[1], "[snipped: identical to the later output of call x; 9 tokens freed]"),
             ReplaceResult("microcompact", calls[2], "[Old tool result content cleared: Read f2, artifact a3]",
                           artifact="a3")]
    cells, _ = _cells(c.messages, edits)
    results = [x for x in cells if x.tool == "Read" and x.role == "user"]
    assert [x.fate for x in results] == [Fate.BUDGETED, Fate.SNIPPED, Fate.CLEARED, Fate.KEPT, Fate.KEPT]
    budgeted, snipped, cleared = results[:3]
    assert budgeted.artifact == "a1" and budgeted.fetch == "session.artifact('a1')"
    assert cleared.artifact == "a3" and cleared.stage == "microcompact"
    assert cleared.reason.startswith("[Old tool result content cleared")
    assert snipped.artifact is None and snipped.fetch == f"session.original({snipped.id!r})"
    assert "artifact a3" in cleared.after and cleared.tokens_after < cleared.tokens
    # The call messages themselves are untouched.
    assert all(x.fate is Fate.KEPT for x in cells if x.role == "assistant")


def test_collapse_span_is_collapsed_and_its_digest_is_a_surface_cell_before_the_next_message():
    c, _ = _convo()
    span = tuple(m.id for m in c.messages[2:6])
    digest = Message("collapse-x", "user", (Text('<collapsed id="x" steps="2">...</collapsed>'),), Origin.COLLAPSE,
                     {"stage": "collapse"})
    cells, view = _cells(c.messages, [ReplaceMessages("collapse", span, (digest,), tokens_freed=100)])
    ids = [x.id for x in cells]
    assert ids.index("collapse-x") == ids.index(c.messages[6].id) - 1  # placed where the view puts it
    by = _by_id(cells)
    assert all(by[i].fate is Fate.COLLAPSED and by[i].after.startswith("<collapsed") for i in span)
    assert by["collapse-x"].fate is Fate.MARKER and by["collapse-x"].source == "surface"
    assert Counter(x.source for x in cells) == {"transcript": len(c.messages), "surface": 1}


def test_compaction_summarizes_the_head_and_adds_boundary_summary_and_reinjections():
    c, calls = _convo()
    head = c.messages[1:8]
    tail_start = c.messages[8].id
    boundary = Message("boundary-2", "system", (Text("[Conversation compacted]"),), Origin.BOUNDARY,
                       {"stage": "autocompact"})
    summary = Message("summary-2", "user", (Text("summary text"),), Origin.SUMMARY, {"stage": "autocompact"})
    reinj = Message("reinject-files-0", "user", (Text("<file>..</file>"),), Origin.REINJECTION, {"reinjector": "files"})
    edits = [ReplaceResult("microcompact", calls[0], "[cleared]", artifact="a0"),
             Compact("autocompact", tail_start, (boundary, summary), tuple(m.id for m in head),
                     {"trigger": "auto", "epoch": 2, "pre_tokens": 900, "post_tokens": 300,
                      "summarizer": "structured"}),
             Insert("reinject", c.messages[-1].id, (reinj,))]
    cells, view = _cells(c.messages, edits)
    by = _by_id(cells)
    for m in head:
        assert by[m.id].fate is Fate.SUMMARIZED
        assert "epoch 2" in by[m.id].reason and by[m.id].after == "(in the summary summary-2)"
    first_result = next(m for m in head if m.tool_results and m.tool_results[0].call_id == calls[0])
    assert by[first_result.id].history == ("microcompact", "autocompact")
    ids = [x.id for x in cells]
    assert ids.index("summary-2") == ids.index(tail_start) - 1 and ids.index("boundary-2") == ids.index(tail_start) - 2
    assert ids[-1] == "reinject-files-0" and by["reinject-files-0"].fate is Fate.REINJECTED
    assert by["reinject-files-0"].stage == "reinject:files"
    assert by["summary-2"].fate is by["boundary-2"].fate is Fate.SUMMARY
    assert by[c.messages[0].id].fate is Fate.KEPT  # the system prompt stays
    # Every message of the view is a cell, and nothing else besides the transcript.
    assert {x.id for x in cells} == {m.id for m in c.messages} | {m.id for m in view}


def test_a_collapsed_span_whose_digest_was_later_summarized_is_summarized():
    c, _ = _convo()
    span = tuple(m.id for m in c.messages[2:6])
    digest = Message("collapse-x", "user", (Text("<collapsed/>"),), Origin.COLLAPSE)
    summary = Message("summary-2", "user", (Text("s"),), Origin.SUMMARY)
    edits = [ReplaceMessages("collapse", span, (digest,)),
             Compact("autocompact", c.messages[10].id, (summary,), tuple(m.id for m in c.messages[1:10]
                                                                          if m.id not in span))]
    cells, _ = _cells(c.messages, edits)
    by = _by_id(cells)
    assert all(by[i].fate is Fate.SUMMARIZED and by[i].history == ("collapse", "autocompact") for i in span)
    assert "collapse-x" not in by


def test_messages_before_the_harness_boundary_are_dropped_and_status_messages_are_status():
    c, _ = _convo()
    marker = Message("cc-boundary", "system", (Text("compacted"),), meta={"compact_boundary": True})
    status = Message("status-1-1", "user", (Text("<agent-status/>"),), Origin.STATUS, {"epoch": 1, "seq": 1})
    messages = c.messages[:3] + [marker] + c.messages[3:] + [status]
    from worksurface.core.view import live_slice
    live = live_slice(messages)
    view = apply_edits(live, [])
    cells = compute_cells(messages, [], view, TokenCounter())
    fates = Counter(x.fate for x in cells)
    assert fates[Fate.DROPPED] == 3 and fates[Fate.STATUS] == 1
    assert [x.fate for x in cells[:3]] == [Fate.DROPPED] * 3 and cells[3].fate is Fate.KEPT


def test_texts_are_clipped_to_the_limit_with_what_was_left_out():
    c = Convo()
    c.user("x" * 5000)
    cells, _ = _cells(c.messages, [], text_chars=100)
    assert len(cells[0].before) < 140 and "[4900 chars]" in cells[0].before
    assert clip("short", 100) == "short"


def test_real_compaction_fates_agree_with_the_boundary_covered_ids():
    transcript = read_transcript(ROOT / "fixtures" / "small.jsonl")
    with Session.open(None) as session:
        prepared = session.compact(transcript)
        cells = compute_cells(transcript.messages, session.edits, prepared.messages, session.counter)
    covered = set(prepared.report.boundary["covered_ids"])
    summarized = {x.id for x in cells if x.fate is Fate.SUMMARIZED}
    assert covered and summarized == covered
    transcript_cells = [x for x in cells if x.source == "transcript"]
    assert [x.id for x in transcript_cells] == [m.id for m in transcript.messages]
    view_ids = {m.id for m in prepared.messages}
    assert {x.id for x in cells if x.source == "surface"} == view_ids - {m.id for m in transcript.messages}
    # Every transcript message in the view is kept or has a replaced result; the rest are summarized.
    for x in transcript_cells:
        assert (x.id in view_ids) == (x.fate in (Fate.KEPT, Fate.BUDGETED, Fate.SNIPPED, Fate.CLEARED, Fate.STATUS))
