"""This process's memory from /proc (Linux): the current RSS and a peak mark that can be reset, so a
run's peak is its own and not an earlier run's (getrusage's ru_maxrss survives exec and never resets)."""

from __future__ import annotations

import resource


def _status_mb(field: str) -> float | None:
    """A memory figure (VmRSS, VmHWM) of this process from /proc, in MB; None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def reset_peak() -> None:
    """Start the peak-RSS mark afresh (Linux: writing 5 to clear_refs resets VmHWM to the current RSS)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def current_mb() -> float:
    return _status_mb("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_mb() -> float:
    return _status_mb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
