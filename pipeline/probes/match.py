"""Whether a view still shows a probe's facts: the matching rules and per-category scoring.

Only what the model would read counts: the text of each message as `model.message_text` renders it.
A cleared tool result shows its placeholder, not its old content; worksurface's markers, summaries and
reinjected files are ordinary text of the view and count like anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from rapidfuzz import fuzz

from ..core.model import Message, message_text
from .model import CATEGORIES, Probe

_WHITESPACE = re.compile(r"\s+")
# Tool-call inputs are rendered as JSON, so a path or command the model saw appears with its quotes
# and newlines escaped. Folding these escapes on both sides lets a needle match either rendering.
_JSON_ESCAPE = re.compile(r'\\(["\\/nrt])')
_UNESCAPED = {'"': '"', "\\": "\\", "/": "/", "n": " ", "r": " ", "t": " "}


def normalize(text: str) -> str:
    """Case-folded, JSON escapes folded, every run of whitespace one space."""
    text = _JSON_ESCAPE.sub(lambda m: _UNESCAPED[m.group(1)], text)
    return _WHITESPACE.sub(" ", text.casefold()).strip()


def haystack(view: Sequence[Message] | str) -> str:
    """The normalized text a model reads from a view (or from text already extracted)."""
    if isinstance(view, str):
        return normalize(view)
    return normalize("\n".join(message_text(m) for m in view))


def needle_visible(needle: str, text: str, threshold: int | None = None) -> bool:
    """`needle` appears in normalized `text`: as a substring, or with `threshold` as a rapidfuzz
    partial_ratio at least that high. A text shorter than the needle is compared whole (plain ratio),
    since partial_ratio would otherwise match any fragment of the needle."""
    n = normalize(needle)
    if n in text:
        return True
    if threshold is None or not text:
        return False
    if len(text) < len(n):
        return fuzz.ratio(n, text, score_cutoff=threshold) > 0
    return fuzz.partial_ratio(n, text, score_cutoff=threshold) > 0


def retained(probe: Probe, text: str) -> bool:
    """Every needle of `probe` is visible in the normalized view text `text`."""
    return all(needle_visible(n, text, probe.threshold) for n in probe.needles)


@dataclass(frozen=True)
class Score:
    """How many probes a view retains, overall and per category (categories in the standard order)."""

    retained: tuple[Probe, ...]
    forgotten: tuple[Probe, ...]
    by_category: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.retained) + len(self.forgotten)

    @property
    def fraction(self) -> float:
        """Share of probes retained; an empty probe set counts as fully retained."""
        return len(self.retained) / self.total if self.total else 1.0

    def to_json(self) -> dict[str, object]:
        return {"retained": len(self.retained), "total": self.total,
                "by_category": {c: list(v) for c, v in self.by_category.items()},
                "forgotten": [p.id for p in self.forgotten]}


def score(view: Sequence[Message] | str, probes: Iterable[Probe]) -> Score:
    text = haystack(view)
    kept: list[Probe] = []
    lost: list[Probe] = []
    counts: dict[str, list[int]] = {}
    for probe in probes:
        hit = retained(probe, text)
        (kept if hit else lost).append(probe)
        c = counts.setdefault(probe.category, [0, 0])
        c[0] += int(hit)
        c[1] += 1
    order = {c: i for i, c in enumerate(CATEGORIES)}
    by_category = {c: (v[0], v[1]) for c, v in sorted(counts.items(), key=lambda kv: order[kv[0]])}
    return Score(tuple(kept), tuple(lost), by_category)
