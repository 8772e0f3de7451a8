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
