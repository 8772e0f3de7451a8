"""`worksurface hook` (issue 31, item 1), without a client: the hook's JSON in, its reply out, on Claude
Code transcripts written here. The surface comes from the ledger of the whole transcript, skips what
the harness's own summary and re-attached files show, fits what the client passes whole, and never
blocks the harness (its failures exit 1); `hook install` edits settings idempotently, with a backup."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.hooks.run import HEADER
from worksurface.session import homes

runner = CliRunner()
SESSION = "0b7e6a52-7c1f-4d2e-9a55-3c1d2e4f5a6b"
RULE = "Never touch the files under migrations/."
OTHER_RULE = "Always run pytest -q before you commit."
BODY = "def total(items):\n    return sum(i.price for i in items)  # WS31-MODELS\n"


class Records:
    """A Claude Code session file, record by record."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = str(cwd)
        self.out: list[dict[str, Any]] = []

    def add(self, kind: str, content: Any, **extra: Any) -> "Records":
        n = len(self.out)
        record = {"type": kind, "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None, "sessionId": SESSION,
                  "cwd": self.cwd, "message": {"role": kind, "content": content}, **extra}
        if kind == "assistant":
            record["message"]["id"] = f"msg_{n}"
        self.out.append(record)
        return self

    def tool(self, name: str, args: dict[str, Any], result: str) -> "Records":
        call = f"toolu_{len(self.out)}"
        self.add("assistant", [{"type": "tool_use", "id": call, "name": name, "input": args}])
        return self.add("user", [{"type": "tool_result", "tool_use_id": call, "content": result}])

    def raw(self, record: dict[str, Any]) -> "Records":
        self.out.append({"sessionId": SESSION, "cwd": self.cwd, **record})
        return self

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in self.out), encoding="utf-8")
        return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "models.py").write_text(BODY, encoding="utf-8")
    return app_dir


def history(cwd: Path) -> Records:
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(BODY.splitlines(), 1))
    todos = [{"content": "Fix total()", "status": "in_progress", "activeForm": "Fixing total()"},
             {"content": "Add a test for total()", "status": "pending", "activeForm": "Adding a test"}]
    return (Records(cwd).add("user", f"Fix the total in app/models.py. {RULE} {OTHER_RULE}")
            .tool("TodoWrite", {"todos": todos}, "Todos have been modified successfully.")
            .tool("Read", {"file_path": str(cwd / "models.py")}, numbered)
            .add("assistant", [{"type": "text", "text": "total() sums prices; looking at the callers next."}]))


def hook(payload: dict[str, Any], *args: str, client: str = "claude-code") -> Any:
    return runner.invoke(app, ["hook", client, *args], input=json.dumps(payload))


def payload(transcript: Path, cwd: Path, event: str = "SessionStart", **fields: Any) -> dict[str, Any]:
    base = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(cwd), "hook_event_name": event}
    if event == "SessionStart":
        base["source"] = "compact"
    return {**base, **fields}


def surface_of(result: Any) -> str:
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    text = reply["hookSpecificOutput"]["additionalContext"]
    assert text.startswith(HEADER)
    return text


def test_after_compaction_the_surface_comes_from_the_ledger_of_the_whole_session(tmp_path: Path,
                                                                                 workspace: Path) -> None:
    transcript = history(workspace).write(tmp_path / f"{SESSION}.jsonl")
    text = surface_of(hook(payload(transcript, workspace)))
    assert RULE in text and OTHER_RULE in text
    assert "[in_progress] Fix total()" in text and "[pending] Add a test for total()" in text
    # The file's current content from the hook's cwd (the workspace), not the transcript's copy.
    assert re.search(r'<file path="[^"]*models\.py" source="workspace">', text) and "WS31-MODELS" in text
    assert '<agent-status kind="baseline"' in text
    assert "tokens-used" not in text, "the size before the compaction is not quoted as the size after it"
    home = homes.claude_session_folder(transcript)
    assert homes.is_session_dir(home) and stat.S_IMODE(home.stat().st_mode) == 0o700


def test_other_events_get_no_reply_and_precompact_folds_the_ledger_first(tmp_path: Path, workspace: Path) -> None:
    transcript = history(workspace).write(tmp_path / f"{SESSION}.jsonl")
    for event, extra in (("SessionStart", {"source": "startup"}), ("PostCompact", {"trigger": "auto"}),
                         ("UserPromptSubmit", {"prompt": "hi"})):
        res = hook(payload(transcript, workspace, event, **extra))
        assert res.exit_code == 0 and res.stdout == "", (event, res.output)
    assert not homes.claude_session_folder(transcript).exists(), "nothing kept for events it does not answer"
    res = hook(payload(transcript, workspace, "PreCompact", trigger="auto", custom_instructions=None))
    # PreCompact's stdout would become Claude Code's compaction instructions: nothing is printed.
    assert res.exit_code == 0 and res.stdout == ""
    assert homes.is_session_dir(homes.claude_session_folder(transcript))
    assert RULE in surface_of(hook(payload(transcript, workspace)))


def test_what_the_harness_summary_and_reattached_files_show_is_skipped(tmp_path: Path, workspace: Path) -> None:
    # The transcript already holds the harness's compaction (as Codex writes it before the hook runs):
    # its summary quotes one rule, and the file the harness re-attached after it is models.py.
    records = history(workspace)
    records.raw({"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
                 "content": "Conversation compacted", "compactMetadata": {"trigger": "auto", "preTokens": 90000}})
    records.raw({"type": "user", "uuid": "s1", "parentUuid": "b1", "isCompactSummary": True, "message": {
        "role": "user", "content": f"This session is being continued. Summary: {OTHER_RULE}"}})
    records.raw({"type": "attachment", "uuid": "f1", "parentUuid": "s1", "attachment": {
        "type": "file", "filename": str(workspace / "models.py"),
        "content": {"type": "text", "file": {"filePath": str(workspace / "models.py"), "content": BODY}}}})
    transcript = records.write(tmp_path / f"{SESSION}.jsonl")
    text = surface_of(hook(payload(transcript, workspace)))
    assert RULE in text, "the rule the summary dropped is restored"
    constraints = text.split("<standing-constraints>", 1)[1].split("</standing-constraints>", 1)[0]
    assert OTHER_RULE not in constraints, "the rule the summary quotes is not repeated"
    assert "<file " not in text and "WS31-MODELS" not in text, "the file the harness re-attached is not repeated"


def test_a_boundary_noted_before_the_compaction_is_not_taken_for_the_new_one(tmp_path: Path, workspace: Path) -> None:
    # An older harness compaction quoted the rule; PreCompact noted its boundary, so at SessionStart the
    # transcript (which Claude Code 2.1 writes only after its hooks) holds nothing of the new summary.
    records = history(workspace)
    records.raw({"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
                 "content": "Conversation compacted", "compactMetadata": {"trigger": "auto", "preTokens": 90000}})
    records.raw({"type": "user", "uuid": "s1", "parentUuid": "b1", "isCompactSummary": True,
                 "message": {"role": "user", "content": f"Summary: {OTHER_RULE}"}})
    transcript = records.write(tmp_path / f"{SESSION}.jsonl")
    assert hook(payload(transcript, workspace, "PreCompact", trigger="auto")).exit_code == 0
    text = surface_of(hook(payload(transcript, workspace)))
    assert OTHER_RULE in text, "the old summary is gone from the new context: the rule is restored"


def test_a_surface_over_what_the_client_passes_whole_is_cut_to_it_and_kept_whole(tmp_path: Path,
                                                                                 workspace: Path) -> None:
    records = history(workspace)
    for n in range(40):
        records.add("user", f"Never rename the module legacy_{n}.py, it is imported by plugin {n}.")
    transcript = records.write(tmp_path / f"{SESSION}.jsonl")
    text = surface_of(hook(payload(transcript, workspace), "--max-chars", "1500"))
    assert len(text) <= 1500
    pointer = re.search(r"is artifact ([0-9a-f]{16}): open (\S+) to read it", text)
    assert pointer, text[-300:]
    whole = runner.invoke(app, ["artifact", str(homes.claude_session_folder(transcript)), pointer.group(1)])
    assert whole.exit_code == 0 and "legacy_0.py" in whole.stdout and "WS31-MODELS" in whole.stdout
    assert len(whole.stdout) > 1500


@pytest.mark.parametrize(("stdin", "problem"), [
    ("not json", "not JSON"), ("[1, 2]", "must be a JSON object"), ('{"session_id": "x"}', "no hook_event_name"),
    ('{"hook_event_name": "SessionStart"}', "no session_id"),
])
def test_bad_input_is_one_line_and_never_blocks_the_harness(stdin: str, problem: str) -> None:
    res = runner.invoke(app, ["hook", "codex"], input=stdin)
    assert res.exit_code == 1, "exit 1 is reported by both clients without blocking (2 would block)"
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and problem in lines[0] and lines[0].startswith("worksurface: error: hook codex:")


def test_a_missing_transcript_is_reported_without_blocking(tmp_path: Path) -> None:
    res = hook(payload(tmp_path / "gone.jsonl", tmp_path))
    assert res.exit_code == 1 and "gone.jsonl" in res.stderr and "no such" in res.stderr


# --- hook install ------------------------------------------------------------------------------------

def test_install_claude_code_is_idempotent_keeps_other_settings_and_backs_up(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"model": "opus", "hooks": {"SessionStart": [
        {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}]}}
    settings.write_text(json.dumps(theirs), encoding="utf-8")
    settings.chmod(0o640)
    args = ["hook", "install", "claude-code", "--project", str(tmp_path)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0 and "wrote" in first.stdout and "claude mcp add worksurface" in first.stdout
    written = settings.read_text(encoding="utf-8")
    assert json.loads(settings.with_name("settings.json.worksurface.bak").read_text(encoding="utf-8")) == theirs
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640
    second = runner.invoke(app, args)
    assert second.exit_code == 0 and "already installed" in second.stdout
    assert settings.read_text(encoding="utf-8") == written
    data = json.loads(written)
    assert data["model"] == "opus" and data["hooks"]["SessionStart"][0] == theirs["hooks"]["SessionStart"][0]
    ours = {event: [(g.get("matcher"), h["command"]) for g in groups for h in g["hooks"] if "worksurface" in h["command"]]
            for event, groups in data["hooks"].items()}
    assert [m for m, _ in ours["SessionStart"]] == ["compact"] and [m for m, _ in ours["PreCompact"]] == [None]
    assert all(c.endswith("-m worksurface hook claude-code") for _, c in ours["SessionStart"] + ours["PreCompact"])


def test_install_local_scope_and_codex_hooks_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = runner.invoke(app, ["hook", "install", "claude-code", "--scope", "local", "--project", str(tmp_path)])
    assert res.exit_code == 0 and (tmp_path / ".claude" / "settings.local.json").exists()
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    res = runner.invoke(app, ["hook", "install", "codex", "--scope", "user"])
    assert res.exit_code == 0 and "/hooks" in res.stdout
    hooks = json.loads((tmp_path / "codex-home" / "hooks.json").read_text(encoding="utf-8"))
    assert set(hooks) == {"hooks"}  # Codex refuses a hooks.json with any other root field
    handler = hooks["hooks"]["SessionStart"][0]["hooks"][0]
    limit = handler["additionalContextLimit"]
    assert handler["command"].endswith(f"hook codex --max-chars {limit}") and limit > 10_000
    assert stat.S_IMODE((tmp_path / "codex-home" / "hooks.json").stat().st_mode) == 0o600
    res = runner.invoke(app, ["hook", "install", "codex", "--scope", "local"])
    assert res.exit_code == 2 and "no local settings scope" in res.stderr


def test_install_refuses_a_settings_file_it_cannot_read_and_changes_nothing(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n  "model": "opus",\n  oops\n}\n', encoding="utf-8")
    res = runner.invoke(app, ["hook", "install", "claude-code", "--project", str(tmp_path)])
    assert res.exit_code == 2 and f"{settings}:3: not JSON" in res.stderr and "nothing changed" in res.stderr
    assert settings.read_text(encoding="utf-8").startswith('{\n  "model"') and len(list(settings.parent.iterdir())) == 1


def test_a_sub_agents_compaction_gets_the_sub_agents_settings(tmp_path: Path, workspace: Path) -> None:
    """A sidechain (Claude Code's `<session>/subagents/agent-*.jsonl`, records marked isSidechain) is a
    sub-agent's transcript: the hook answers with `agents.subagent` applied, the main session without."""
    (workspace / "worksurface.toml").write_text("[agents.subagent.reinject]\nconstraints_tokens = 0\n")
    main = history(workspace).write(tmp_path / f"{SESSION}.jsonl")
    side = history(workspace)
    for record in side.out:
        record.update(isSidechain=True, agentId="a77")
    folder = tmp_path / SESSION / "subagents"
    folder.mkdir(parents=True)
    sidechain = side.write(folder / "agent-a77.jsonl")
    assert "<standing-constraints>" in surface_of(hook(payload(main, workspace)))
    sub = surface_of(hook(payload(sidechain, workspace)))
    assert "<standing-constraints>" not in sub  # its constraints part has no room
    assert "[in_progress] Fix total()" in sub and "WS31-MODELS" in sub  # the rest as for the main agent
