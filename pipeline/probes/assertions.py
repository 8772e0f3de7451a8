"""`assert_retains`: the check a harness author puts in a test, with a readable list of what was lost."""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

from ..core.model import Message
from .match import Score, score
from .model import Probe, ProbeSet


def assert_retains(view: Sequence[Message] | Any, probes: ProbeSet | Iterable[Probe] | str | os.PathLike[str],
                   min_fraction: float = 1.0) -> Score:
    """Fail unless `view` (a list of messages, or anything with `.messages` such as a `Prepared`)
    retains at least `min_fraction` of `probes` (a probe set, probes, or a probe file's path).
    Returns the score, so a test can also look at the categories."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    messages = view.messages if hasattr(view, "messages") else view
    result = score(messages, ProbeSet.of(probes))
    if result.fraction < min_fraction:
        raise AssertionError(forgotten_report(result, min_fraction))
    return result


def forgotten_report(result: Score, min_fraction: float = 1.0) -> str:
    """One line per forgotten probe: id, category, needles and match, and the note if any."""
    lines = [f"view retains {len(result.retained)}/{result.total} probes ({result.fraction:.0%}), "
             f"needs {min_fraction:.0%}; forgotten:"]
    for p in result.forgotten:
        needles = ", ".join(repr(n) for n in p.needles)
        note = f" - {p.note}" if p.note else ""
        lines.append(f"  {p.id} [{p.category}] {needles} ({p.match}){note}")
    return "\n".join(lines)
