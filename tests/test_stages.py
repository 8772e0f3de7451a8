"""Each reducing stage: trigger, action, marker and stickiness, on hand-made transcripts."""

from __future__ import annotations

import pytest

from builders import Convo, words
from worksurface import Config, Session, compact
from worksurface.core.model import Origin, ToolResult, view_text
from worksurface.core.tokens import TokenCounter
from worksurface.core.view import pairing_problems


def results(view):
    return {r.call_id: r for m in view for r in m.tool_results}


# --- budget ------------------------------------------------------------------------------------

def test_budget_replaces_an_oversized_result_with_head_tail_preview_and_artifact(tmp_path):
    c = Convo().user("run the tests")
    big = "HEAD-LINE\n" + words(30_000) + "\nFATAL ERROR at the end"
    call = c.tool("Bash", {"command": "pytest"}, big)
    c.say("done")
    session = Session.open(tmp_path / "s")
    view = session.prepare(c.messages).messages
    replaced = results(view)[call].content
    assert "stored as artifact" in replaced and "HEAD-LINE" in replaced and "FATAL ERROR at the end" in replaced
    artifact_id = replaced.split("artifact ")[1].split(" ")[0]
    assert session.artifact(artifact_id) == big
    path = replaced.split("for the rest, open ")[1].split(" ")[0]
    assert open(path, encoding="utf-8").read() == big
    assert session.counter.text(replaced) < 2_000


def test_budget_turn_cap_replaces_largest_results_first():
    c = Convo().user("read them all")
    sizes = [9_000, 11_000, 10_000, 10_000, 11_500, 2_000]
    from worksurface.core.model import Message, ToolCall
    calls = [ToolCall(f"c{i}", "Read", {"file_path": f"/r/f{i}.py"}) for i in range(len(sizes))]
    c.messages.append(Message("a", "assistant", tuple(calls)))
    for i, n in enumerate(sizes):
        c.messages.append(Message(f"r{i}", "user", (ToolResult(f"c{i}", words(n, seed=i)),)))
    c.say("ok")
    view = compact(c.messages).messages
    replaced = [cid for cid, r in results(view).items() if "stored as artifact" in r.content]
    assert "c4" in replaced and "c5" not in replaced
    turn_total = sum(Session.open(None).counter.block(r) for r in results(view).values())
    assert turn_total <= 50_000


def test_budget_is_sticky_and_decided_once(tmp_path):
    c = Convo().user("go")
    call = c.tool("Bash", {"command": "cat log"}, words(20_000))
    session = Session.open(tmp_path / "s")
    first = session.prepare(c.messages).messages
    c.say("next")
    second = session.prepare(c.messages)
    assert second.messages[: len(first)] == first
    assert second.report.stages[0].items == 0
    assert len([e for e in session.edits if getattr(e, "call_id", None) == call]) == 1


# --- snip --------------------------------------------------------------------------------------

def _reread_session(rereads: int, size: int) -> Convo:
    c = Convo().user("fix app.py")
    for i in range(rereads):
        c.tool("Read", {"file_path": "/repo/app.py"}, words(size, seed=i))
        c.say(f"looked {i}")
    return c


def test_snip_replaces_superseded_reads_when_the_batch_is_worth_it():
    c = _reread_session(4, 3_000)
    view = compact(c.messages).messages
    contents = [r.content for m in view for r in m.tool_results]
    snipped = [t for t in contents if t.startswith("[snipped: superseded by a later full read of /repo/app.py")]
    assert len(snipped) == 3 and "tokens freed" in snipped[0]
    assert not contents[-1].startswith("[snipped")


def test_snip_waits_below_the_batch_minimum():
    c = _reread_session(2, 500)
    prepared = compact(c.messages)
    snip = next(s for s in prepared.report.stages if s.name == "snip")
    assert "below the batch minimum" in snip.skipped
    assert not any(r.content.startswith("[snipped") for m in prepared.messages for r in m.tool_results)


def test_snip_exact_and_near_duplicates():
    c = Convo().user("check status")
    out = words(3_000, seed=5)
    older = c.tool("Bash", {"command": "git status"}, out)
    c.say("again")
    newer = c.tool("Bash", {"command": "git status"}, out[:-10] + " changed!!")
    c.say("diff")
    diff = words(3_000, seed=9)
    first_diff = c.tool("Bash", {"command": "git diff"}, diff)
    c.say("log")
    log = c.tool("Bash", {"command": "git log"}, diff)
    c.say("ok")
    view = compact(c.messages, snip={"min_gain_tokens": 100}).messages
    res = results(view)
    assert res[older].content.startswith(f"[snipped: near-duplicate of the later output of call {newer}")
    assert res[first_diff].content.startswith(f"[snipped: identical to the later output of call {log}")
    assert res[newer].content.endswith("changed!!") and res[log].content == diff


def test_explicit_snip_removes_pairs_and_leaves_a_marker(tmp_path):
    c = Convo().user("start")
    c.tool("Read", {"file_path": "/a"}, "aaa")
    target_call_msg = c.messages[-2].id
    c.say("middle")
    c.user("continue")
    c.say("end")
    session = Session.open(tmp_path / "s")
    session.prepare(c.messages)
    session.snip([target_call_msg], "irrelevant exploration")
    view = session.prepare(c.messages).messages
    assert not pairing_problems(view)
    marker = next(m for m in view if m.origin is Origin.SNIP_MARKER)
    assert target_call_msg in marker.text and "irrelevant exploration" in marker.text
    assert target_call_msg not in {m.id for m in view}
    assert session.original(target_call_msg).id == target_call_msg


# --- microcompact ------------------------------------------------------------------------------

def _exploring_session(steps: int, size: int) -> Convo:
    c = Convo().user("refactor the module")
    for i in range(steps):
        c.tool("Bash", {"command": f"python step{i}.py"}, words(size, seed=i))
        c.say(f"step {i} done")
    return c


def test_microcompact_clears_old_results_keeps_recent_and_returns_cache_edits():
    c = _exploring_session(30, 4_000)
    prepared = compact(c.messages, microcompact={"trigger_tokens": 50_000, "protect_tokens": 10_000})
    mc = next(s for s in prepared.report.stages if s.name == "microcompact")
    assert mc.items > 0 and not mc.skipped
    res = list(results(prepared.messages).values())
    cleared = [r for r in res if r.content.startswith("[Old tool result content cleared: ")]
    assert cleared and set(prepared.cache_edits) == {r.call_id for r in cleared}
    keep = Config().microcompact.keep_recent
    assert all(not r.content.startswith("[Old") for r in res[-keep:])
    assert "tokens, artifact " in cleared[0].content


def test_microcompact_needs_clear_at_least():
    c = _exploring_session(30, 4_000)
    prepared = compact(c.messages, microcompact={"trigger_tokens": 50_000, "clear_at_least": 10_000_000})
    mc = next(s for s in prepared.report.stages if s.name == "microcompact")
    assert "below clear_at_least" in mc.skipped


def test_microcompact_cold_cache_trigger(tmp_path):
    c = _exploring_session(12, 1_000)
    session = Session.open(tmp_path / "s")
    warm = session.prepare(c.messages, now=1000.0)
    assert next(s for s in warm.report.stages if s.name == "microcompact").skipped
    c.user("back after lunch")
    cold = session.prepare(c.messages, now=1000.0 + 3600)
    mc = next(s for s in cold.report.stages if s.name == "microcompact")
    assert mc.details.get("trigger") == "cache_cold" and mc.items == 12 - Config().microcompact.keep_recent


def test_microcompact_excludes_skill_and_memory_tools():
    c = Convo().user("go")
    skill = c.tool("Skill", {"skill": "pdf"}, words(6_000, seed=1))
    for i in range(12):
        c.tool("Read", {"file_path": f"/r/{i}.py"}, words(3_000, seed=10 + i))
    c.say("done")
    view = compact(c.messages, microcompact={"trigger_tokens": 10_000, "protect_tokens": 0, "clear_at_least": 0}).messages
    res = results(view)
    assert not res[skill].content.startswith("[Old")
    assert sum(r.content.startswith("[Old") for r in res.values()) == 12 - Config().microcompact.keep_recent



def test_microcompact_leaves_a_result_of_a_few_lines_where_clearing_saves_little():
    c = Convo().user("back the repository up, then clean it")
    listing = "-rw-r--r--  1 m  staff    13M Jan 12 12:05 backup-20260112-120532.tar.gz"
    short = c.tool("Bash", {"command": "ls -lh backup-*.tar.gz"}, listing)
    for i in range(12):
        c.tool("Read", {"file_path": f"/r/{i}.py"}, words(3_000, seed=10 + i))
    c.say("done")
    view = compact(c.messages, microcompact={"trigger_tokens": 10_000, "protect_tokens": 0, "clear_at_least": 0}).messages
    res = results(view)
    assert 30 < TokenCounter().text(listing) < 60  # cleared before: the placeholder saved ~10 tokens
    assert res[short].content == listing
    assert sum(r.content.startswith("[Old") for r in res.values()) == 12 - Config().microcompact.keep_recent

# --- collapse ----------------------------------------------------------------------------------

def test_collapse_folds_exploration_spans_into_digest_lines():
    c = Convo().user("understand the code")
    for i in range(20):
        c.tool("Grep" if i % 2 else "Read", {"pattern": f"def f{i}"} if i % 2 else {"file_path": f"/r/m{i}.py"},
               words(2_400, seed=i))
    c.say("now I understand")
    # Compaction only at the threshold: an economic one would summarize the digest away at once.
    prepared = compact(c.messages, window=60_000, max_output=5_000, autocompact_buffer=5_000,
                       microcompact={"trigger_tokens": 10_000_000}, autocompact={"economic_from": 1.0})
    col = next(s for s in prepared.report.stages if s.name == "collapse")
    assert col.items >= 1
    digest = next(m for m in prepared.messages if m.origin is Origin.COLLAPSE)
    assert digest.text.startswith("<collapsed id=") and "- Read /r/m0.py -> 1 lines:" in digest.text
    assert prepared.report.tokens_after <= 45_000
    assert not pairing_problems(prepared.messages)


# --- autocompact -------------------------------------------------------------------------------

def test_autocompact_writes_boundary_summary_and_keeps_a_paired_tail():
    c = Convo().system("You are a coding agent.").user("Implement the parser. Never touch migrations/.")
    for i in range(40):
        c.tool("Bash", {"command": f"make step{i}"}, words(5_000, seed=i))
        c.say(f"step {i}")
    c.user("now add tests")
    c.say("adding tests")
    prepared = compact(c.messages, microcompact={"trigger_tokens": 10_000_000})
    view = prepared.messages
    assert view[0].role == "system" and view[0].text == "You are a coding agent."
    assert view[1].origin is Origin.BOUNDARY and view[2].origin is Origin.SUMMARY
    assert view[2].text.startswith("This session is being continued")
    assert "Never touch migrations/." in view_text(view)
    assert prepared.report.boundary["trigger"] == "auto"
    assert prepared.report.tokens_after <= 40_000
    assert not pairing_problems(view)


def test_manual_compact_with_instructions_under_a_small_target(tmp_path):
    c = Convo().user("Build the CLI")
    for i in range(10):
        c.tool("Read", {"file_path": f"/src/m{i}.py"}, words(800, seed=i))
    c.say("ok")
    session = Session.open(tmp_path / "s", post_compact_target_tokens=4_000)
    prepared = session.compact(c.messages, instructions="focus on the CLI flags")
    assert prepared.report.boundary["trigger"] == "manual"
    assert prepared.report.tokens_after <= 4_000
    assert "focus on the CLI flags" in view_text(prepared.messages)


def test_compaction_is_sticky_across_calls(tmp_path):
    c = Convo().user("long job")
    for i in range(45):
        c.tool("Bash", {"command": f"job {i}"}, words(4_500, seed=i))
    session = Session.open(tmp_path / "s", microcompact={"trigger_tokens": 10_000_000})
    first = session.prepare(c.messages)
    assert first.report.boundary
    c.say("continuing")
    second = session.prepare(c.messages)
    assert second.report.boundary is None
    assert second.messages[: len(first.messages)] == first.messages


@pytest.mark.parametrize("stage", ["budget", "snip", "microcompact", "collapse", "autocompact"])
def test_every_stage_reports(stage):
    c = Convo().user("hi")
    c.say("hello")
    prepared = compact(c.messages)
    names = [s.name for s in prepared.report.stages]
    assert stage in names
    rep = next(s for s in prepared.report.stages if s.name == stage)
    assert rep.tokens_before >= rep.tokens_after and rep.skipped
