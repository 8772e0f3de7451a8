"""The worksurface hook in the real Claude Code (issue 31, item 1): `worksurface hook install claude-code`
writes the SessionStart (matcher compact) and PreCompact entries; a resumed session over Claude Code's
auto-compact threshold makes Claude Code compact on its own, run the hook, and send a next request
that carries worksurface's rebuilt surface (from its ledger of the whole session) after Claude Code's
summary and before the prompt.

Claude Code runs as in test_client_claude_code.py (HOME in a temporary folder, the fake Messages API on
127.0.0.1); CLAUDE_AUTOCOMPACT_PCT_OVERRIDE lowers its threshold so a resume of a long real session
compacts first.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from claude_client import needs_claude, resume
from fake_anthropic import LoggedRequest, last_user_text
from shared import TRANSCRIPTS, needs_shared
from worksurface.cli import app
from worksurface.formats.claude_code_projects import project_dir_name
from worksurface.hooks.run import DEFAULT_MAX_CHARS as MAX_CHARS, HEADER
from worksurface.session import homes

SESSION = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
# Claude Code compacts at this percentage of its window: the resumed session (about 80k tokens by the
# fake's estimate) is over it, so Claude Code summarizes before it sends the prompt.
AUTOCOMPACT_PCT = "20"
# Claude Code's prefix for a SessionStart hook's additionalContext in the next request.
HOOK_CONTEXT = "SessionStart hook additional context:"
SUMMARY_START = "This session is being continued from a previous conversation"

pytestmark = [pytest.mark.client, pytest.mark.slow, needs_shared(TRANSCRIPTS / "claude-code"), needs_claude]
runner = CliRunner()


def install_session(home: Path, source: Path) -> Path:
    """Put a saved session where Claude Code finds it; returns the file."""
    first = next(json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()
                 if '"cwd"' in line)
    folder = home / ".claude" / "projects" / project_dir_name(first["cwd"])
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    shutil.copy(source, target)
    target.chmod(0o644)
    return target


def texts(request: LoggedRequest) -> list[tuple[int, str]]:
    """(message index, text) of every text block of the request's messages, in order."""
    out = []
    for i, m in enumerate(request.body["messages"]):
        content = m["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if block.get("type") == "text":
                out.append((i, block["text"]))
    return out


def first_index(blocks: list[tuple[int, str]], needle: str) -> int:
    found = [n for n, (_, text) in enumerate(blocks) if needle in text]
    assert found, f"no text block holds {needle!r}"
    return found[0]


def test_claude_code_compacts_then_sends_worksurface_surface_after_its_summary(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    res = runner.invoke(app, ["hook", "install", "claude-code", "--scope", "user"])
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert {e for e in settings["hooks"]} == {"SessionStart", "PreCompact"}

    session_file = install_session(tmp_path, TRANSCRIPTS / "claude-code" / f"{SESSION}.jsonl")
    prompt = "WS31-HOOK: carry on with the next step."
    requests = resume(tmp_path, SESSION, prompt, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=AUTOCOMPACT_PCT)
    kinds = [r.kind for r in requests]
    assert "summarize" in kinds, f"Claude Code did not compact on its own: {kinds}"
    carrying = [r for r in requests if prompt in last_user_text(r.body)]
    assert carrying and requests.index(carrying[0]) > kinds.index("summarize")
    request = carrying[0]
    blocks = texts(request)
    summary, surface = first_index(blocks, SUMMARY_START), first_index(blocks, HOOK_CONTEXT)
    asked = max(n for n, (_, text) in enumerate(blocks) if prompt in text)
    assert summary < surface < asked, "the surface comes after Claude Code's summary, before the prompt"
    sent = blocks[surface][1]
    print("request after the compaction:", json.dumps([(i, t[:160]) for i, t in blocks]))
    print("surface sent:", len(sent), "characters:", json.dumps(sent[:3000]))

    assert HEADER in sent and len(sent) <= MAX_CHARS + len(HOOK_CONTEXT) + 64, "whole, not Claude Code's preview"
    # From worksurface's ledger of the whole session: rules of the task, the approved plan and a
    # fresh status baseline, none of it in Claude Code's summary.
    assert "<standing-constraints>" in sent and "No database schema migration." in sent
    assert "<plan>" in sent and "Approved plan" in sent
    assert '<agent-status kind="baseline"' in sent
    claude_summary = blocks[summary][1]
    assert "No database schema migration." not in claude_summary
    # The whole surface (the files the agent worked on too) did not fit Claude Code's 10,000
    # characters: it is an artifact of the hook's session, in Claude Code's session folder.
    pointer = re.search(r"is artifact ([0-9a-f]{16}): open (\S+) to read it", sent)
    assert pointer, "the surface says where the whole surface is"
    home = homes.claude_session_folder(session_file)
    assert homes.is_session_dir(home) and Path(pointer.group(2)).parent == home / "artifacts"
    whole = Path(pointer.group(2)).read_text(encoding="utf-8")
    assert re.search(r'<file path="[^"]*session_live\.ex"', whole) and "No database schema migration." in whole
    # Claude Code recorded the surface in the session file, after its new boundary.
    records = [json.loads(line) for line in session_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    boundary = max(i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary")
    attached = [r for r in records[boundary:] if r.get("type") == "attachment"
                and r["attachment"].get("type") == "hook_additional_context"]
    assert attached and HEADER in attached[0]["attachment"]["content"][0]
