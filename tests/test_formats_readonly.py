"""Read-only adapters (swe-agent, openhands, mini-swe-agent, aider) on the real shared transcripts,
and format detection for every transcript file there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worksurface.formats import ADAPTERS, detect_format, read_transcript
from worksurface.formats.validate import INTERRUPTED
from worksurface.core.model import ROLES, Origin, orphans
from shared import TRANSCRIPTS as _TRANSCRIPTS

TRANSCRIPTS = _TRANSCRIPTS
# Folder -> format name; each folder holds one harness's transcripts.
FOLDERS = {"swe-agent": "swe-agent", "openhands": "openhands", "mini-swe-agent": "mini-swe-agent",
           "aider": "aider", "claude-code": "claude-code"}
_NOT_TRANSCRIPTS = {"LICENSE", "SOURCE.txt", "README.md", "manifest.json"}


def _files(*folders: str) -> list[Path]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(p for f in folders for p in (TRANSCRIPTS / f).rglob("*")
                  if p.is_file() and p.name not in _NOT_TRANSCRIPTS)


def _id(p: Path) -> str:
    return str(p.relative_to(TRANSCRIPTS))[:70]


READ_ONLY = _files("swe-agent", "openhands", "mini-swe-agent", "aider")
ALL = _files(*FOLDERS)
pytestmark = pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="shared transcripts not available")


def _read(rel: str):
    return read_transcript(TRANSCRIPTS / rel)


@pytest.mark.parametrize("path", READ_ONLY, ids=_id)
def test_every_read_only_file_reads_sanely(path: Path) -> None:
    t = read_transcript(path)
    assert t.format == FOLDERS[path.relative_to(TRANSCRIPTS).parts[0]]
    ms = t.messages
    assert ms and all(m.role in ROLES and m.origin is Origin.CONVERSATION for m in ms)
    assert len({m.id for m in ms}) == len(ms)
    unanswered, orphan_results = orphans(ms)
    assert orphan_results == set()
    flagged = {c for m in ms for c in m.meta.get(INTERRUPTED, ())}
    assert flagged == unanswered
    assert len(unanswered) <= 1          # at most the final call (submit / finish) of a run
    assert any(m.role == "assistant" for m in ms) and any(m.role == "user" for m in ms)


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_detect_format_names_every_transcript_and_no_other_adapter_claims_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    expected = FOLDERS[path.relative_to(TRANSCRIPTS).parts[0]]
    assert detect_format(text, str(path)) == expected
    assert [n for n, a in ADAPTERS.items() if a.sniff(text, str(path))] == [expected]


def test_swe_agent_text_actions_become_named_calls_with_observations() -> None:
    t = _read("swe-agent/tests__gpt4__swe-agent__test-repo__default_from_url__t-0.00__p-0.95__c-3.00__"
              "install-1__swe-agent__test-repo-i1.traj")
    assert [m.role for m in t.messages[:3]] == ["system", "user", "user"]      # task after a demo
    assert t.messages[1].meta.get("is_demo") is True
    calls = [c for m in t.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert calls[3].input["command"].startswith("python")
    assert calls[0].id == "swe-3" and t.messages[4].tool_results[0].call_id == "swe-3"
    assert t.messages[-1].meta[INTERRUPTED] == ["swe-11"]
    assert t.meta["steps"] == 5 and "info" in t.meta


def test_swe_agent_native_calls_with_reused_ids_are_made_unique() -> None:
    t = _read("swe-agent/demos__replay__marshmallow-code__marshmallow-1867__function_calling__install-1__"
              "marshmallow-code__marshmallow-1867.traj")
    ids = [c.id for m in t.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 11
    assert "call_5iDdbOYybq7L19vqXmR0DPaU~2" in ids
    assert t.messages[8].tool_calls[0].input == {"command": "ls -F"}
    assert t.messages[9].tool_results[0].call_id == t.messages[8].tool_calls[0].id
    assert orphans(t.messages) == (set(), set())


def test_openhands_events_become_calls_results_and_extras() -> None:
    t = _read("openhands/basic_gui_mode.json")
    first = t.messages[1]
    assert first.tool_calls[0].name == "execute_bash"
    assert first.tool_calls[0].input == {"command": "mkdir -p /workspace/todo-app"}
    assert first.text.startswith("I'll help you create a Vue.js")
    result = t.messages[2].tool_results[0]
    assert result.call_id == first.tool_calls[0].id and "exit code 0" in result.content
    assert any(ev.get("observation") == "agent_state_changed" for _, ev in t.extras)
    finish = _read("openhands/basic.json").messages[-1]
    assert finish.tool_calls[0].name == "finish" and finish.meta[INTERRUPTED]


def test_mini_swe_agent_fenced_commands_pair_with_observations() -> None:
    t = _read("mini-swe-agent/github_issue.traj.json")
    calls = [c for m in t.messages for c in m.tool_calls]
    results = [r for m in t.messages for r in m.tool_results]
    assert len(calls) == len(results) == 10
    assert all(c.name == "bash" for c in calls) and calls[1].input == {"command": "ls -la"}
    assert results[0].content.startswith("<returncode>1</returncode>")
    assert "```" not in t.messages[2].text


def test_aider_user_turns_match_the_manifest() -> None:
    manifest = json.loads((TRANSCRIPTS / "aider" / "sessions" / "manifest.json").read_text())
    for entry in manifest:
        t = _read(f"aider/{entry['file']}")
        inputs = [m for m in t.messages if m.role == "user" and m.meta.get("kind") != "tool_output"]
        assert len(inputs) == entry["turns"], entry["file"]
        # Edit blocks are the model's, except where aider quotes a failed one back in its notices.
        blocks = sum(m.text.count("<<<<<<< SEARCH") for m in t.messages)
        assert blocks == entry["search_replace_blocks"], entry["file"]
        assert not any(line.startswith("#### ") for m in t.messages for line in m.text.split("\n"))


def test_aider_markdown_structure() -> None:
    t = _read("aider/sessions/session_03_2024-08-09_193247.md")
    header, ask, reply = t.messages[:3]
    assert header.meta == {"kind": "tool_output", "session_start": "2024-08-09 19:32:47"}
    assert header.text.startswith("/Users/gauthier") and not header.text.endswith(" ")
    assert ask.role == "user" and ask.text.startswith("add a Coder.commit_before_message")
    assert reply.role == "assistant" and "<<<<<<< SEARCH" in reply.text and ">>>>>>> REPLACE" in reply.text
    assert t.messages[4].meta.get("kind") == "command" and t.messages[4].text == "/diff"
    traceback = t.messages[5].text.split("\n")      # one message from consecutive #### lines
    assert len(traceback) > 10 and traceback[-1].startswith("ValueError")
    example = _read("aider/website_examples/hello.md")
    assert [m.role for m in example.messages] == ["user", "assistant", "user"]
    assert example.messages[0].text == "change hello to goodbye"
    assert any("Hello aider!" in x["markdown"] for _, x in example.extras)
    notices = _read("aider/sessions/session_07_2024-08-14_095032.md").messages
    pytest_run = next(m for m in notices if "rootdir: /Users/gauthier/Projects/aider" in m.text)
    assert pytest_run.meta["kind"] == "tool_output"     # continuation lines of a multi-line notice
