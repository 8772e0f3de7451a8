"""Forgetting probes: facts that mattered before a compaction, and the JSON file that holds them.

A probe file is `{"transcript": optional path, "probes": [{"id", "category", "needles", "match",
"established_at", "note"}]}`. Loading validates every probe and names the file
and the probe's index in any error, so a hand-edited file is easy to fix.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..core.errors import FormatError, WorksurfaceError
from ..core import strictjson
from ..core.fileio import atomic_write, read_text

CATEGORIES: tuple[str, ...] = ("request", "constraint", "negative", "artifact", "recent", "plan",
                               "status", "tools")
EXACT = "exact"
_FUZZY = re.compile(r"^fuzzy:(\d{1,3})$")
_PROBE_KEYS = frozenset({"id", "category", "needles", "match", "established_at", "note"})


class ProbeError(WorksurfaceError):
    """A probe run that cannot be done as asked (no compact boundary to cut at, cut out of range)."""


@dataclass(frozen=True)
class Probe:
    """One fact: retained by a view when every needle is visible in it under `match`."""

    id: str
    category: str
    needles: tuple[str, ...]
    match: str = EXACT
    established_at: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.needles, list):
            object.__setattr__(self, "needles", tuple(self.needles))
        problem = _probe_problem(self)
        if problem:
            raise ValueError(f"probe {self.id!r}: {problem}")

    @property
    def threshold(self) -> int | None:
        """The rapidfuzz partial_ratio a fuzzy needle needs, or None for an exact probe."""
        m = _FUZZY.match(self.match)
        return int(m.group(1)) if m else None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "category": self.category, "needles": list(self.needles),
                             "match": self.match}
        if self.established_at is not None:
            d["established_at"] = self.established_at
        if self.note is not None:
            d["note"] = self.note
        return d


@dataclass
class ProbeSet:
    """The probes of one file, with the transcript they were written for and any other top-level keys
    (kept so that a load/save round trip does not drop a hand-written `cut` or `labeled` note)."""

    probes: list[Probe]
    transcript: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Probe]:
        return iter(self.probes)

    def __len__(self) -> int:
        return len(self.probes)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.transcript is not None:
            d["transcript"] = self.transcript
        d.update(self.extra)
        d["probes"] = [p.to_json() for p in self.probes]
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = ()) -> None:
        """Write atomically (temp file then rename), so a reader never sees half a file; no more readable
        than `inputs`, the transcripts the probes quote."""
        atomic_write(path, self.dumps(), inputs=inputs)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "ProbeSet":
        return cls.loads(read_text(path, "probe file"), str(path))

    @classmethod
    def loads(cls, text: str, path: str | None = None) -> "ProbeSet":
        try:
            data = strictjson.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None
        except strictjson.UnreadableNumber as exc:
            raise strictjson.number_error(exc, text, path) from None
        return cls.from_json(data, path)

    @classmethod
    def from_json(cls, data: Any, path: str | None = None) -> "ProbeSet":
        if not isinstance(data, dict):
            raise FormatError("a probe file is a JSON object with a 'probes' list", path=path)
        raw = data.get("probes")
        if not isinstance(raw, list):
            raise FormatError("'probes' must be a list", path=path)
        transcript = data.get("transcript")
        if transcript is not None and not isinstance(transcript, str):
            raise FormatError("'transcript' must be a string path", path=path)
        probes: list[Probe] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            probe = _probe_from_json(item, path, i)
            if probe.id in seen:
                raise FormatError(f"duplicate probe id {probe.id!r}", path=path, record=f"probes[{i}]")
            seen.add(probe.id)
            probes.append(probe)
        extra = {k: v for k, v in data.items() if k not in ("probes", "transcript")}
        return cls(probes, transcript, extra)

    @classmethod
    def of(cls, probes: "ProbeSet | Iterable[Probe] | str | os.PathLike[str]") -> "ProbeSet":
        """A probe set from a set, a list of probes, or a probe file's path."""
        if isinstance(probes, ProbeSet):
            return probes
        if isinstance(probes, (str, os.PathLike)):
            return cls.load(probes)
        return cls(list(probes))


def _probe_from_json(item: Any, path: str | None, index: int) -> Probe:
    where = f"probes[{index}]"
    if not isinstance(item, Mapping):
        raise FormatError("a probe must be a JSON object", path=path, record=where)
    unknown = sorted(set(item) - _PROBE_KEYS)
    if unknown:
        raise FormatError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_PROBE_KEYS))})",
                          path=path, record=where)
    if "id" not in item:
        raise FormatError("missing 'id'", path=path, record=where)
    try:
        return Probe(id=item["id"], category=item.get("category"),  # type: ignore[arg-type]
                     needles=item.get("needles"),  # type: ignore[arg-type]
                     match=item.get("match", EXACT), established_at=item.get("established_at"),
                     note=item.get("note"))
    except ValueError as exc:
        raise FormatError(str(exc), path=path, record=where) from None


def _probe_problem(p: Probe) -> str | None:
    """What is wrong with a probe, or None: one rule per field, worded for someone editing the file."""
    if not isinstance(p.id, str) or not p.id.strip():
        return "'id' must be a non-empty string"
    if p.category not in CATEGORIES:
        return f"category {p.category!r} is not one of {', '.join(CATEGORIES)}"
    if not isinstance(p.needles, tuple) or not p.needles:
        return "'needles' must be a non-empty list of strings"
    if not all(isinstance(n, str) and n.strip() for n in p.needles):
        return "every needle must be a non-empty string"
    if not isinstance(p.match, str):
        return "'match' must be \"exact\" or \"fuzzy:N\""
    m = _FUZZY.match(p.match)
    if p.match != EXACT and not (m and 0 < int(m.group(1)) <= 100):
        return f"match {p.match!r} must be \"exact\" or \"fuzzy:N\" with 0 < N <= 100"
    if p.established_at is not None and not isinstance(p.established_at, str):
        return "'established_at' must be a message id string"
    if p.note is not None and not isinstance(p.note, str):
        return "'note' must be a string"
    return None
