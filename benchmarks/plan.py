"""What a run measures: the transcripts, repeat counts and sizes of `--quick` and `--full`.

`--quick` must finish in under 5 minutes on 2 cores, so it repeats less, times the per-call baselines
on a sample of the calls, and stops the scale series at 1M tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .replay import Source, default_sources, field_sources, hand_probe_files

# Post-compact targets of the retention curve: from a tight 4k to the default 20% of a 200k window.
RETENTION_TARGETS = (4_000, 10_000, 20_000, 40_000)
QUICK_SIZES = (50_000, 200_000, 1_000_000)
FULL_SIZES = (50_000, 200_000, 1_000_000, 5_000_000)
# The scale series' transcripts come from the fixture generator with this seed (same seed, same bytes).
SCALE_SEED = 7


@dataclass(frozen=True)
class Plan:
    mode: str
    sources: list[Source]
    repeats: int  # worksurface replays per transcript (per-call time: median over these)
    baseline_stride: int  # time the per-call baselines on every n-th call
    baseline_repeats: int
    scale_sizes: tuple[int, ...]
    scale_repeats: int
    targets: tuple[int, ...] = RETENTION_TARGETS
    hand_probes: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    profile: bool = True  # profile the largest scale size
    # Other users' sessions, replayed by the overhead section only, `field_repeats` times each (a
    # call's time is its median over the replays; the baselines run in the first replay only, so a
    # further replay costs just worksurface's own calls).
    field_sources: list[Source] = field(default_factory=list)
    field_repeats: int = 3
    store_sources: int | None = 1  # transcripts the store section replays on both stores (None: all)
    store_sessions: int = 20  # sessions of the concurrent store run (on 4 worker processes)
    store_calls: int | None = 6  # calls each of them replays (None: its whole transcript)
    # The cost section also replays the field sessions that have hand probes (../shared/probes/field).
    labeled_field: bool = False
    # The context window the overhead section's sessions are configured for (None: the default 200k).
    # A large one lets the views grow as far as the sessions go, where per-call work that follows the
    # view's size instead of what is new shows (the 1M windows some models offer).
    window: int | None = None

    @property
    def command(self) -> str:
        return f"python -m benchmarks --{self.mode}" + (f" --window {self.window}" if self.window else "")


def quick_plan() -> Plan:
    sources, notes = default_sources()
    field_list, field_notes = field_sources()
    return Plan("quick", sources, repeats=3, baseline_stride=4, baseline_repeats=1,
                scale_sizes=QUICK_SIZES, scale_repeats=2, hand_probes=hand_probe_files(), notes=notes + field_notes,
                labeled_field=True, field_sources=field_list, field_repeats=3)


def full_plan() -> Plan:
    sources, notes = default_sources()
    field_list, field_notes = field_sources()
    return Plan("full", sources, repeats=5, baseline_stride=1, baseline_repeats=3,
                scale_sizes=FULL_SIZES, scale_repeats=3, hand_probes=hand_probe_files(), notes=notes + field_notes,
                field_sources=field_list, field_repeats=3, store_sources=None, store_calls=None, labeled_field=True)
