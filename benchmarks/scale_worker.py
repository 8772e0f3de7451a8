"""One offline compaction in a fresh process, so its peak memory is its own (run by `scale.py`).

`python -m benchmarks.scale_worker PATH [--profile OUT.prof]` reads the transcript, compacts it
(forced, default config), and prints one JSON line: parse and compact seconds, tokens, peak RSS.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import resource
import sys
import time


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


def _reset_peak() -> None:
    """Start the peak-RSS mark afresh (Linux: writing 5 to clear_refs resets VmHWM to the current RSS).
    getrusage's ru_maxrss cannot be used alone: it survives exec, so a child starts at its parent's peak."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def _current_mb() -> float:
    return _status_mb("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _peak_mb() -> float:
    return _status_mb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_worker")
    parser.add_argument("path")
    parser.add_argument("--profile", help="write cProfile stats of the compaction to this file")
    args = parser.parse_args(argv)

    from worksurface import compact
    from worksurface.formats import read_transcript
    from worksurface.core.tokens import get_encoding

    get_encoding()  # loading the BPE table is a fixed cost per process, not part of the scaling
    base_rss = _current_mb()
    _reset_peak()
    started = time.perf_counter()
    transcript = read_transcript(args.path)
    parsed = time.perf_counter()
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    prepared = compact(transcript, force=True)
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    done = time.perf_counter()
    report = prepared.report
    json.dump({"messages": len(transcript.messages), "tokens": report.tokens_before,
               "tokens_after": report.tokens_after, "parse_s": parsed - started, "compact_s": done - parsed,
               "base_rss_mb": base_rss, "peak_rss_mb": _peak_mb(),
               "stages_ms": {s.name: round(s.ms, 1) for s in report.stages + report.reinjected}}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
