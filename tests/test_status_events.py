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


# Values of every JSON-ish shape a harness or a damaged record could put in a field.
_any_value = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
                       st.just(""), _text, st.lists(_text, max_size=2), st.tuples(_text),
                       st.tuples(st.integers()), st.just(("a", 1)))


def _str(v):
    return isinstance(v, str)


def _opt_str(v):
    return v is None or isinstance(v, str)


def _opt_count(v):
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)


def _opt_amount(v):
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0)


def _opt_strs(v):
    return v is None or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))


# The field rules the common events are checked against (their well-formed case is one expression, the
# named checks run only when it fails: both must accept exactly what these rules accept).
_RULES = {
    ToolStarted: {"call_id": _str, "name": _str, "kind": _str, "target": _str},
    ToolFinished: {"call_id": _str, "name": _str, "kind": _str, "ok": lambda v: isinstance(v, bool),
                   "artifact": _opt_str, "output_hash": _opt_str, "result_hashes": _opt_strs},
    ResourcesChanged: {"tokens_used": _opt_count, "token_limit": _opt_count, "tool_call_limit": _opt_count,
                       "cost_usd": _opt_amount, "cost_limit_usd": _opt_amount},
    TaskUpdated: {"goal": _opt_str, "request": _opt_str, "stage": _opt_str, "next_action": _opt_str},
}
_COMMON = {"source": lambda v: v in ("harness", "transcript"), "freshness": lambda v: v in ("current", "session_start"),
           "message_id": _opt_str, "at": _opt_amount}


@settings(max_examples=300, deadline=None)
@given(cls=st.sampled_from(sorted(_RULES, key=lambda c: c.type)), data=st.data())
def test_an_event_is_made_exactly_when_every_field_follows_its_rule(cls, data):
    rules = {**_COMMON, **_RULES[cls]}
    # Every field well formed but one or two drawn from any shape (a valid value for the rest would
    # rarely be drawn at random, and a check skipped on the fast path shows only when the rest pass).
    values = {name: {"source": "transcript", "freshness": "current", "ok": True}.get(name, "x" if rule("x") else None)
              for name, rule in rules.items()}
    assert all(rule(values[name]) for name, rule in rules.items())
    for name in data.draw(st.lists(st.sampled_from(sorted(rules)), min_size=1, max_size=2, unique=True)):
        values[name] = data.draw(_any_value, label=name)
    if cls is ToolFinished and isinstance(values["result_hashes"], (list, tuple)):
        values["result_hashes"] = type(values["result_hashes"])(values["result_hashes"])
    valid = all(rule(values[name]) for name, rule in rules.items())
    try:
        event = cls(**values)
    except StatusEventError:
        assert not valid
    else:
        assert valid
        if cls is ToolFinished and values["result_hashes"] is not None:
            assert event.result_hashes == tuple(values["result_hashes"])  # a list is kept as a tuple
