"""The naive harnesses the benchmark sections compare worksurface with. They live in the core
(`worksurface.probes.harnesses`) so `worksurface replay` prices the same baselines; re-exported here for the
sections that import them from the benchmarks package."""

from __future__ import annotations

from worksurface.probes.harnesses import (ClearToolUses, Harness, ObservationMasking, OpenCodePrune, SlidingWindow,
                                   SummarizeAtThreshold, Unmanaged, default_harnesses, sliding_window)

__all__ = ["ClearToolUses", "Harness", "ObservationMasking", "OpenCodePrune", "SlidingWindow",
           "SummarizeAtThreshold", "Unmanaged", "default_harnesses", "sliding_window"]
