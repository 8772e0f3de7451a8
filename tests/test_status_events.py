"""Status events: validation on construction and the JSON form a session persists."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.status import (Cleared, EnvironmentChanged, FilesTouched, PermissionsChanged,
                                RepositoryChanged, ResourcesChanged, StatusEventError, TaskUpdated,
                                TodoItem, ToolFinished, ToolStarted, VerificationFinished,
                                event_from_json, event_to_json)

SAMPLES = [
    ToolStarted("c1", "Grep", kind="grep", target="signature", message_id="m1"),
    ToolFinished("c1", "Grep", kind="grep", ok=False, artifact="art-1", output_hash="abc",
                 result_hashes=("h1", "h2"), source="transcript", message_id="m2", at=12.5),
    EnvironmentChanged(cwd="/repo/services/payment", platform="linux", shell="bash", time="2026-10-14"),
    RepositoryChanged(branch="fix/signature", changed_files=("a.py", "b.py"), last_commit="abc123 fix",
                      freshness="session_start"),
    FilesTouched(paths=("a.py",)),
    VerificationFinished("pytest", passed=41, failed=1, skipped=2, failing=("test_invalid_signature",),
                         artifact="artifacts/tests/run-018.log", command="pytest -q"),
    TaskUpdated(goal="fix payment callback signature", stage="testing",
                todos=(TodoItem("read callback", "completed"), TodoItem("fix check", "in_progress")),
                next_action="fix test_invalid_signature"),
    ResourcesChanged(tokens_used=120_000, token_limit=200_000, tool_call_limit=10, cost_usd=1.25,
                     cost_limit_usd=5.0),
    PermissionsChanged(sandbox="workspace-write", approvals="on-request", approved=("npm test",),
                       writable_dirs=("/repo",), network="disabled"),
    Cleared("permissions", fields=("approved",)),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_every_event_round_trips_through_json_text(event):
    data = json.loads(json.dumps(event_to_json(event)))
    assert data["type"] == event.type
    assert event_from_json(data) == event


def test_unset_fields_are_left_out_of_the_json():
    data = event_to_json(EnvironmentChanged(cwd="/repo"))
    assert data == {"type": "environment_changed", "source": "harness", "freshness": "current",
                    "cwd": "/repo"}


def test_lists_become_tuples_so_equal_events_compare_equal():
    assert FilesTouched(paths=["a.py"]) == FilesTouched(paths=("a.py",))
    assert TaskUpdated(todos=[TodoItem("x")]).todos == (TodoItem("x"),)


@pytest.mark.parametrize("make, problem", [
    (lambda: VerificationFinished("pytest", passed=-1), "passed"),
    (lambda: VerificationFinished("Not A Name"), "runner"),
    (lambda: ToolFinished("c1", "Bash", ok="yes"), "ok must be a boolean"),
    (lambda: TaskUpdated(todos=[TodoItem("x", "doing")]), "status"),
    (lambda: EnvironmentChanged(cwd=3), "cwd"),
    (lambda: Cleared("signals"), "section"),
    (lambda: ToolStarted("c1", "Bash", source="model"), "source"),
    (lambda: RepositoryChanged(freshness="stale"), "freshness"),
    (lambda: ResourcesChanged(cost_usd=-1.0), "cost_usd"),
])
def test_malformed_events_are_refused_with_the_problem_named(make, problem):
    with pytest.raises(StatusEventError, match=problem):
        make()


@pytest.mark.parametrize("record, problem", [
    ({"type": "nope"}, "unknown event type 'nope'"),
    ({"type": "tool_started", "call_id": "c", "name": "Bash", "colour": "red"}, "unknown field"),
    ({"type": "tool_started", "name": "Bash"}, "call_id"),
    ({"type": "task_updated", "todos": [{"content": "x", "status": "later"}]}, "status"),
    ("not an object", "not an object"),
])
def test_bad_persisted_records_name_the_record_and_the_problem(record, problem):
    with pytest.raises(StatusEventError, match=problem) as info:
        event_from_json(record, record="17")
    assert "event record 17" in str(info.value)


_text = st.text(max_size=40)


@settings(max_examples=60, deadline=None)
@given(call_id=_text, name=_text, ok=st.booleans(), hashes=st.none() | st.lists(_text, max_size=5),
       passed=st.integers(0, 10_000), failing=st.lists(_text, max_size=4))
def test_round_trip_holds_for_arbitrary_values(call_id, name, ok, hashes, passed, failing):
    for event in (ToolFinished(call_id, name, ok=ok, result_hashes=hashes),
                  VerificationFinished("go", passed=passed, failing=failing, command=name)):
        assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event
