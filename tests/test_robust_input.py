"""Malformed and hostile input (issue 12): every family is a FormatError naming the file and the line
or record, never a traceback, a hang, or text made up from the wrong JSON type."""

from __future__ import annotations

import copy
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worksurface.core import fileio
from worksurface.core.errors import FormatError, UnknownFormatError
from worksurface.core.fileio import atomic_write, read_text
from worksurface.formats import (aider, anthropic_messages, dumps, loads, mini_swe_agent, openai_chat, openhands,
                                 read_transcript, swe_agent)
from worksurface.formats.jsondoc import MAX_DEPTH
from worksurface.offline.inspect import MAX_EXACT_CHARS, BoundedCounter, inspect_transcript
from worksurface.core.model import Text
from worksurface.core.tokens import TokenCounter

PATH = "/tmp/in.json"
JSON_ADAPTERS = [openai_chat, anthropic_messages, swe_agent, openhands, mini_swe_agent]


def deep(n: int) -> str:
    return "[" * n + "]" * n


# ---- templates: one small valid document per JSON format ------------------------------------------------

def openhands_doc() -> list[dict[str, Any]]:
    return [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "hi", "image_urls": None}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "look"},
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "c1",
                                "model_response": {"id": "r1", "choices": [{"message": {
                                    "content": "listing", "tool_calls": [{"id": "c1", "function": {
                                        "name": "execute_bash", "arguments": "{\"command\": \"ls\"}"}}]}}]}}},
        {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "cause": 1,
         "extras": {"metadata": {"prefix": "", "suffix": "\n[exit 0]"}},
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "c1"}},
        {"id": 3, "source": "agent", "action": "system", "args": {"content": "sys"}},
    ]


def swe_doc() -> dict[str, Any]:
    return {"history": [
        {"role": "system", "content": "s", "agent": "main"},
        {"role": "user", "content": "u", "agent": "main"},
        {"role": "assistant", "content": "a", "agent": "main", "tool_calls": [
            {"id": "c", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "content": "out", "agent": "main", "tool_call_ids": ["c"]},
        {"role": "assistant", "content": "b", "agent": "main", "thought": "t", "action": "ls -la"},
        {"role": "user", "content": "listing", "agent": "main"}]}


def openai_doc() -> dict[str, Any]:
    return {"model": "gpt", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "out"}]}


def anthropic_doc() -> dict[str, Any]:
    return {"system": "s", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"},
                                          {"type": "tool_use", "id": "t", "name": "Read", "input": {"p": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "text", "text": "out"}, {"type": "image", "source": {"type": "base64",
                                                                          "media_type": "image/png", "data": "AA"}}]}]}]}


def mini_doc() -> dict[str, Any]:
    return {"trajectory_format": "mini-swe-agent-1", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "think\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>"}]}


TEMPLATES: dict[str, Callable[[], Any]] = {"openhands": openhands_doc, "swe-agent": swe_doc, "openai": openai_doc,
                                           "anthropic": anthropic_doc, "mini-swe-agent": mini_doc}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_templates_are_valid(name: str) -> None:
    assert loads(json.dumps(TEMPLATES[name]()), name, PATH).messages


# ---- deep nesting ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["auto", *(a.NAME for a in JSON_ADAPTERS)])
@pytest.mark.parametrize("depth", [10_000, MAX_DEPTH + 50])
def test_deep_nesting_is_a_format_error(fmt: str, depth: int) -> None:
    text = '{"messages": [{"role": "user", "content": "x", "extra": ' + deep(depth) + "}]}"
    with pytest.raises(FormatError, match="nested more than") as info:
        loads(text, fmt, PATH)
    assert info.value.path == PATH


def test_deep_nesting_in_a_jsonl_line_is_read_around_and_strict_refuses_it() -> None:
    line = json.dumps({"type": "user", "uuid": "u", "sessionId": "s", "message": {"role": "user", "content": "x"}})
    text = line + "\n" + '{"type": "user", "x": ' + deep(10_000) + "}\n"
    assert [m.id for m in loads(text, "auto", "x.jsonl").messages] == ["u"]
    with pytest.raises(FormatError, match="nested|JSON") as info:
        loads(text, "auto", "x.jsonl", strict=True)
    assert info.value.path == "x.jsonl" and info.value.line == 2


# ---- OpenHands, SWE-agent: wrong JSON types are named, not crashed on ----------------------------------

def _set(doc: Any, where: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    return doc


@pytest.mark.parametrize(("where", "value", "problem"), [
    ((1, "args"), [1, 2], "args must be an object"),
    ((2, "extras"), [1], "extras must be an object"),
    ((1, "tool_call_metadata", "model_response"), "resp", "model_response must be an object"),
    ((1, "tool_call_metadata", "model_response", "choices"), {"a": 1}, "choices must be a list"),
    ((1, "id"), [1], "id must be"),
    ((2, "cause"), [1], "cause must be"),
    ((0, "args", "image_urls"), 5, "image_urls must be a list"),
    ((0, "args"), ["hi"], "args must be an object"),
    ((3, "args"), "sys", "args must be an object"),
    ((2, "content"), 5, "content must be"),
    ((1, "tool_call_metadata", "function_name"), 5, "function_name must be a string"),
    ((0, "message"), 5, "message must be a string"),
    ((2, "extras", "metadata"), "m", "metadata must be an object"),
])
def test_openhands_wrong_types_name_the_event(where: tuple[Any, ...], value: Any, problem: str) -> None:
    with pytest.raises(FormatError, match=problem) as info:
        openhands.read(json.dumps(_set(openhands_doc(), where, value)), PATH)
    assert info.value.record == f"[{where[0]}]" and info.value.path == PATH


@pytest.mark.parametrize(("where", "value", "record", "problem"), [
    (("history", 2, "tool_calls"), 5, "history[2]", "tool_calls must be a list"),
    (("history", 3, "tool_call_ids"), 5, "history[3]", "tool_call_ids must be a list"),
    (("history", 3, "tool_call_ids"), [5], "history[3]", "tool_call_ids entry must be a string"),
    (("history", 1, "content"), {"a": 1}, "history[1]", "content must be"),
    (("history", 2, "tool_calls", 0, "function", "name"), 5, "history[2].tool_calls[0]", "name must be a string"),
    (("history", 4, "action"), ["ls"], "history[4]", "action must be a string"),
])
def test_swe_agent_wrong_types_name_the_entry(where: tuple[Any, ...], value: Any, record: str,
                                              problem: str) -> None:
    with pytest.raises(FormatError, match=problem) as info:
        swe_agent.read(json.dumps(_set(swe_doc(), where, value)), PATH)
    assert info.value.record == record


@pytest.mark.parametrize(("fmt", "doc", "record"), [
    ("mini-swe-agent", _set(mini_doc(), ("messages", 1, "content"), 5), "messages[1]"),
    ("openai", _set(openai_doc(), ("messages", 3, "content"), 5), "messages[3]"),
    ("openai", _set(openai_doc(), ("messages", 1, "id"), [1]), "messages[1]"),
])
def test_type_mismatches_are_rejected_not_turned_into_text(fmt: str, doc: Any, record: str) -> None:
    with pytest.raises(FormatError, match="must be") as info:
        loads(json.dumps(doc), fmt, PATH)
    assert info.value.record == record


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out += _paths(value, (*prefix, key))
    return out


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_anywhere_gives_a_transcript_or_a_format_error(name: str, data: st.DataObject) -> None:
    """Replace one field (or one list item) of a valid document with arbitrary JSON: the adapter
    either reads it or raises FormatError, and never anything else."""
    doc = TEMPLATES[name]()
    where = data.draw(st.sampled_from(_paths(doc)))
    mutated = _set(doc, where, data.draw(JSON_VALUES))
    text = json.dumps(mutated)
    try:
        transcript = loads(text, name, PATH)
    except FormatError as exc:
        assert exc.path == PATH
        return
    for m in transcript.messages:           # what was read is made of text, never str() of a dict
        for b in m.blocks:
            if isinstance(b, Text):
                assert isinstance(b.text, str)


@settings(max_examples=150, deadline=None)
@given(doc=JSON_VALUES)
def test_any_json_document_auto_detected_is_a_transcript_or_a_format_error(doc: Any) -> None:
    try:
        loads(json.dumps(doc), "auto", PATH)
    except FormatError as exc:
        assert exc.path == PATH


# ---- aider ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "# aider chat started at 2024-01-01 00:00:00\n\n> Added x\n\nhello there\n",
    "# aider chat started at 2024-01-01\n> /run ls\n> ok\n",
])
def test_aider_without_user_input_is_rejected(text: str) -> None:
    with pytest.raises(FormatError, match="no aider user input") as info:
        aider.read(text, "chat.md")
    assert info.value.path == "chat.md"


# ---- lone surrogates --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_lone_surrogate_is_written_as_valid_utf8_that_reads_back(tmp_path: Path, fmt: str) -> None:
    doc = [{"role": "user", "content": "cut emoji \ud83d here"}, {"role": "assistant", "content": "ok \udc00"}]
    if fmt == "anthropic":
        doc = {"system": "s", "messages": doc}      # type: ignore[assignment]
    transcript = loads(json.dumps(doc), fmt, "in.json")
    out = tmp_path / "out.json"
    atomic_write(out, dumps(transcript))
    out.read_bytes().decode("utf-8")                # strict: valid UTF-8
    again = read_transcript(out)
    assert [m.blocks for m in again.messages] == [m.blocks for m in transcript.messages]


# ---- special files ----------------------------------------------------------------------------------------

def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run `fn` in a thread; fail (instead of hanging the suite) if it does not return in time."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:            # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (hang)"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.mark.parametrize(("make", "kind"), [
    (lambda p: os.mkfifo(p), "FIFO"),
    (lambda p: p.symlink_to("/dev/zero"), "character device"),
    (lambda p: p.symlink_to("/dev/null"), "character device"),
    (lambda p: p.mkdir(), "directory"),
])
def test_fifos_devices_and_directories_are_refused_up_front(tmp_path: Path, make: Callable[[Path], Any],
                                                            kind: str) -> None:
    p = tmp_path / "in.json"
    make(p)
    with pytest.raises(FormatError, match=kind) as info:
        _within(5, lambda: read_text(p))
    assert info.value.path == str(p)


def test_a_file_swapped_for_a_fifo_after_the_check_is_refused(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: the path is a regular file when checked and a FIFO when opened."""
    p = tmp_path / "in.json"
    regular = tmp_path / "regular"
    regular.write_text("[]")
    os.mkfifo(p)
    real_stat = os.stat
    monkeypatch.setattr(fileio.os, "stat", lambda name, *a, **k: real_stat(regular) if str(name) == str(p)
                        else real_stat(name, *a, **k))
    with pytest.raises(FormatError, match="became a FIFO") as info:
        _within(5, lambda: read_text(p))
    assert info.value.path == str(p)


def test_not_utf8_names_line(tmp_path: Path) -> None:
    p = tmp_path / "in.json"
    p.write_bytes(b'[\n{"role": "user",\n "content": "\xff"}]')
    with pytest.raises(FormatError, match="not UTF-8") as info:
        read_text(p)
    assert info.value.line == 3


# ---- auto-detection reports the most specific error ------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "record", "problem"), [
    ('[\n{"role": "user", "content": "a"},\n{"role": "assistant", "content": "b"\n]', 4, None, "invalid JSON"),
    ('{"a": 1}\n{"b": 2\n', 2, None, "invalid JSON Lines record"),
    (json.dumps([{"role": "robot", "content": "a"}]), None, "messages[0]", "role 'robot'"),
    (json.dumps({"system": "s", "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}),
     None, "messages[0].content[0]", "tool_use_id"),
    (json.dumps({"history": [{"role": "narrator", "content": "x"}]}), None, "history[0]", "role"),
    (json.dumps([{"source": "user", "action": "message", "args": [1]}]), None, "[0]", "args must be"),
])
def test_detection_failure_reports_the_specific_error(text: str, line: int | None, record: str | None,
                                                      problem: str) -> None:
    with pytest.raises(FormatError, match=problem) as info:
        loads(text, "auto", PATH)
    assert not isinstance(info.value, UnknownFormatError) or "unrecognised" not in str(info.value)
    assert info.value.path == PATH and info.value.line == line and info.value.record == record


def test_a_broken_line_of_a_session_file_is_read_around_and_strict_refuses_it() -> None:
    text = (json.dumps({"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "a"}})
            + '\n{"type": "assistant", oops}\n')
    assert [m.id for m in loads(text, "auto", PATH).messages] == ["u1"]
    with pytest.raises(FormatError, match="broken JSON") as info:
        loads(text, "auto", PATH, strict=True)
    assert info.value.path == PATH and info.value.line == 2


def test_unrelated_json_and_empty_input_stay_unrecognised() -> None:
    with pytest.raises(UnknownFormatError, match="unrecognised"):
        loads('{"neither": "format"}', "auto", PATH)
    with pytest.raises(UnknownFormatError, match="empty"):
        loads("  \n", "auto", PATH)


# ---- huge records in inspect ---------------------------------------------------------------------------------

def test_inspect_estimates_huge_texts_from_a_sample() -> None:
    body = " ".join(f"word{i % 977} value{i % 13}" for i in range(MAX_EXACT_CHARS // 8))
    assert len(body) > MAX_EXACT_CHARS
    transcript = loads(json.dumps([{"role": "user", "content": body}]), "openai", PATH)
    bounded = BoundedCounter()
    report = inspect_transcript(transcript, bounded)
    exact = TokenCounter().text(body)
    assert report["estimated_texts"] == 1 and bounded.estimated == 1
    assert abs(report["by_role"]["user"]["tokens"] - exact) < 0.05 * exact
    small = inspect_transcript(loads(json.dumps([{"role": "user", "content": "hi"}]), "openai", PATH),
                               BoundedCounter())
    assert "estimated_texts" not in small


def test_fifo_check_uses_the_opened_descriptor(tmp_path: Path) -> None:
    """A regular file is read through one descriptor whose type is checked (no second open by name)."""
    p = tmp_path / "in.json"
    p.write_text("[]")
    assert stat.S_ISREG(os.stat(p).st_mode) and read_text(p) == "[]"
