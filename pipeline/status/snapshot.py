"""The status snapshot: what the bar shows, each field with its source and freshness.

`reducer.reduce(events)` is a pure function of the event log (the incremental form is `StatusReducer`).
`validate` checks a snapshot against the schema below; a persisted snapshot that fails it is
refused on load rather than shown to the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .events import FRESHNESS, SECTIONS, TODO_STATUSES, StatusError

# A field's source: the harness said it, it was derived from the transcript, or (signals) it was
# computed from other fields.
FIELD_SOURCES = ("harness", "transcript", "computed")


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_amount(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def _is_strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_todos(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(t, dict) and set(t) == {"content", "status"} and isinstance(t["content"], str)
        and t["status"] in TODO_STATUSES for t in v)


def _is_tally(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and _is_count(p[1]) for p in v)


def _is_run(v: Any) -> bool:
    return (isinstance(v, dict) and {"passed", "failed", "skipped", "failing"} <= set(v)
            <= {"passed", "failed", "skipped", "failing", "command", "artifact"}
            and all(_is_count(v[k]) for k in ("passed", "failed", "skipped"))
            and _is_strs(v["failing"])
            and all(isinstance(v.get(k, ""), str) for k in ("command", "artifact")))


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str), "count": _is_count, "amount": _is_amount,
    "strs": _is_strs, "todos": _is_todos, "tally": _is_tally, "run": _is_run,
}

# Field order within each section is the render order. Verification fields are named after the
# runner (pytest, jest, ...), so that section has no fixed names: every field there is a "run".
SCHEMA: dict[str, dict[str, str]] = {
    "task": {"goal": "str", "request": "str", "stage": "str", "next_action": "str", "todos": "todos"},
    "environment": {"cwd": "str", "platform": "str", "shell": "str", "time": "str"},
    "repository": {"branch": "str", "changed_files": "strs", "last_commit": "str"},
    "tools": {"calls": "count", "by_tool": "tally", "failures": "count", "failure_streak": "count",
              "last_failure": "str", "repeated": "count", "search_streak": "count", "jobs": "strs"},
    "verification": {},
    "resources": {"tokens_used": "count", "token_limit": "count", "tokens_left": "count",
                  "tool_call_limit": "count", "tool_calls_left": "count", "cost_usd": "amount",
                  "cost_limit_usd": "amount"},
    "permissions": {"approvals": "str", "sandbox": "str", "network": "str", "writable_dirs": "strs",
                    "approved": "strs"},
    "signals": {"fix_verification": "str", "change_approach": "str", "stop_searching": "str",
                "wrap_up": "str"},
}


def field_kind(section: str, name: str) -> str | None:
    """The value type a field must have, or None when the section has no such field."""
    if section == "verification":
        return "run"
    return SCHEMA.get(section, {}).get(name)


@dataclass(frozen=True)
class Field:
    """One value on the bar, with where it came from (and which message) and how fresh it is."""

    value: Any
    source: str
    message_id: str | None = None
    freshness: str = "current"

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "message_id": self.message_id,
                "freshness": self.freshness}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Field":
        return cls(data.get("value"), data.get("source", ""), data.get("message_id"),
                   data.get("freshness", "current"))


@dataclass(frozen=True)
class Snapshot:
    """Sections in `SECTIONS` order, fields in `SCHEMA` order; empty sections are absent."""

    sections: Mapping[str, Mapping[str, Field]]

    def field(self, section: str, name: str) -> Field | None:
        return self.sections.get(section, {}).get(name)

    def value(self, section: str, name: str, default: Any = None) -> Any:
        f = self.field(section, name)
        return default if f is None else f.value

    @property
    def is_empty(self) -> bool:
        return not any(self.sections.values())

    @property
    def signals(self) -> Mapping[str, Field]:
        return self.sections.get("signals", {})

    def to_json(self) -> dict[str, Any]:
        return {"sections": {s: {n: f.to_json() for n, f in fs.items()}
                             for s, fs in self.sections.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Snapshot":
        """Rebuild and validate; raises StatusError naming the first problem."""
        try:
            raw = data["sections"]
            snap = cls({s: {n: Field.from_json(f) for n, f in fs.items()} for s, fs in raw.items()})
        except (KeyError, TypeError, AttributeError) as exc:
            raise StatusError(f"snapshot record: malformed ({exc!r})") from None
        problems = validate(snap)
        if problems:
            raise StatusError(f"snapshot record: {problems[0]}")
        return snap


EMPTY = Snapshot({})


def validate(snapshot: Snapshot) -> tuple[str, ...]:
    """Every way `snapshot` breaks the schema, as `section.field: problem` lines (empty: valid)."""
    problems: list[str] = []
    for section, fields in snapshot.sections.items():
        if section not in SECTIONS:
            problems.append(f"{section}: unknown section")
            continue
        for name, f in fields.items():
            where = f"{section}.{name}"
            kind = field_kind(section, name)
            if kind is None:
                problems.append(f"{where}: unknown field")
            elif not _CHECKS[kind](f.value):
                problems.append(f"{where}: value {f.value!r} is not a {kind}")
            if f.source not in FIELD_SOURCES:
                problems.append(f"{where}: source {f.source!r} is not one of {FIELD_SOURCES}")
            if f.freshness not in FRESHNESS:
                problems.append(f"{where}: freshness {f.freshness!r} is not one of {FRESHNESS}")
            if f.message_id is not None and not isinstance(f.message_id, str):
                problems.append(f"{where}: message_id must be a string")
    return tuple(problems)
