"""Per-section difference between two snapshots, with explicit removal.

A field that disappears is listed as removed (it "no longer applies") rather than left out: a
delta that just omits it would let the model keep the old value. Fields compare by what they
display, so a change the model could not see publishes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .display import display, shown
from .events import SECTIONS
from .snapshot import Field, Snapshot


@dataclass(frozen=True)
class SectionDiff:
    """`changed`: fields new or shown differently now; `removed`: fields that no longer apply
    (all of them when the section itself is gone)."""

    name: str
    changed: tuple[tuple[str, Field], ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diff:
    sections: tuple[SectionDiff, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.sections

    def section(self, name: str) -> SectionDiff | None:
        return next((s for s in self.sections if s.name == name), None)


def diff(prev: Snapshot | None, cur: Snapshot) -> Diff:
    """What changed from `prev` (None: nothing shown yet) to `cur`, in section order."""
    before = prev.sections if prev is not None else {}
    out = []
    for name in SECTIONS:
        old = {f: v for f, v in before.get(name, {}).items() if shown(name, f)}
        new = {f: v for f, v in cur.sections.get(name, {}).items() if shown(name, f)}
        # The reducer keeps a field's object until it changes: the same object displays the same.
        changed = tuple((f, field) for f, field in new.items()
                        if f not in old or (old[f] is not field and display(name, f, old[f]) != display(name, f, field)))
        removed = tuple(f for f in old if f not in new)
        if changed or removed:
            out.append(SectionDiff(name, changed, removed))
    return Diff(tuple(out))
