"""A huge tool result is counted from bounded samples and previewed from its ends, never encoded
whole; a normal one is counted exactly."""

from __future__ import annotations

from worksurface import Config, Session
from worksurface.core.model import Message, Text, ToolCall, ToolResult
from worksurface.core.tokens import EXACT_COUNT_MAX_CHARS, TokenCounter, get_encoding

LINE = "2026-01-01T00:00:00Z INFO worker-3 processed batch 12345 in 0.042s ok\n"


def _log(chars: int) -> str:
    """Distinct log lines (repeated ones would be collapsed on arrival, before any budget)."""
    return "".join(f"2026-01-01T00:00:00Z INFO worker-{i % 7} processed batch {i} in 0.{i % 997:03d}s ok\n"
                   for i in range(chars // 60))


def test_a_huge_text_is_estimated_close_to_its_exact_count_and_a_normal_one_is_exact() -> None:
    counter = TokenCounter()
    normal = LINE * 1000
    assert counter.text(normal) == len(get_encoding().encode_ordinary(normal))
    huge = "header: run 7\n" + LINE * (EXACT_COUNT_MAX_CHARS // len(LINE) + 10) + "FAILED: 3 errors\n"
    exact = len(get_encoding().encode_ordinary(huge))
    estimate = counter.text(huge)
    assert abs(estimate - exact) / exact < 0.02


def test_a_huge_result_is_reduced_on_arrival_to_its_ends_with_its_estimated_size() -> None:
    body = "first line of the job\n" + _log(EXACT_COUNT_MAX_CHARS + 100_000) + "last line: done\n"
    messages = [Message("u1", "user", (Text("run the job"),)),
                Message("a1", "assistant", (ToolCall("t1", "Bash", {"command": "./job.sh"}),)),
                Message("u2", "user", (ToolResult("t1", body),))]
    with Session.open(None, config=Config()) as session:
        prepared = session.prepare(messages)
        shown = next(r.content for m in prepared.messages for r in m.tool_results)
        assert "first line of the job" in shown and "last line: done" in shown and len(shown) < 50_000
        acted = [s for s in prepared.report.stages if s.items]
        artifact = next(e.artifact for e in session.edits if getattr(e, "artifact", None))
        assert session.artifact(artifact) == body  # the original is kept, whole
        assert acted and acted[0].tokens_before - acted[0].tokens_after > 900_000  # its estimated size


def test_a_huge_file_read_is_previewed_from_its_ends() -> None:
    body = "first line of the file\n" + _log(EXACT_COUNT_MAX_CHARS + 100_000) + "last line: done\n"
    messages = [Message("u1", "user", (Text("read the log"),)),
                Message("a1", "assistant", (ToolCall("t1", "Read", {"file_path": "/r/big.log"}),)),
                Message("u2", "user", (ToolResult("t1", body),))]
    with Session.open(None, config=Config()) as session:
        prepared = session.prepare(messages)
        shown = next(r.content for m in prepared.messages for r in m.tool_results)
        budget = next(s for s in prepared.report.stages if s.name == "budget")
        assert budget.items == 1 and shown.startswith("[Tool result too large")
        assert "first line of the file" in shown and "last line: done" in shown and len(shown) < 50_000
