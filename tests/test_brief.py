"""Briefs for a fresh sub-agent: selected from the ledger for the task, within the budget, the same every
time, with the source message ids of each line."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from builders import Convo
from shared import TRANSCRIPTS, needs_shared
from worksurface import Session
from worksurface.cli.app import app
from worksurface.core.model import Message
from worksurface.subagents.brief import BriefError, build_brief

AGENTS_MD = """# Project rules

## Conventions
- Do not edit src/generated/schema.py by hand; regenerate it with `make schema`.
- Keep the public API of billing/invoice.py backwards compatible.
- Use the logging helpers in util/log.py instead of print.
- Always run `make lint` before committing.
- Avoid network calls in unit tests; use the fixtures in tests/fakes.py.
"""


def _convo() -> Convo:
    c = Convo().user("Add a currency field to invoices. Never push to main directly.")
    c.tool("Read", {"file_path": "/repo/AGENTS.md"}, AGENTS_MD)
    c.tool("Read", {"file_path": "/repo/src/generated/schema.py"}, "class Invoice:\n    amount: int\n")
    c.tool("Bash", {"command": "python -m pytest tests/test_invoice.py"}, "3 passed in 0.2s")
    c.tool("Bash", {"command": "python tools/gen.py --inplace"}, "Traceback: gen.py: error: unknown flag --inplace",
           is_error=True)
    c.say("The --inplace flag does not exist, so I will regenerate with make schema instead.")
    return c


def _in_repo(c: Convo) -> list[Message]:
    """The messages as Claude Code records them, with the session's working directory (where it
    loads AGENTS.md and CLAUDE.md from)."""
    return [dataclasses.replace(m, meta={"cwd": "/repo"}) for m in c.messages]


def _brief(task: str, budget: int = 3000):  # type: ignore[no-untyped-def]
    with Session.open(None) as session:
        session.ledger.update(_in_repo(_convo()))
        return session.brief(task, budget)


def test_a_task_naming_a_file_gets_the_rules_about_that_file() -> None:
    brief = _brief("Add a `currency` column to src/generated/schema.py and update its tests.")
    rules = [x.text for x in brief.lines if x.section == "Rules that apply"]
    assert any("src/generated/schema.py by hand" in r for r in rules)
    assert not any("util/log.py" in r for r in rules)  # a rule about another file does not apply
    assert any("Never push to main directly" in r for r in rules)  # the user's hard rule, always
    files = [x.text for x in brief.lines if x.section == "Relevant files"]
    assert any("/repo/src/generated/schema.py: read" in f for f in files)
    other = _brief("Switch util/log.py to structured JSON logging.")
    other_rules = " ".join(x.text for x in other.lines if x.section == "Rules that apply")
    assert "util/log.py instead of print" in other_rules and "schema.py by hand" not in other_rules


def test_lines_keep_their_sources() -> None:
    ids = {m.id for m in _convo().messages}
    brief = _brief("Regenerate src/generated/schema.py after adding the currency field")
    sourced = [x for x in brief.lines if x.sources]
    assert sourced and all(set(x.sources) <= ids for x in sourced)
    assert any("--inplace" in x.text for x in brief.lines if x.section == "Tried and excluded")
    assert all(x.text in brief.text for x in brief.lines)


def test_deterministic_and_within_budget() -> None:
    task = "Regenerate src/generated/schema.py and run the invoice tests"
    first, second = _brief(task), _brief(task)
    assert first == second and first.to_json() == second.to_json()
    for budget in (80, 150, 400, 3000):
        b = _brief(task, budget)
        assert b.tokens <= budget
        assert b.text.startswith("## Goal\n" + task[:30])
    assert _brief(task, 80).tokens < _brief(task, 3000).tokens
    with pytest.raises(BriefError):
        _brief(task, 10)
    with pytest.raises(BriefError):
        _brief("   ")


def test_brief_from_an_empty_ledger_still_states_the_task() -> None:
    with Session.open(None) as session:
        brief = build_brief(session.ledger.upto(), "Count the lines of README.md", 300)
    assert "Count the lines of README.md" in brief.text and "## Report back" in brief.text


SESSION = TRANSCRIPTS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


@needs_shared(SESSION)
def test_cli_brief_json_at_a_cut() -> None:
    runner = CliRunner()
    args = ["brief", str(SESSION), "--task", "Explore lib/spotter/services/tmux.ex and test/support/",
            "--at", "308", "--budget", "1500", "--json"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["tokens"] <= 1500 and data["budget"] == 1500
    assert data["lines"] and all({"section", "text", "sources", "relevance"} <= set(x) for x in data["lines"])
    assert "spotter-fum" in data["text"]  # the branch/worktree it must work in
    assert runner.invoke(app, args).output == out.output
    text = runner.invoke(app, args[:-1])
    assert text.exit_code == 0 and text.output.strip() == data["text"].strip()
    bad = runner.invoke(app, ["brief", str(SESSION), "--task", "x", "--at", "999999"])
    assert bad.exit_code == 2 and "outside the transcript" in bad.output
