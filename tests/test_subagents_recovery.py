"""Recovery rebuilds a legal state (seed 003): orphan thinking and empty assistant text leave the view,
the report says so once, and what a provider accepts is kept."""

from __future__ import annotations

from builders import Convo
from worksurface import Session
from worksurface.core.model import Message, Text, Thinking, ToolCall, ToolResult
from worksurface.core.view import clean_recovered


def _a(mid: str, *blocks: object, api: str | None = None) -> Message:
    return Message(mid, "assistant", tuple(blocks), meta={"api_message_id": api} if api else {})  # type: ignore[arg-type]


def test_thinking_only_response_at_the_end_is_removed_and_reported() -> None:
    c = Convo().user("Rename the helper in utils.py")
    c.tool("Read", {"file_path": "utils.py"}, "def helper(): pass")
    crashed = c.messages + [_a("t1", Thinking("I should rename helper to assist", signature="sig"))]
    with Session.open(None) as session:
        prepared = session.prepare(crashed)
        assert [m.id for m in prepared.messages if not m.is_worksurface] == [m.id for m in c.messages]
        assert any("recovery" in n and "t1" in n and "orphan thinking" in n for n in prepared.report.notices)
        c.user("go on")
        again = session.prepare(c.messages[:3] + [crashed[-1]] + c.messages[3:])
        assert "t1" not in {m.id for m in again.messages}
        assert not any("t1" in n for n in again.report.notices)  # said once, not on every call


def test_whitespace_text_goes_and_the_call_stays() -> None:
    call = ToolCall("c1", "Bash", {"command": "ls"})
    messages = [Message("u", "user", (Text("list files"),)), _a("a1", Text("  \n"), call),
                Message("r", "user", (ToolResult("c1", "a.py"),)), _a("a2", Text("\t")),
                Message("u2", "user", (Text("thanks"),))]
    out = clean_recovered(messages)
    assert [m.id for m in out.messages] == ["u", "a1", "r", "u2"]
    assert out.messages[1].blocks == (call,)
    assert dict(out.removed) == {"a1": "empty text", "a2": "empty text"}
    assert out.gone == {"a2"}  # a1 keeps its call: repaired, not removed whole


def test_thinking_before_content_of_the_same_response_is_kept() -> None:
    # Claude Code writes one record per block of a response; they share the API message id.
    messages = [Message("u", "user", (Text("hi"),)), _a("a1", Thinking("plan", "sig"), api="msg_1"),
                _a("a2", Text("Hello"), api="msg_1"), _a("a3", Text("Done."), Thinking("after", "s"))]
    out = clean_recovered(messages)
    assert [m.id for m in out.messages] == ["u", "a1", "a2", "a3"]
    assert out.messages[1].blocks == (Thinking("plan", "sig"),)
    assert out.messages[3].blocks == (Text("Done."),)  # trailing thinking of a response: no content after it
    assert out.removed == (("a3", "orphan thinking"),)


def test_a_legal_transcript_is_unchanged() -> None:
    c = Convo().user("hello")
    c.say("Hi, what should I do?")
    out = clean_recovered(c.messages)
    assert out.messages == c.messages and out.removed == () and out.notes() == []
