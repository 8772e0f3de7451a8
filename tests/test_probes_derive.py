"""Mechanical probe derivation: each rule on a built session, and every real transcript format."""

from __future__ import annotations

import pytest

from probes_samples import TRANSCRIPTS, session
from worksurface.formats import read_transcript
from worksurface.core.model import Message, Text, ToolCall, ToolResult, view_text
from worksurface.probes import CATEGORIES, derive, score
from worksurface.probes.cut import cut


def by_category(probes) -> dict[str, list[tuple[str, ...]]]:
    out: dict[str, list[tuple[str, ...]]] = {}
    for p in probes:
        out.setdefault(p.category, []).append(p.needles)
    return out


def test_each_rule_on_a_built_session():
    got = by_category(derive(session()))
    assert got["request"] == [("Fix the flaky login test in tests/test_login.py. Never push to main "
                               "without a review.",),
                              ("No, a longer sleep doesn't work. Use a polling helper instead of sleeping.",)]
    assert ("Never push to main without a review.",) in got["constraint"]
    assert ("Use a polling helper instead of sleeping.",) in got["constraint"]
    assert got["negative"] == [("No, a longer sleep doesn't work.",)]
    # Paths relative to the working directory; the newest edit last.
    assert got["artifact"] == [("tests/test_login.py",), ("tests/helpers/poll.py",)]
    assert got["recent"] == [("pytest tests/test_login.py", "E AssertionError: expected 200, got 503"),
                             ("tests/test_login.py",)]
    assert got["plan"] == [("Replace the sleep with a polling helper",), ("Run the whole test suite",)]
    assert got["status"] == [("4 passed",), ("/repo",), ("fix-login",)]
    # CamelCase tool names and programs run twice or more; Read/Bash are prose words, git is everyone's.
    assert got["tools"] == [("TodoWrite",), ("pytest",)]


def test_ids_follow_the_category_order_and_the_full_transcript_retains_everything():
    probes = derive(session())
    order = [CATEGORIES.index(p.category) for p in probes]
    assert order == sorted(order)
    assert [p.id for p in probes if p.category == "artifact"] == ["artifact-1", "artifact-2"]
    assert score(session(), probes).fraction == 1.0
    assert all(p.established_at for p in probes)


def test_failures_before_the_last_become_negatives_and_rejections_are_not_failures():
    msgs = [Message("u", "user", (Text("Deploy the app to staging please"),)),
            Message("a1", "assistant", (ToolCall("c1", "Bash", {"command": "make deploy-staging"}),)),
            Message("r1", "user", (ToolResult("c1", "make: *** No rule to make target 'deploy-staging'",
                                              is_error=True),)),
            Message("a2", "assistant", (ToolCall("c2", "Bash", {"command": "rm -rf build/"}),)),
            Message("r2", "user", (ToolResult("c2", "The user doesn't want to proceed with this tool use.",
                                              is_error=True),)),
            Message("a3", "assistant", (ToolCall("c3", "Bash", {"command": "./deploy.sh staging"}),)),
            Message("r3", "user", (ToolResult("c3", "Traceback (most recent call last):\n  File x\n"
                                                    "KeyError: 'STAGING_TOKEN'"),)),
            ]
    got = by_category(derive(msgs))
    assert got["negative"] == [("rm -rf build/",), ("make: *** No rule to make target 'deploy-staging'",)]
    assert got["recent"] == [("./deploy.sh staging", "KeyError: 'STAGING_TOKEN'")]


def test_queued_input_is_the_latest_request_only_once_it_has_arrived():
    msgs = session()
    queued = [("a5", "Also add a changelog entry for the fix."), ("a8", "later")]
    got = by_category(derive(msgs[:14], queued_inputs=queued))
    assert got["request"][-1] == ("Also add a changelog entry for the fix.",)
    early = by_category(derive(msgs[:5], queued_inputs=queued))
    assert ("Also add a changelog entry for the fix.",) not in early["request"]


def test_harness_written_user_messages_are_not_requests():
    msgs = [Message("u1", "user", (Text("Refactor the parser module"),)),
            Message("n", "user", (Text("<task-notification>\n<status>completed</status>\n"
                                       "</task-notification>\nRead the output file to retrieve the result: "
                                       "/tmp/x.output"),)),
            Message("o", "user", (Text("Tokens: 31,557 sent, 187 received."),), meta={"kind": "tool_output"})]
    assert by_category(derive(msgs))["request"] == [("Refactor the parser module",)]


def _one_file_per_folder():
    if not TRANSCRIPTS.is_dir():
        return []
    picks = {
        "claude-code": "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        "swe-agent": "demos__replay__marshmallow-code__marshmallow-1867__function_calling__install-1"
                     "__marshmallow-code__marshmallow-1867.traj",
        "openhands": "basic_gui_mode.json",
        "mini-swe-agent": "github_issue.traj.json",
        "aider": "sessions/session_01_2024-08-13_134245.md",
    }
    return [pytest.param(TRANSCRIPTS / folder / name, id=folder) for folder, name in picks.items()]


# The categories each sample must yield: what a person reading it would expect to be probed.
EXPECTED = {
    "claude-code": {"request", "negative", "artifact", "recent", "status", "tools"},
    "swe-agent": {"request", "constraint", "artifact", "recent", "status"},
    "openhands": {"request", "artifact", "tools"},
    "mini-swe-agent": {"request", "constraint", "recent", "status"},
    "aider": {"request", "artifact"},
}


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="shared transcripts not available")
@pytest.mark.parametrize("path", _one_file_per_folder())
def test_real_transcripts(path):
    folder = path.relative_to(TRANSCRIPTS).parts[0]
    transcript = read_transcript(path)
    before = cut(transcript.messages).before
    probes = derive(before, str(path), transcript.queued_inputs)
    again = derive(before, str(path), transcript.queued_inputs)
    assert probes.dumps() == again.dumps()  # deterministic
    categories = {p.category for p in probes}
    assert EXPECTED[folder] <= categories
    assert len({p.id for p in probes}) == len(probes)
    ids = {m.id for m in before}
    assert all(p.established_at in ids for p in probes)
    # Every needle was visible before the cut (queued user input included: the model saw it).
    queued = [text for after, text in transcript.queued_inputs if after in ids]
    assert score("\n".join([view_text(before), *queued]), probes).fraction == 1.0


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="shared transcripts not available")
def test_claude_code_cut_at_the_boundary_finds_what_a_person_labeled():
    path = TRANSCRIPTS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    transcript = read_transcript(path)
    probes = derive(cut(transcript.messages, "boundary").before, queued_inputs=transcript.queued_inputs)
    needles = {n for p in probes for n in p.needles}
    # The hand-labeled set (../shared/probes/258c7280.json) has these too.
    assert {"Implement spotter-gqc", "lib/spotter_web/live/project_review_live.ex",
            "test/spotter_web/live/project_review_live_test.exs", "bd close"} <= needles
    assert "new beads for the epic were added. tackle them" in needles  # queued, not a message
