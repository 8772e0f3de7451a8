"""Fact rules for negative results, plans and workflows that real sessions lost: a resolved error keeps
the change that fixed it, look-only commands are never a fix, tracker listings keep pending issue ids,
multi-issue task output splits per issue, checker complaints restated by the agent are kept, and the
session's command forms are named."""

from __future__ import annotations

from builders import Convo
from worksurface import facts
from worksurface.facts.constraints import issue_parts, task_specs
from worksurface.facts.findings import COMPLAINT
from worksurface.facts.identifiers import command_form, command_forms
from worksurface.facts.tracker import issue_changes
from worksurface.core.model import Message, Text, Thinking

IGNORED = ("The following paths are ignored by one of your .gitignore files:\npriv/static/app.css\n"
           "hint: Use -f if you really want to add them.")


def _ignored_then_forced(look: str) -> list[Message]:
    c = Convo()
    c.user("commit the css")
    c.tool("Bash", {"command": "git add priv/static/app.css && git commit -m wip"}, IGNORED, is_error=True)
    c.tool("Bash", {"command": look}, "priv/static/other.css")
    c.tool("Bash", {"command": "git add -f priv/static/app.css && git commit -m wip"}, "[main abc1234] wip")
    return c.messages


def test_a_look_only_command_is_never_the_fix_and_the_changed_retry_is_named():
    (err,) = facts.tool_errors(_ignored_then_forced("git ls-files priv/static/"))
    assert err.resolved
    assert "git ls-files" not in (err.resolution or "")
    assert "git add -f" in (err.resolution or "")


def test_a_real_change_before_a_changed_retry_is_named_with_the_retry():
    (err,) = facts.tool_errors(_ignored_then_forced("git rm --cached priv/static/app.css"))
    assert "fixed by `git rm --cached priv/static/app.css`" in (err.resolution or "")
    assert "then succeeded as `git add -f priv/static/app.css" in (err.resolution or "")


BD_SHOW = """○ p-1 [EPIC] · Make it work   [● P2 · OPEN]
Owner: x

CHILDREN
  ↳ ✓ p-1.1: First part ● P2
  ↳ ◐ p-1.2: Second part ● P2
  ↳ ○ p-1.3: Regression coverage, and docs ● P2
"""


def test_bd_show_lists_related_issues_with_their_states():
    changes = [(c.issue, c.status, c.title) for c in issue_changes("bd show p-1", BD_SHOW)]
    assert changes == [("p-1", "pending", "Make it work"), ("p-1.1", "completed", "First part"),
                       ("p-1.2", "in_progress", "Second part"), ("p-1.3", "pending", "Regression coverage, and docs")]
    # Listings of other issues are still not read, and related lines count only under `bd show`.
    assert issue_changes("bd ready", BD_SHOW) == []


TWO_ISSUES = """○ p-2 · Add the page   [● P2 · OPEN]
Technical specs:
- Add route `/review`.
===
○ p-3 · Launch the review   [● P2 · OPEN]
Technical specs:
- The hook prints `additionalContext` JSON.
- New module `ContextBuilder`.
"""


def test_multi_issue_task_output_splits_into_one_text_per_issue():
    parts = issue_parts(TWO_ISSUES)
    assert [p[0] for p in parts] == ["p-2", "p-3"]
    assert "===" not in parts[0][1] and "ContextBuilder" in parts[1][1] and "ContextBuilder" not in parts[0][1]
    c = Convo()
    c.user("do p-2 and p-3")
    c.tool("Bash", {"command": "bd show p-2; echo ===; bd show p-3"}, TWO_ISSUES)
    specs = task_specs(c.messages)
    assert sorted(s.issue for s in specs) == ["p-2", "p-3"]
    assert len({s.origin for s in specs}) == 2
    assert issue_parts("no header here") == [("", "no header here")]


def test_checker_complaints_are_kept_from_prose_and_thinking_but_never_from_tool_output():
    c = Convo()
    c.user("fix the lint")
    c.tool("Bash", {"command": "cat notes.txt"}, "Credo reports nesting too deep in `other_fun`.")
    c.say("Credo reports nesting too deep in `classify_lines`. Let me extract a helper.")
    c.messages.append(Message("t1", "assistant", (
        Thinking("The credo warning at line 280 is about `length/1` being expensive. Let me check the "
                 "credo warning again."), Text("Checking."))))
    found = [f.text for f in facts.findings(c.messages) if f.kind == COMPLAINT]
    assert any("classify_lines" in t for t in found)
    assert any("length/1" in t for t in found)
    assert not any("other_fun" in t for t in found)  # the tool's output is an observation
    assert not any(t.startswith("Let me") for t in found)  # an intention is not a finding


def test_command_forms_drop_arguments_and_plumbing_and_count_variants():
    assert command_form("mix test test/a_test.exs 2>&1 | tail -5") == ["mix test"]
    assert command_form("cd assets && npm run build") == ["npm run build"]
    assert command_form("python -m pytest -q tests/x.py") == ["python -m pytest -q"]
    assert command_form("git add -f x && git commit -m wip") == []  # shown as commits
    assert command_form("mix compile --warnings-as-errors && mix credo --strict") == [
        "mix compile --warnings-as-errors", "mix credo --strict"]
    forms = command_forms(["mix credo --strict 2>&1 | tail -5", "bd sync --from-main",
                           "mix credo --strict 2>&1 | tail -10", "mix ash.codegen add_x --yes"])
    assert forms[0] == ("mix credo --strict", 2)
    assert ("bd sync --from-main", 1) in forms and ("mix ash.codegen --yes", 1) in forms


def test_an_abandoned_approach_keeps_what_was_done_instead():
    c = Convo()
    c.user("add the column")
    c.say("The generated migration uses `ALTER TABLE ... modify`, which SQLite does not support. "
          "I need to rewrite it with a table rewrite.")
    c.tool("Write", {"file_path": "/repo/priv/migrations/1_add.exs",
                     "content": "defmodule M do\n  use Ecto.Migration\n  def up do\n"
                                "    execute(\"ALTER TABLE notes RENAME TO notes_old\")\n  end\nend\n"},
           "File created successfully")
    c.say("Stale build artifacts. Let me force a clean recompile.")
    c.tool("Bash", {"command": "mix compile --force"}, "Compiled 12 files")
    texts = [a.text for a in facts.excluded_approaches(c.messages) if a.kind == "abandoned"]
    assert any("then Write /repo/priv/migrations/1_add.exs" in t and "RENAME TO notes_old" in t for t in texts)
    assert any(t.endswith("-> then ran `mix compile --force`") for t in texts)
    # The line sharing no words with what was said is not quoted.
    assert not any("use Ecto.Migration" in t for t in texts)


def test_package_json_scripts_read_by_the_agent_become_identifiers():
    c = Convo()
    c.user("add js tests")
    c.tool("Read", {"file_path": "/repo/assets/package.json"},
           '     1\u2192{\n     2\u2192  "scripts": {\n     3\u2192    "test": "vitest run",\n'
           '     4\u2192    "build": "esbuild js/app.js"\n     5\u2192  }\n     6\u2192}\n')
    c.tool("Read", {"file_path": "/repo/other.json"}, '     1\u2192{"scripts": {"x": "y"}}\n')
    ids = facts.identifiers(c.messages)
    assert set(ids.scripts) == {"test: vitest run", "build: esbuild js/app.js"}


def test_task_criteria_put_edge_cases_and_done_before_file_lists():
    spec_text = ("Output files:\n- `a.ex` (modify)\n- `b.ex` (new)\n\nTechnical specs:\n- Skip nodes marked done.\n\n"
                 "Edge cases:\n- Unknown tags fall back to plaintext.\n\nDefinition of Done:\n- Tests pass.\n")
    c = Convo()
    c.user("do it")
    c.tool("Bash", {"command": "bd show p-9"}, "○ p-9 · Thing   [● P2 · OPEN]\n" + spec_text)
    (spec,) = task_specs(c.messages)
    assert spec.criteria == ("Unknown tags fall back to plaintext.", "Tests pass.", "Skip nodes marked done.",
                             "`a.ex` (modify)", "`b.ex` (new)")
