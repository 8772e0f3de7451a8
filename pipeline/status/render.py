"""Render snapshots and diffs as an `<agent-status>` block the model reads.

One element per section: short fields as attributes, multi-line ones (todos, signals) as the
body. Every value is escaped, so text that came from tool output (a test name, a file name, a
commit message) can never close the block or open a fake one.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ..core.escape import escape_attr, escape_element_text
from .diff import Diff
from .display import BLOCK_FIELDS, attr_name, display, bar_text, shown
from .snapshot import Field, Snapshot

TAG = "agent-status"
# Explains the merge rule once per delta: without it a model may keep old and new values both.
DELTA_NOTE = "Unlisted fields are unchanged; removed fields no longer apply."
# Seed 000's wording for a status that was cleared: say so, don't fall silent.
CLEARED_NOTE = "Current runtime status: none. Earlier status snapshots no longer apply."


def _attr(text: str) -> str:
    """Attribute text on one line: what could end the value or start markup as entities (see
    core.escape); an apostrophe stays an apostrophe."""
    return escape_attr(bar_text(text, 10_000))


def _body(text: str) -> str:
    """Element text: `&` and `<` are what could start markup; `>` stays readable except in `]]>`,
    which XML does not allow in text."""
    return escape_element_text(text)


def generated_at(now: float) -> str:
    """`now` (a Unix timestamp) as ISO 8601 UTC to the second."""
    return datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _header(kind: str, epoch: int, seq: int, now: float | None, since: int | None = None) -> str:
    extra = f' since="{since}"' if since is not None else ""
    # A transcript without timestamps (SWE-agent) has no real time: say nothing rather than 1970.
    if now is not None and now > 0:
        extra += f' generated-at="{generated_at(now)}"'
    return f'<{TAG} kind="{kind}" epoch="{epoch}" seq="{seq}"{extra}>'


def _element(section: str, fields: tuple[tuple[str, Field], ...], removed: tuple[str, ...] = ()) -> str:
    attrs: list[str] = []
    body: list[str] = []
    for name, field in fields:
        text = display(section, name, field)
        if (section, name) in BLOCK_FIELDS:
            lines = text.split("\n")
            body.extend(_body(line) if section == "task" else "- " + _body(line) for line in lines)
        else:
            attrs.append(f'{attr_name(name)}="{_attr(text)}"')
    if removed:
        attrs.append(f'removed="{_attr(" ".join(attr_name(r) for r in removed))}"')
    opening = f"<{section}" + "".join(" " + a for a in attrs)
    if not body:
        return opening + "/>"
    return opening + ">\n" + "\n".join(body) + f"\n</{section}>"


def render(snapshot: Snapshot, *, epoch: int, seq: int, now: float, kind: str = "baseline") -> str:
    """The whole snapshot (a baseline, or a full snapshot for append and replace)."""
    lines = [_header(kind, epoch, seq, now)]
    for section, fields in snapshot.sections.items():
        visible = tuple((n, f) for n, f in fields.items() if shown(section, n))
        if visible:
            lines.append(_element(section, visible))
    lines.append(f"</{TAG}>")
    return "\n".join(lines)


def render_delta(d: Diff, *, epoch: int, seq: int, since: int, now: float) -> str:
    """Only what changed since publication `since`, with removed fields named."""
    lines = [_header("delta", epoch, seq, now, since), DELTA_NOTE]
    lines.extend(_element(s.name, s.changed, s.removed) for s in d.sections)
    lines.append(f"</{TAG}>")
    return "\n".join(lines)


def render_cleared(*, epoch: int, seq: int, now: float) -> str:
    """The explicit marker for a status that went from something to nothing."""
    return f"{_header('cleared', epoch, seq, now)}\n{CLEARED_NOTE}\n</{TAG}>"
