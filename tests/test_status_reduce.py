"""The reducer: a pure function of the event log; provenance, freshness, validation and signals."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.status import (Cleared, EnvironmentChanged, Field, FilesTouched, RepositoryChanged,
                                ResourcesChanged, Snapshot, StatusError, StatusReducer, TaskUpdated,
                                TodoItem, ToolFinished, ToolStarted, VerificationFinished, reduce,
                                render, validate)


def tool(call_id: str, name: str = "Bash", *, kind: str = "shell", ok: bool = True,
         output_hash: str | None = None, results: tuple[str, ...] | None = None, target: str = "",
         message_id: str | None = None) -> list:
    return [ToolStarted(call_id, name, kind=kind, target=target, message_id=message_id),
            ToolFinished(call_id, name, kind=kind, ok=ok, output_hash=output_hash, result_hashes=results,
                         message_id=message_id)]


def grep(call_id: str, *results: str) -> list:
    return tool(call_id, "Grep", kind="grep", results=tuple(results))


LOG = [
    TaskUpdated(goal="fix the payment callback signature", message_id="m0", source="transcript"),
    EnvironmentChanged(cwd="/repo", message_id="m1", source="transcript"),
    *tool("c1", "Read", kind="read", output_hash="h-a", message_id="m2"),
    EnvironmentChanged(cwd="/repo/services/payment", message_id="m3"),
    *tool("c2", ok=False, target="pytest -q", message_id="m4"),
    VerificationFinished("pytest", passed=41, failed=1, failing=("test_invalid_signature",), message_id="m4"),
    RepositoryChanged(branch="fix/signature", freshness="session_start", message_id="m5"),
    ResourcesChanged(token_limit=200_000, tokens_used=150_000, tool_call_limit=10, message_id="m6"),
]


# ---------------------------------------------------------------------------------------- purity

def test_same_events_give_equal_snapshots_and_the_log_is_not_consumed():
    assert reduce(LOG) == reduce(list(LOG)) == reduce(iter(LOG))
    events = list(LOG)
    reduce(events)
    assert events == LOG


def test_incremental_reducer_matches_reduce_at_every_prefix():
    reducer = StatusReducer()
    for i, event in enumerate(LOG, 1):
        reducer.apply(event)
        assert reducer.snapshot() == reduce(LOG[:i])


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(0, len(LOG)), extra=st.lists(st.sampled_from(LOG + [Cleared("tools"), Cleared("task")]), max_size=6))
def test_a_fork_takes_events_as_the_whole_log_would_and_leaves_its_origin_as_it_was(cut, extra):
    # The session applies the harness's events to a fork on every call (instead of a deep copy):
    # the fork must snapshot as the whole log does, and the reducer it came from must not change,
    # tool events included (the tool log is shared until the fork changes it).
    origin = StatusReducer()
    for event in LOG[:cut]:
        origin.apply(event)
    before = origin.snapshot()
    fork = origin.fork()
    for event in extra:
        fork.apply(event)
    assert fork.snapshot() == reduce(LOG[:cut] + extra)
    assert origin.snapshot() == before == reduce(LOG[:cut])
    origin.apply(ToolStarted("c9", "Grep", kind="grep"))
    assert origin.snapshot() == reduce(LOG[:cut] + [ToolStarted("c9", "Grep", kind="grep")])


def test_snapshot_is_valid_and_round_trips_through_json():
    snap = reduce(LOG)
    assert validate(snap) == ()
    assert Snapshot.from_json(json.loads(json.dumps(snap.to_json()))) == snap


def test_fields_keep_source_message_and_freshness():
    snap = reduce(LOG)
    cwd = snap.field("environment", "cwd")
    assert (cwd.value, cwd.source, cwd.message_id, cwd.freshness) == ("/repo/services/payment", "harness",
                                                                        "m3", "current")
    goal = snap.field("task", "goal")
    assert (goal.source, goal.message_id) == ("transcript", "m0")
    assert snap.field("repository", "branch").freshness == "session_start"
    assert "fix/signature (as of session start)" in render(snap, epoch=1, seq=1, now=0)


def test_last_write_wins_for_scalars_so_order_matters_there():
    a = EnvironmentChanged(cwd="/repo")
    b = EnvironmentChanged(cwd="/repo/services/payment")
    assert reduce([a, b]).value("environment", "cwd") == "/repo/services/payment"
    assert reduce([b, a]).value("environment", "cwd") == "/repo"


_tool_events = st.lists(
    st.tuples(st.sampled_from(["Bash", "Read", "Grep"]), st.booleans(), st.sampled_from(["x", "y", "z"])),
    min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(calls=_tool_events, seed=st.randoms(use_true_random=False))
def test_counts_do_not_depend_on_event_order(calls, seed):
    events = [e for i, (name, ok, out) in enumerate(calls)
              for e in tool(f"c{i}", name, ok=ok, output_hash=out)]
    shuffled = list(events)
    seed.shuffle(shuffled)
    a, b = reduce(events), reduce(shuffled)
    for name in ("calls", "failures", "repeated", "by_tool"):
        assert a.value("tools", name) == b.value("tools", name)
    assert a.value("tools", "calls") == len(calls)
    assert a.value("tools", "failures", 0) == sum(1 for _, ok, _ in calls if not ok)


def test_a_result_reported_twice_counts_once():
    events = tool("c1", ok=False) + [ToolFinished("c1", "Bash", ok=False)]
    snap = reduce(events)
    assert (snap.value("tools", "calls"), snap.value("tools", "failures")) == (1, 1)


def test_repeated_results_count_identical_outputs_of_the_same_tool():
    events = (tool("c1", "Read", output_hash="same") + tool("c2", "Read", output_hash="same")
              + tool("c3", "Bash", output_hash="same") + tool("c4", "Read", output_hash="other"))
    assert reduce(events).value("tools", "repeated") == 1


# ----------------------------------------------------------------------------- updates, removal

def test_empty_string_removes_a_field_and_cleared_removes_fields_or_sections():
    base = [EnvironmentChanged(cwd="/repo", platform="linux"), *tool("c1")]
    assert reduce(base + [EnvironmentChanged(platform="")]).field("environment", "platform") is None
    assert reduce(base + [Cleared("environment", fields=("cwd",))]).value("environment", "platform") == "linux"
    snap = reduce(base + [Cleared("environment")])
    assert "environment" not in snap.sections
    assert "tools" not in reduce(base + [Cleared("tools")]).sections
    assert reduce(base + [Cleared("tools"), *tool("c2")]).value("tools", "calls") == 1


def test_files_touched_add_to_changed_files_and_git_status_replaces_them():
    snap = reduce([FilesTouched(paths=("b.py",)), FilesTouched(paths=("a.py", "b.py"))])
    assert snap.value("repository", "changed_files") == ["a.py", "b.py"]
    snap = reduce([FilesTouched(paths=("b.py",)), RepositoryChanged(changed_files=())])
    assert snap.value("repository", "changed_files") == []
    assert 'changed-files="none"' in render(snap, epoch=1, seq=1, now=0)


def test_todos_replace_the_list_and_an_empty_list_removes_it():
    todos = (TodoItem("read", "completed"), TodoItem("fix", "in_progress"), TodoItem("test"))
    snap = reduce([TaskUpdated(todos=todos)])
    assert [t["status"] for t in snap.value("task", "todos")] == ["completed", "in_progress", "pending"]
    text = render(snap, epoch=1, seq=1, now=0)
    assert "[>] fix\n[ ] test\n[x] 1 of 3 done" in text
    assert reduce([TaskUpdated(todos=todos), TaskUpdated(todos=())]).field("task", "todos") is None


def test_remaining_budget_is_computed_not_copied():
    events = [ResourcesChanged(tokens_used=150_000, token_limit=200_000, tool_call_limit=10),
              *tool("c1"), *tool("c2"), *tool("c3")]
    snap = reduce(events)
    assert snap.value("resources", "tokens_left") == 50_000
    assert snap.value("resources", "tool_calls_left") == 7


def test_latest_run_per_runner_is_current():
    snap = reduce([VerificationFinished("pytest", passed=41, failed=1),
                   VerificationFinished("jest", passed=3),
                   VerificationFinished("pytest", passed=42)])
    assert snap.value("verification", "pytest")["failed"] == 0
    assert list(snap.sections["verification"]) == ["jest", "pytest"]


# ------------------------------------------------------------------------------------ validation

@pytest.mark.parametrize("sections, problem", [
    ({"weather": {"sky": Field("blue", "harness")}}, "weather: unknown section"),
    ({"tools": {"calls": Field(-1, "harness")}}, "tools.calls: value -1 is not a count"),
    ({"tools": {"colour": Field(1, "harness")}}, "tools.colour: unknown field"),
    ({"environment": {"cwd": Field("/", "model")}}, "source 'model'"),
    ({"environment": {"cwd": Field("/", "harness", freshness="old")}}, "freshness 'old'"),
    ({"verification": {"pytest": Field({"passed": 1}, "harness")}}, "is not a run"),
    ({"task": {"todos": Field([{"content": "x", "status": "?"}], "harness")}}, "is not a todos"),
])
def test_validate_names_each_problem(sections, problem):
    problems = validate(Snapshot(sections))
    assert any(problem in p for p in problems), problems


def test_an_invalid_persisted_snapshot_is_refused():
    with pytest.raises(StatusError, match="tools.calls"):
        Snapshot.from_json({"sections": {"tools": {"calls": {"value": "many", "source": "harness"}}}})
    with pytest.raises(StatusError, match="malformed"):
        Snapshot.from_json({"fields": {}})


# --------------------------------------------------------------------------------------- signals

def signals(events) -> dict:
    return {n: f.value for n, f in reduce(events).signals.items()}


def test_two_searches_in_a_row_with_nothing_new_suggest_reading():
    found = grep("g1", "a.py", "b.py")
    assert "stop_searching" not in signals(found + grep("g2", "a.py"))
    fired = signals(found + grep("g2", "a.py") + grep("g3", "b.py"))
    assert fired["stop_searching"].startswith("2 searches in a row found nothing new")
    assert "stop_searching" not in signals(found + grep("g2", "a.py") + grep("g3", "c.py"))
    # Reading (acting on what was found) ends the run.
    assert "stop_searching" not in signals(found + grep("g2") + tool("r1", "Read", kind="read") + grep("g3"))


def test_searches_with_unknown_results_neither_extend_nor_break_the_run():
    unknown = tool("g9", "WebSearch", kind="search")
    assert "stop_searching" in signals(grep("g1") + unknown + grep("g2"))
    assert "stop_searching" not in signals(grep("g1") + unknown)


def test_three_failures_in_a_row_suggest_a_change_of_approach():
    fails = [e for i in range(3) for e in tool(f"f{i}", ok=False, target="mix test")]
    assert "change_approach" not in signals(fails[:4])
    assert signals(fails)["change_approach"].startswith("3 tool failures in a row")
    assert "change_approach" not in signals(fails + tool("ok1"))
    snap = reduce(fails)
    assert snap.value("tools", "last_failure") == "Bash: mix test"
    assert snap.signals["change_approach"].source == "computed"


@pytest.mark.parametrize("resources, fires", [
    (ResourcesChanged(tokens_used=170_000, token_limit=200_000), True),
    (ResourcesChanged(tokens_used=150_000, token_limit=200_000), False),
    (ResourcesChanged(tool_call_limit=2), True),      # 2 calls made below: none left
    (ResourcesChanged(tool_call_limit=20), False),
    (ResourcesChanged(cost_usd=4.5, cost_limit_usd=5.0), True),
    (ResourcesChanged(cost_usd=1.0, cost_limit_usd=5.0), False),
    (ResourcesChanged(tokens_used=190_000), False),   # no limit known: no fraction to judge
])
def test_budget_under_a_fifth_suggests_wrapping_up(resources, fires):
    fired = signals([resources, *tool("c1"), *tool("c2")])
    assert ("wrap_up" in fired) is fires
    if fires:
        assert "wrap up" in fired["wrap_up"]


def test_failing_verification_says_fix_before_moving_on_until_it_passes():
    failing = VerificationFinished("pytest", passed=41, failed=1, failing=("test_invalid_signature",),
                                   message_id="m7")
    fired = reduce([failing]).signals["fix_verification"]
    assert fired.value == "pytest 1 failing (test_invalid_signature): fix before moving on"
    assert fired.message_id == "m7"
    assert "fix_verification" not in signals([failing, VerificationFinished("pytest", passed=42)])
