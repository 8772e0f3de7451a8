"""Order statistics for timings (no numpy: the benchmarks need nothing beyond the library's own deps)."""

from __future__ import annotations

import math
import statistics
from typing import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def summary(values: Sequence[float]) -> dict[str, float | int]:
    """Median, p95 and count, rounded for a report."""
    return {"median": round(median(values), 3), "p95": round(percentile(values, 95), 3), "n": len(values)}


def ratio(a: float, b: float) -> float:
    """a / b rounded, NaN when b is zero or either is NaN."""
    if not b or math.isnan(a) or math.isnan(b):
        return math.nan
    return round(a / b, 4)


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys on xs; NaN with fewer than two distinct xs."""
    n = len(xs)
    if n < 2:
        return math.nan
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return math.nan
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def partial_slope(xs: Sequence[float], zs: Sequence[float], ys: Sequence[float]) -> float:
    """The coefficient of x in the least-squares fit y = a + b*x + c*z: how y grows with x at equal z.
    NaN with fewer than three points or when x and z are collinear."""
    n = len(xs)
    if n < 3:
        return math.nan
    mx, mz, my = sum(xs) / n, sum(zs) / n, sum(ys) / n
    dx = [x - mx for x in xs]
    dz = [z - mz for z in zs]
    dy = [y - my for y in ys]
    sxx, szz = sum(d * d for d in dx), sum(d * d for d in dz)
    sxz = sum(a * b for a, b in zip(dx, dz))
    sxy, szy = sum(a * b for a, b in zip(dx, dy)), sum(a * b for a, b in zip(dz, dy))
    det = sxx * szz - sxz * sxz
    if not det or det <= 1e-12 * sxx * szz:
        return math.nan
    return (szz * sxy - sxz * szy) / det
