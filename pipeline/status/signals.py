"""Control signals: conclusions computed from the snapshot so the model does not recount events.

Each rule reads only snapshot fields and yields one `signals.<rule>` field whose message id is the
message of the fact that triggered it.
"""

from __future__ import annotations

from typing import Mapping

from .snapshot import Field

# Seed 000's example: after two searches in a row that found nothing new, stop widening the
# search and read what was found.
SEARCH_STREAK_LIMIT = 2
# Three failures in a row means retrying the same thing is not working.
FAILURE_STREAK_LIMIT = 3
# Under a fifth of any budget left there is room to finish cleanly, not to start new work.
BUDGET_LOW_FRACTION = 0.2
# Failing test names quoted in the signal: enough to name the target, short enough for the bar.
MAX_NAMED_FAILURES = 2

Sections = Mapping[str, Mapping[str, Field]]


def _computed(text: str, trigger: Field) -> Field:
    return Field(text, "computed", trigger.message_id)


def _fix_verification(sections: Sections) -> Field | None:
    failing = [(runner, f) for runner, f in sections.get("verification", {}).items()
               if f.value["failed"] > 0]
    if not failing:
        return None
    parts = []
    for runner, f in failing:
        names = f.value["failing"][:MAX_NAMED_FAILURES]
        parts.append(f"{runner} {f.value['failed']} failing" + (f" ({', '.join(names)})" if names else ""))
    return _computed("; ".join(parts) + ": fix before moving on", failing[0][1])


def _change_approach(sections: Sections) -> Field | None:
    streak = sections.get("tools", {}).get("failure_streak")
    if streak is None or streak.value < FAILURE_STREAK_LIMIT:
        return None
    return _computed(f"{streak.value} tool failures in a row: change approach instead of retrying",
                     streak)


def _stop_searching(sections: Sections) -> Field | None:
    streak = sections.get("tools", {}).get("search_streak")
    if streak is None or streak.value < SEARCH_STREAK_LIMIT:
        return None
    return _computed(f"{streak.value} searches in a row found nothing new: read what was already "
                     "found instead of searching again", streak)


def _budget_fractions(resources: Mapping[str, Field]) -> list[tuple[str, float, Field]]:
    """(name, fraction left, field) for each budget whose limit is known."""
    out = []
    for name, left_key, limit_key in (("tokens", "tokens_left", "token_limit"),
                                      ("tool calls", "tool_calls_left", "tool_call_limit")):
        left, limit = resources.get(left_key), resources.get(limit_key)
        if left is not None and limit is not None and limit.value > 0:
            out.append((name, left.value / limit.value, left))
    cost, cost_limit = resources.get("cost_usd"), resources.get("cost_limit_usd")
    if cost is not None and cost_limit is not None and cost_limit.value > 0:
        out.append(("cost", max(cost_limit.value - cost.value, 0) / cost_limit.value, cost))
    return out


def _wrap_up(sections: Sections) -> Field | None:
    low = [(n, frac, f) for n, frac, f in _budget_fractions(sections.get("resources", {}))
           if frac < BUDGET_LOW_FRACTION]
    if not low:
        return None
    what = ", ".join(f"{n} {int(frac * 100)}% left" for n, frac, _ in low)
    return _computed(f"budget low ({what}): wrap up, report progress and next steps", low[0][2])


# Render order of the signals section.
RULES = (("fix_verification", _fix_verification), ("change_approach", _change_approach),
         ("stop_searching", _stop_searching), ("wrap_up", _wrap_up))


def compute_signals(sections: Sections) -> dict[str, Field]:
    """The signals that fire for these sections, in `RULES` order."""
    out: dict[str, Field] = {}
    for name, rule in RULES:
        field = rule(sections)
        if field is not None:
            out[name] = field
    return out
