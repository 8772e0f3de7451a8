"""Section 3: offline `compact` of generated transcripts of growing size (50k to 5M tokens).

Each size is compacted in a fresh subprocess (`scale_worker`), `scale_repeats` times: wall time and
peak RSS are medians over those runs. Growth is close to linear when the time per token stays flat
across sizes. The largest size is then profiled once (cProfile) for the hot spots.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fixturegen import write_session

from .plan import SCALE_SEED, Plan
from .replay import REPO
from .report import table
from .stats import median

NAME = "scale"
HOT_SPOTS = 15  # rows of the profile table
# A size whose time per token is within this factor of the smallest size's counts as linear growth
# (the smallest size also carries the per-call fixed costs, so later ratios are usually below 1).
LINEAR_TOLERANCE = 1.5


def run(plan: Plan) -> dict[str, Any]:
    rows = []
    profile: dict[str, list[dict[str, Any]]] = {"own": [], "worksurface_cumulative": []}
    with tempfile.TemporaryDirectory(prefix="ws-scale-") as tmp:
        for size in plan.scale_sizes:
            path = write_session(Path(tmp) / f"scale-{size}.jsonl", size, SCALE_SEED)
            runs = [_worker(path) for _ in range(plan.scale_repeats)]
            rows.append(_row(size, path, runs))
        if plan.profile and plan.scale_sizes:
            largest = max(plan.scale_sizes)
            stats_file = Path(tmp) / "largest.prof"
            _worker(Path(tmp) / f"scale-{largest}.jsonl", stats_file)
            profile = hot_spots(stats_file)
    base = rows[0]["us_per_token"] if rows else 0.0
    for r in rows:
        r["per_token_vs_smallest"] = round(r["us_per_token"] / base, 3) if base else float("nan")
    linear = all(r["per_token_vs_smallest"] <= LINEAR_TOLERANCE for r in rows)
    return {"rows": rows, "repeats": plan.scale_repeats, "seed": SCALE_SEED, "near_linear": linear,
            "linear_tolerance": LINEAR_TOLERANCE, "profile_size": max(plan.scale_sizes, default=0),
            "hot_spots": profile["own"], "worksurface_cumulative": profile["worksurface_cumulative"]}


def _worker(path: Path, profile: Path | None = None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.scale_worker", str(path)]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scale worker failed on {path.name}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(size: int, path: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    compact_s = median([r["compact_s"] for r in runs])
    tokens = runs[0]["tokens"]
    return {"requested_tokens": size, "tokens": tokens, "messages": runs[0]["messages"],
            "file_mb": round(path.stat().st_size / 1e6, 2), "runs": len(runs),
            "parse_s": round(median([r["parse_s"] for r in runs]), 3), "compact_s": round(compact_s, 3),
            "us_per_token": round(compact_s / tokens * 1e6, 3) if tokens else float("nan"),
            "peak_rss_mb": round(median([r["peak_rss_mb"] for r in runs]), 1),
            "rss_growth_mb": round(median([r["peak_rss_mb"] - r["base_rss_mb"] for r in runs]), 1),
            "tokens_after": runs[0]["tokens_after"], "stages_ms": runs[0]["stages_ms"]}


def hot_spots(stats_file: Path, limit: int = HOT_SPOTS) -> dict[str, list[dict[str, Any]]]:
    """The functions with the most own time, and worksurface's own functions with the most cumulative
    time (which stage or helper the time goes to), with call counts."""
    stats = pstats.Stats(str(stats_file))
    entries = []
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        # A strict editable install (the type check's) runs the repo's files through links: name the files.
        filename = os.path.realpath(filename) if os.path.isabs(filename) else filename
        where = _short(filename)
        entries.append({"function": f"{where}:{line}({func})" if where else func, "calls": ncalls,
                        "own_s": round(tottime, 3), "cumulative_s": round(cumtime, 3),
                        "worksurface": _is_ours(filename)})
    own = sorted(entries, key=lambda e: e["own_s"], reverse=True)[:limit]
    ours = sorted((e for e in entries if e["worksurface"]), key=lambda e: e["cumulative_s"], reverse=True)
    return {"own": own, "worksurface_cumulative": ours[:limit]}


def _is_ours(filename: str) -> bool:
    return filename.startswith(str(REPO)) and "/benchmarks/" not in filename


def _short(filename: str) -> str:
    if filename == "~":  # C functions and builtins
        return ""
    if filename.startswith(str(REPO)):
        return os.path.relpath(filename, REPO)
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1]
    return filename


def render(result: dict[str, Any], caption: str) -> str:
    rows = [[r["tokens"], r["messages"], r["file_mb"], r["parse_s"], r["compact_s"], r["us_per_token"],
             r["per_token_vs_smallest"], r["peak_rss_mb"], r["rss_growth_mb"], r["tokens_after"]]
            for r in result["rows"]]
    headers = ["tokens", "messages", "file MB", "parse s", "compact s", "µs / token", "per-token vs smallest",
               "peak RSS MB", "RSS growth MB", "view tokens after"]
    verdict = (f"Growth {'is' if result['near_linear'] else 'is NOT'} close to linear: time per token stays "
               f"within {result['linear_tolerance']}x of the smallest size's.")
    parts = ["## Scale: offline compact", caption,
             f"Generated Claude Code sessions (`fixturegen`, seed {result['seed']}); each size "
             "compacted by `worksurface.compact(transcript, force=True)` (default config) in its own "
             "subprocess. Times are medians over the runs; peak RSS is the process's high-water mark "
             "(Linux VmHWM, reset after imports), growth is that peak less the RSS after imports.",
             table(headers, rows), verdict]
    if result["hot_spots"]:
        hs = [[h["function"], h["calls"], h["own_s"], h["cumulative_s"], "yes" if h["worksurface"] else ""]
              for h in result["hot_spots"]]
        parts += [f"Hot spots of the largest size ({result['profile_size']:,} requested tokens), cProfile, "
                  "by own time (profiling slows the run; compare the rows with each other):",
                  table(["function", "calls", "own s", "cumulative s", "worksurface code"], hs)]
    if result.get("worksurface_cumulative"):
        ws = [[h["function"], h["calls"], h["own_s"], h["cumulative_s"]] for h in result["worksurface_cumulative"]]
        parts += ["worksurface's own functions by cumulative time (same profile):",
                  table(["function", "calls", "own s", "cumulative s"], ws)]
    return "\n\n".join(parts)
