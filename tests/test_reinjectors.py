"""Reinjectors: restore what they should, skip what the tail shows, respect budgets and path safety."""

from __future__ import annotations

import os

import pytest

from builders import Convo, words
from worksurface import Session, compact
from worksurface.core.model import Origin, view_text


def _reinjected(prepared, name):
    return [m for m in prepared.messages if m.meta.get("reinjector") == name]


def _report(prepared, name):
    return next(r for r in prepared.report.reinjected if r.name == name)


def _coding_session(workspace: str | None = None) -> Convo:
    root = workspace or "/repo"
    c = Convo().user("Add retries to the client. Don't touch vendor/. Always run make lint before committing.")
    c.tool("Read", {"file_path": f"{root}/client.py"}, "     1\u2192def get():\n     2\u2192    return http.get(URL)\n")
    c.tool("Edit", {"file_path": f"{root}/client.py", "old_string": "return", "new_string": "return retry("},
           "The file has been updated.")
    c.tool("TodoWrite", {"todos": [{"content": "add retry wrapper", "status": "completed"},
                                   {"content": "write tests for retries", "status": "in_progress"},
                                   {"content": "update the changelog", "status": "pending"}]}, "Todos updated")
    for i in range(8):
        c.tool("Bash", {"command": f"pytest -k case{i}"}, words(600, seed=i) + f"\n{i} passed in 0.1s")
    c.say("Working on the tests now.")
    return c


def test_reinjection_restores_files_plan_constraints_and_status_after_the_tail():
    prepared = compact(_coding_session().messages, force=True)
    view = prepared.messages
    assert [m.origin for m in view[:2]] == [Origin.BOUNDARY, Origin.SUMMARY]
    origins = [m.origin for m in view]
    first_reinjected = origins.index(Origin.REINJECTION)
    assert all(o is Origin.REINJECTION for o in origins[first_reinjected:-1])
    assert origins[-1] is Origin.STATUS
    files = _reinjected(prepared, "files")
    assert files and files[0].meta["path"] == "/repo/client.py" and 'source="transcript"' in files[0].text
    plan = _reinjected(prepared, "plan")
    if plan:  # the summary may already show every item; then the plan is skipped as visible
        assert "[in_progress] write tests for retries" in plan[0].text
    else:
        assert "write tests for retries" in view_text(view)
    assert "Don't touch vendor/." in view_text(view)
    for m in _reinjected(prepared, "files") + plan:
        assert m.origin is Origin.REINJECTION


def test_files_skips_what_the_kept_tail_shows():
    c = Convo().user("look at the config")
    for i in range(6):
        c.tool("Bash", {"command": f"make step{i}"}, words(800, seed=i))
    numbered = "".join(f"{i + 1:6}\u2192key{i} = {i}\n" for i in range(40))
    c.tool("Read", {"file_path": "/repo/config.toml"}, numbered)
    c.say("read it")
    prepared = compact(c.messages, force=True)
    report = _report(prepared, "files")
    assert any(s["path"] == "/repo/config.toml" and s["why"] == "kept tail shows it"
               for s in report.details["skipped_visible"])
    assert not _reinjected(prepared, "files")


def test_files_reads_the_workspace_but_never_outside_it(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "client.py").write_text("def get():\n    return retry(http.get(URL))  # current\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    os.symlink(secret, ws / "link.txt")
    c = Convo().user("go")
    c.tool("Read", {"file_path": str(ws / "client.py")}, "old content of client")
    c.tool("Read", {"file_path": "/etc/passwd"}, "root:x:0:0")
    c.tool("Read", {"file_path": "../secret.txt"}, "shown in transcript only")
    c.tool("Read", {"file_path": str(ws / "link.txt")}, "link content as the transcript showed it")
    for i in range(6):
        c.tool("Bash", {"command": f"step{i}"}, words(900, seed=i))
    c.say("ok")
    prepared = compact(c.messages, force=True, workspace_root=str(ws))
    text = view_text(prepared.messages)
    assert "# current" in text
    assert "TOP SECRET" not in text
    restored = {f["path"]: f["source"] for f in _report(prepared, "files").details["restored"]}
    assert restored[str(ws / "client.py")] == "workspace"
    assert restored.get("/etc/passwd") in (None, "transcript")
    assert restored.get(str(ws / "link.txt")) in (None, "transcript")


@pytest.mark.parametrize("target", [40_000, 10_000, 6_000])
def test_reinjection_respects_the_post_compact_target(target):
    c = Convo().user("Refactor everything. Never use global state.")
    for i in range(30):
        c.tool("Read", {"file_path": f"/repo/m{i}.py"}, words(3_000, seed=i))
        c.say(f"read m{i}")
    prepared = compact(c.messages, force=True, post_compact_target_tokens=target)
    assert prepared.report.tokens_after <= target
    files = _report(prepared, "files")
    assert sum(f["tokens"] for f in files.details["restored"]) <= 16_000
    assert len(files.details["restored"]) <= 5


def test_reinjection_is_deterministic():
    c = _coding_session()
    a = compact(c.messages, force=True, now=100.0)
    b = compact(c.messages, force=True, now=100.0)
    assert a.messages == b.messages


def test_skills_are_reinjected_head_truncated_with_a_reload_marker():
    c = Convo().user("make the pdf")
    body = "Base directory for this skill: /skills/pdf\n# PDF skill\nAlways use pypdf.\n" + words(9_000, seed=3)
    c.tool("Skill", {"skill": "pdf"}, "Launching skill: pdf")
    c.user(body)  # Claude Code shows the skill's body as a user message right after the call
    for i in range(6):
        c.tool("Bash", {"command": f"step{i}"}, words(800, seed=i))
    c.say("ok")
    prepared = compact(c.messages, force=True)
    skills = _reinjected(prepared, "skills")
    assert skills and "Always use pypdf." in skills[0].text and "invoke the pdf skill again" in skills[0].text
    assert _report(prepared, "skills").details["restored"][0]["tokens"] <= 4_000


def test_reinjection_runs_only_when_a_boundary_is_written(tmp_path):
    c = _coding_session()
    session = Session.open(tmp_path / "s")
    prepared = session.prepare(c.messages)
    assert prepared.report.boundary is None and not prepared.report.reinjected


def test_compacting_again_keeps_one_copy_of_an_earlier_compactions_reinjections():
    # A second manual compaction with nothing new keeps the first one's reinjected files in its tail:
    # the reinjectors' identical messages (same text, same id) are not added a second time.
    messages = _coding_session().messages
    with Session.open(None) as session:
        first = session.compact(messages)
        assert _reinjected(first, "files")
        for _ in range(2):
            again = session.compact(messages).messages
            ids = [m.id for m in again]
            assert len(ids) == len(set(ids)), "no message twice"
            assert sum(m.origin is Origin.SUMMARY for m in again) == 1
            assert sum('<file path="/repo/client.py"' in m.text for m in again) == 1
