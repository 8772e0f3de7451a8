"""Extraction gaps found on real sessions (issue 11 item 4), as general patterns: task criteria not
worded as rules, facts inside edit bodies, findings in the assistant's prose, failures printed by
commands that exit 0, shell moves/copies/deletes, identifier caps, linter complaint lines."""

from __future__ import annotations

from worksurface import facts
from worksurface.facts.errors import error_line
from worksurface.core.model import Message, Text

from facts_transcripts import Chat


def by_path(found):
    return {f.path: f for f in found}


def test_task_criteria_are_recorded_with_their_source_not_as_user_rules():
    c = Chat()
    c.bash("gh issue view 42", "Render code blocks\n\n## Acceptance criteria\n- Code rows are highlighted.\n"
                               "- Unknown language tags fall back to plaintext.\n\n## Notes\nWrite the report to out/summary.md.\n")
    spec = facts.task_specs(c.messages)[0]
    assert spec.origin == "gh issue view 42" and spec.title == "Render code blocks"
    assert spec.criteria == ("Code rows are highlighted.", "Unknown language tags fall back to plaintext.",
                             "Write the report to out/summary.md.")
    assert "## Acceptance criteria" in spec.text
    assert not [r for r in facts.standing_constraints(c.messages) if r.source == "user"]


def test_findings_stated_only_in_the_assistants_prose():
    c = Chat()
    c.say("The 3 failures in test_api.py are pre-existing; they fail on main too.")
    c.say("Looking further. The root cause is the sandbox mode: the LiveView process cannot reach the repo.")
    c.say("Instead, use `Sandbox.mode(Repo, {:shared, self()})` in the setup block.")
    c.say("Let me run it.")
    c.bash("curl -s http://x", "The cause is a misconfigured proxy.")  # tool output: not the agent's finding
    found = facts.findings(c.messages)
    assert [f.kind for f in found] == ["pre-existing", "cause", "use instead"]
    assert found[1].text.startswith("The root cause is the sandbox mode")
    assert all("proxy" not in f.text for f in found)


def test_facts_inside_edit_bodies_are_kept():
    c = Chat()
    c.call("Edit", {"file_path": "/r/app.js", "old_string": "const a = 1;",
                    "new_string": "function highlightTranscriptCode(root) {}\nconst a = 2;"}, "ok")
    c.call("Write", {"file_path": "/r/live.ex", "content": "defp transcript_row_classes(row) do\n  []\nend\n"}, "ok")
    ids = facts.identifiers(c.messages)
    assert {"highlightTranscriptCode", "transcript_row_classes"} <= set(ids.symbols)
    fact = by_path(facts.file_activity(c.messages))["/r/app.js"]
    assert fact.added == ("function highlightTranscriptCode(root) {}", "const a = 2;")
    assert fact.removed == ("const a = 1;",)


def test_failures_printed_by_a_piped_command_that_exits_zero():
    c = Chat()
    c.bash("mix test 2>&1 | tail -5", "  1) test renders (MyTest)\n\n14 tests, 1 failure")
    c.bash("mix compile 2>&1 | tail -3", "** (CompileError) lib/a.ex:3: undefined function foo/0")
    c.bash("grep -rn Error lib/", "lib/a.ex:10: raise ArgumentError")  # shows text: not a failure
    errs = facts.tool_errors(c.messages)
    assert [(e.label, e.printed) for e in errs] == [("`mix test 2>&1 | tail -5`", True),
                                                   ("`mix compile 2>&1 | tail -3`", True)]
    assert errs[1].line.startswith("** (CompileError)")


def test_shell_moves_copies_and_deletes_supersede_paths():
    c = Chat(cwd="/r")
    c.call("Read", {"file_path": "/r/old.py"}, "     1→x = 1\n")
    c.call("Read", {"file_path": "/r/keep.py"}, "     1→k = 1\n")
    c.call("Read", {"file_path": "/r/gone.py"}, "     1→g = 1\n")
    c.bash("git mv old.py new.py && cp keep.py copy.py && rm gone.py", "")
    found = by_path(facts.file_activity(c.messages))
    assert found["/r/old.py"].gone and found["/r/old.py"].moved_to == "/r/new.py" and found["/r/old.py"].content is None
    assert found["/r/new.py"].content == "x = 1" and found["/r/new.py"].moved_from == "/r/old.py"
    assert found["/r/copy.py"].content == "k = 1" and not found["/r/keep.py"].gone
    assert found["/r/gone.py"].gone and found["/r/gone.py"].content is None
    c.bash("mv new.py pkg/", "")
    c.call("Read", {"file_path": "/r/pkg/x.py"}, "     1→y\n")
    c.bash("mv pkg lib", "")
    found = by_path(facts.file_activity(c.messages))
    assert "/r/lib/x.py" in found and found["/r/pkg/x.py"].gone


def test_identifier_caps_keep_the_informative_part():
    c = Chat()
    for n in range(30):
        c.bash(f"make target-{n}", "ok")
    c.bash("cd /very/long/path/to/the/project && bd sync --from-main 2>&1", "ok")
    c.bash("git commit -m \"$(cat <<'EOF'\nfeat: add message refs\n\nbody\nEOF\n)\"", "[main abc1234] feat")
    long_add = "git add " + " ".join(f"lib/module_{n}/file.ex" for n in range(12))
    c.bash(long_add, "")
    commands = facts.identifiers(c.messages).commands
    assert len(commands) == 33
    assert "bd sync --from-main 2>&1" in commands
    assert any(cmd.startswith("git commit") and "feat: add message refs" in cmd for cmd in commands)
    assert any("lib/module_11/file.ex" in cmd for cmd in commands)


def test_linter_complaints_are_chosen_over_banners():
    credo = ("Checking 52 source files ...\n\n  Warnings - please take a look\n"
             "┃ [W] ↗ Use Logger.warning/1 instead. lib/a.ex:12:5\n\nPlease report incorrect results: https://x\n"
             "Analysis took 1.2 seconds\n52 mods/funs, found 1 warning.")
    assert error_line(credo) == "┃ [W] ↗ Use Logger.warning/1 instead. lib/a.ex:12:5"
    eslint = "/r/a.js\n  12:5  error  'x' is not defined  no-undef\n\n✖ 1 problem (1 error, 0 warnings)"
    assert error_line(eslint) == "12:5  error  'x' is not defined  no-undef"
    mix = ("warning: variable \"x\" is unused\n  lib/a.ex:3: A.f/0\n\n"
           "Compilation failed due to warnings while using the --warnings-as-errors option")
    assert error_line(mix) == 'warning: variable "x" is unused'
    ruff = "a.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n[*] 1 fixable with the `--fix` option."
    assert error_line(ruff) == "a.py:1:8: F401 [*] `os` imported but unused"


def test_transient_tool_refusals_are_not_tried_and_excluded():
    c = Chat()
    c.call("Read", {"file_path": "/r/big.ex"},
           "File content (30000 tokens) exceeds maximum allowed tokens (25000). Please use offset and limit.", True)
    c.call("Read", {"file_path": "/r/big.ex", "offset": 1, "limit": 200}, "     1→x\n")
    c.messages.append(Message("s", "assistant", (Text(
        "The file is too large; it exceeds maximum allowed tokens, so I'll read it in chunks instead."),)))
    errs = facts.tool_errors(c.messages)
    assert errs and errs[0].transient
    assert facts.excluded_approaches(c.messages) == []
