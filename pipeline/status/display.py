"""How each field reads on the bar, as plain text (render.py escapes it).

Diff compares these strings, not raw values: a token count that moves by a few hundred displays
the same and so publishes nothing, which keeps the bar from changing on every call.
"""

from __future__ import annotations

from typing import Any

from .snapshot import Field

# Longest value shown; longer ones (a goal, a commit message) are cut with an ellipsis. The full
# value stays in the snapshot.
MAX_VALUE_CHARS = 120
# Lists shown inline (changed files, tools by count, approved prefixes): the first few, then "+N".
MAX_LIST_ITEMS = 5
MAX_TOOLS_SHOWN = 4
# Todo lines shown: every item in progress, then this many pending ones; completed ones as a count.
MAX_PENDING_TODOS = 5

# Granularity of counts that change on nearly every call (see _tokens and _calls).
COARSE_TOKENS = 20_000
TOKEN_STEP = 5_000
COARSE_CALLS = 20
# Kept in the snapshot (JSON, CLI table) but not shown to the model: the per-tool tally changes on
# every call and does not change what the agent should do next.
HIDDEN_FIELDS = frozenset({("tools", "by_tool")})

_TODO_MARK = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
# Control characters, lone surrogates (truncated tool output) and non-characters: none is valid
# in XML text, and a lone surrogate cannot even be encoded as UTF-8.
_CONTROL: dict[int, None] = dict.fromkeys([*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0xd800, 0xe000),
                                           0xfffe, 0xffff])
# Multi-line fields render as an element body, one item per line; the rest are attributes.
BLOCK_FIELDS = frozenset({("task", "todos")}) | {("signals", n) for n in
                                                  ("fix_verification", "change_approach",
                                                   "stop_searching", "wrap_up")}


def bar_text(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """Text for one field of the bar: whitespace collapsed, control characters dropped, cut to `limit`
    characters (with an ellipsis)."""
    # Printable ASCII (most text) holds none of them: nothing to translate.
    text = " ".join((text if text.isascii() and text.isprintable() else text.translate(_CONTROL)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tokens(n: int) -> str:
    """Token counts in thousands, to the nearest 5k above 20k: precise enough to decide, coarse
    enough that one more tool result does not change the bar (and publish a delta) every call."""
    if n < 1000:
        return str(n)
    step = TOKEN_STEP if n >= COARSE_TOKENS else 1000
    return f"{round(n / step) * step // 1000}k"


def _calls(n: int) -> str:
    """Call counts exact while small, then to the ten below ("110+"), for the same reason."""
    return str(n) if n < COARSE_CALLS else f"{n // 10 * 10}+"


def _listing(items: list[str]) -> str:
    shown = [bar_text(i, 80) for i in items[:MAX_LIST_ITEMS]]
    more = len(items) - MAX_LIST_ITEMS
    return ", ".join(shown) + (f" +{more} more" if more > 0 else "")


def _run(value: dict[str, Any]) -> str:
    text = f"{value['passed']} passed, {value['failed']} failed"
    if value["skipped"]:
        text += f", {value['skipped']} skipped"
    if value["failing"]:
        text += f"; failing: {_listing(value['failing'])}"
    if value.get("artifact"):
        text += f"; log: {value['artifact']}"
    return bar_text(text, 2 * MAX_VALUE_CHARS)


def _todos(items: list[dict[str, str]]) -> str:
    done = sum(1 for t in items if t["status"] == "completed")
    active = [t for t in items if t["status"] == "in_progress"]
    pending = [t for t in items if t["status"] == "pending"]
    lines = [f"{_TODO_MARK[t['status']]} {bar_text(t['content'], 120)}"
             for t in active + pending[:MAX_PENDING_TODOS]]
    if len(pending) > MAX_PENDING_TODOS:
        lines.append(f"[ ] +{len(pending) - MAX_PENDING_TODOS} more pending")
    if done:
        lines.append(f"[x] {done} of {len(items)} done")
    return "\n".join(lines)


def shown(section: str, name: str) -> bool:
    """Whether the model sees this field at all (diff and render skip the others)."""
    return (section, name) not in HIDDEN_FIELDS


def display(section: str, name: str, field: Field) -> str:
    """The text for this field (freshness included when it is not current); `shown` says whether
    it goes on the bar or only into the JSON and the CLI table."""
    v = field.value
    if section == "verification":
        text = _run(v)
    elif (section, name) == ("task", "todos"):
        text = _todos(v)
    elif name == "by_tool":
        listed = ", ".join(f"{n} {c}" for n, c in v[:MAX_TOOLS_SHOWN])
        text = listed + (" …" if len(v) > MAX_TOOLS_SHOWN else "")
    elif name in ("tokens_used", "token_limit", "tokens_left"):
        text = _tokens(v)
    elif (section, name) == ("tools", "calls"):
        text = _calls(v)
    elif name in ("cost_usd", "cost_limit_usd"):
        text = f"${v:.2f}"
    elif name == "changed_files":
        text = f"{len(v)}: {_listing(v)}" if v else "none"
    elif isinstance(v, list):
        text = _listing(v)
    elif isinstance(v, str):
        text = bar_text(v) if (section, name) not in BLOCK_FIELDS else bar_text(v, 2 * MAX_VALUE_CHARS)
    else:
        text = str(v)
    if field.freshness == "session_start":
        text += " (as of session start)"
    return text


def attr_name(name: str) -> str:
    """Field names as attribute names: `next_action` -> `next-action`."""
    return name.replace("_", "-")
