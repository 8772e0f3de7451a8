"""The report's Ledger section lists the session's entries (issue 31, item 8), not "No ledger entries
to list" under non-zero counts."""

from __future__ import annotations

from pathlib import Path

from builders import Convo
from worksurface import Session
from worksurface.report.data import ledger_counts, ledger_entries
from worksurface.report.html import ledger_section


def test_the_ledger_section_lists_the_entries_its_counts_announce(tmp_path: Path) -> None:
    c = Convo().system("You are a coding agent.").user("Fix the parser. Never edit vendor/.")
    c.tool("Edit", {"file_path": "/repo/parser.py", "old_string": "a", "new_string": "b"}, "ok")
    c.say("done")
    with Session.open(tmp_path / "s") as session:
        session.prepare(c.messages)
        entries, counts = ledger_entries(session), ledger_counts(session)
    by_kind = {e["kind"]: e for e in entries}
    assert by_kind["constraints"]["text"] == "Never edit vendor/." and by_kind["constraints"]["source_id"] == "m1"
    assert "/repo/parser.py" in by_kind["files"]["text"]
    assert sum(counts[k] for k in by_kind) == len(entries)
    html = ledger_section(entries, counts)
    assert "No ledger entries to list" not in html
    assert f"Ledger ({len(entries)} entries)" in html and "Never edit vendor/." in html


def test_the_sawtooth_marks_the_harness_s_own_compactions() -> None:
    from worksurface.report.html import replay_section

    calls = [{"call": n, "messages": n + 2, "view_tokens": 1_000 * (n % 4 + 1), "cached_tokens": 500,
              "fired": [], "compacted": n == 3, "harness_compaction": n == 6, "overflow": None, "ms": 1.0}
             for n in range(8)]
    summary = {"calls": 8, "compactions": 1, "overflows": 0, "cache_share": 0.5, "total_cost": None}
    html = replay_section({"calls": calls, "threshold": 3_500, "summary": summary, "pricing": "no prices"})
    assert "The harness compacted on its own before 1 calls (blue marks)." in html
    assert "the harness&#x27;s own compaction" in html or "the harness's own compaction" in html
    plain = replay_section({"calls": [dict(c, harness_compaction=False) for c in calls], "threshold": 3_500,
                            "summary": summary, "pricing": "no prices"})
    assert "harness compacted on its own" not in plain


def test_the_sub_agent_tree_is_drawn(tmp_path: Path) -> None:
    """Each sub-agent call is a node of the tree, linked to its sidechain file, with its size; a
    session without sub-agents has no such section."""
    import json

    from typer.testing import CliRunner

    import cc_records
    from builders import words
    from worksurface.cli import app

    main_path, side_path = cc_records.subagent_pair(tmp_path / "projects", words, tokens=200)
    (side_path.parent / "agent-acompact-0f0f.jsonl").write_text(side_path.read_text())
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(main_path), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    tree = json.loads(result.stdout)["subagents"]
    [agent] = tree["agents"]
    assert (agent["agent_type"], agent["description"], agent["state"], agent["matched_by"]) == \
        ("Explore", "find panes", "completed", "agent id")
    assert agent["sidechain"]["file"] == "agent-a1b2.jsonl" and agent["sidechain"]["tokens"] > 1_000
    assert [s["file"] for s in tree["unlinked"]] == ["agent-acompact-0f0f.jsonl"]
    html = out.read_text()
    assert "<h2>Sub-agents</h2>" in html and '<svg class="tree"' in html
    assert html.count('<g class="agent"') == 1 and html.count('<g class="unlinked"') == 1
    assert 'data-type="Explore"' in html and "Explore: find panes" in html
    assert "Claude Code&#x27;s compaction call" in html or "Claude Code's compaction call" in html
    side_path.unlink()
    again = CliRunner().invoke(app, ["report", str(main_path), "-o", str(out), "--json"])
    assert json.loads(again.stdout)["subagents"]["agents"][0]["sidechain"] is None
    assert "no sidechain file" in out.read_text()
    from worksurface.report.tree import subagents_section

    assert subagents_section({"folder": None, "agents": [], "unlinked": []}) == ""
