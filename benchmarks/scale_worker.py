"""One offline compaction in a fresh process, so its peak memory is its own (run by `scale.py`).

`python -m benchmarks.scale_worker PATH [--profile OUT.prof]` reads the transcript, compacts it
(forced, default config), and prints one JSON line: parse and compact seconds, tokens, peak RSS.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import sys
import time

from .memory import current_mb, peak_mb, reset_peak


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_worker")
    parser.add_argument("path")
    parser.add_argument("--profile", help="write cProfile stats of the compaction to this file")
    args = parser.parse_args(argv)

    from worksurface import compact
    from worksurface.formats import read_transcript
    from worksurface.core.tokens import get_encoding

    get_encoding()  # loading the BPE table is a fixed cost per process, not part of the scaling
    base_rss = current_mb()
    reset_peak()
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
               "base_rss_mb": base_rss, "peak_rss_mb": peak_mb(),
               "stages_ms": {s.name: round(s.ms, 1) for s in report.stages + report.reinjected}}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
