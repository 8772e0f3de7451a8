"""A view's size in the two units a session keeps (COUNTED: worksurface's tokenizer; MEASURED: as the
provider measures it, from the usage the harness passes): the offset a usage figure anchors, and the
sizes a report gives."""

from __future__ import annotations

from typing import Any, Sequence

from ..core.model import Message
from ..core.sizes import COUNTED, MEASURED, plausible
from ..core.tokens import TokenCounter
from ..engine.state import StageContext, usage_outlived


def usage_offset(view: Sequence[Message], counted: int, usage: int | tuple[str, int] | None,
                 last_tail: str | None, counter: TokenCounter) -> tuple[int, list[str]]:
    """What the measured usage adds to the view's count (the anchor's figure stands for the view up
    to its message: `usage` as `(message id, tokens)`, or tokens for `last_tail`, the last message of
    the previous view), and a notice when the figure cannot be the whole request: then it is not used."""
    if usage is None:
        return 0, []
    anchor: Any = usage if isinstance(usage, tuple) else last_tail
    if isinstance(usage, int):
        anchor = (anchor, usage) if anchor else None
    if not anchor:
        return 0, []
    anchor_id, reported = anchor
    index = next((i for i in range(len(view) - 1, -1, -1) if view[i].id == anchor_id), None)
    if index is None:
        return 0, []
    upto = counted - counter.messages(view[index + 1:])
    if not isinstance(reported, int) or reported < 0 or not plausible(reported, upto):
        return 0, [f"the usage passed for message {anchor_id} ({reported!r} tokens) cannot be the whole request: "
                   f"it is under half of the {upto:,} tokens of text up to that message (only the uncached "
                   "input?); it is not used, sizes are counted"]
    return reported - upto, []


def view_sizes(ctx: StageContext, counted: int, tokens_after: int, compacted: bool, anchored: bool) -> dict[str, Any]:
    """The view's sizes before and after, counted and as the provider measures them, and which of
    the two the stages acted on (`unit`)."""
    before = counted + ctx.usage_offset
    if (compacted or usage_outlived(tokens_after, counted)) and ctx.calibration is not None:
        after = ctx.calibration.size(tokens_after)  # the anchor no longer describes the view
    else:
        after = tokens_after + ctx.usage_offset
    return {"unit": MEASURED if anchored else COUNTED,
            "before": {COUNTED: counted, MEASURED: before},
            "after": {COUNTED: tokens_after, MEASURED: max(0, after)},
            "calibration": ctx.calibration.to_json() if ctx.calibration is not None else None}
