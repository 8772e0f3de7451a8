"""The hand-probe retention table over every labeled session: `python -m benchmarks.probe_table`.

For each transcript in the shared probes folder (`../shared/probes/*.json` and `field/*.json`), at its
first real compact boundary: `probe check --no-usage --target N` for each N (worksurface against every
baseline at worksurface's view size, and Claude Code's own summary at its own size), then the default
settings (usage-anchored, the configured target). Optionally `probe curve --window W` on the sessions
named by `--curve`. Prints markdown tables (per session, totals, what worksurface forgot) and writes
all figures as JSON (`--json FILE`), so two runs can be compared: a change that raises one session and
lowers another is not progress. Last, a 3,000-token sub-agent brief per session (task: the user's latest
request at the boundary), scored on the constraint and negative probes.

`--file STEM=PATH` reads the transcript of probe set STEM from PATH instead (a repaired copy in /tmp of
a file the readers cannot read yet; never commit one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from worksurface.formats import read_transcript
from worksurface.probes.check import DEFAULT_BASELINES, check
from worksurface.probes.curve import curve
from worksurface.probes.model import ProbeSet

from .replay import SHARED, hand_probe_files

TARGETS = (4000, 10000, 20000, 40000)
WANTED_BASELINES = ("truncate", "mask", "claude-code", "codex")
DEFAULT = "default"
# The done-when goals of issue 25: share retained over all labeled sessions at each target.
GOALS = {4000: 0.80, 10000: 0.90, 20000: 0.95, 40000: 0.98}
DEFAULT_GOAL = 0.90
# A brief is scored on the probes it must carry to a sub-agent: the rules and what was excluded.
BRIEF_CATEGORIES = ("constraint", "negative")
BRIEF_BUDGET = 3000


def measure(probe_file: Path, transcript_file: Path, targets: Sequence[int],
            baselines: Sequence[str]) -> dict[str, Any]:
    """Every target's check (text counted only) and the default-settings check of one session."""
    transcript = read_transcript(transcript_file)
    probes = ProbeSet.load(probe_file)
    runs: dict[str, Any] = {}
    for target in targets:
        runs[str(target)] = check(transcript, probes, at="boundary", target=target, baselines=baselines,
                                  use_usage=False).to_json()
    runs[DEFAULT] = check(transcript, probes, at="boundary", baselines=baselines).to_json()
    return {"probes": str(probe_file), "transcript": str(transcript_file), "user": user_of(transcript_file),
            "runs": runs}


def user_of(transcript_file: Path) -> str:
    """Who a session comes from, for the per-user table: the field folder's user/repository, else the
    top folder under the shared transcripts (claude-code: the user behind the two long sessions)."""
    parts = transcript_file.resolve().parts
    if "transcripts" in parts:
        rest = parts[parts.index("transcripts") + 1:]
        if len(rest) >= 2 and rest[0] == "field":
            return rest[1]
        if rest:
            return rest[0]
    return transcript_file.parent.name


def measure_brief(probe_file: Path, transcript_file: Path, budget: int) -> dict[str, Any]:
    """A sub-agent brief at the first boundary (task: the user's latest request there, `budget`
    tokens) scored on the constraint and negative probes: the rules and lessons that apply."""
    from worksurface.facts import latest_request
    from worksurface.probes.cut import cut, cut_transcript
    from worksurface.probes.match import score
    from worksurface.session.session import Session

    transcript = read_transcript(transcript_file)
    at = cut_transcript(transcript, cut(transcript.messages, "boundary").before)
    request = latest_request(at.messages, at.queued_inputs)
    task = request.text if request is not None else "Continue the work."
    with Session.open(None) as session:
        session.ledger.update(at.messages, queued=at.queued_inputs)
        brief = session.brief(task, budget)
    probes = [p for p in ProbeSet.load(probe_file) if p.category in BRIEF_CATEGORIES]
    kept = score(brief.text, probes)
    return {"task": task, "tokens": brief.tokens, "retained": len(kept.retained), "total": kept.total,
            "forgotten": [p.id for p in kept.forgotten]}


def measure_curve(probe_file: Path, transcript_file: Path, window: int) -> list[dict[str, Any]]:
    return [p.to_json() for p in curve(read_transcript(transcript_file), ProbeSet.load(probe_file),
                                       window=window)]


def _cell(method: dict[str, Any] | None) -> str:
    if method is None:
        return "-"
    return f"{method['retained']}/{method['total']} ({method['tokens']:,})"


def tables(results: dict[str, Any]) -> str:
    cols = [*(str(t) for t in results["targets"]), DEFAULT]
    out = ["| session | method | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    totals: dict[str, list[int]] = {c: [0, 0] for c in cols}
    for stem, session in results["sessions"].items():
        names = list(dict.fromkeys(n for c in cols for n in session["runs"][c]["methods"]))
        for name in names:
            out.append(f"| {stem} | {name} | "
                       + " | ".join(_cell(session["runs"][c]["methods"].get(name)) for c in cols) + " |")
        for c in cols:
            ws = session["runs"][c]["methods"]["worksurface"]
            totals[c][0] += ws["retained"]
            totals[c][1] += ws["total"]
    goals = {str(t): g for t, g in GOALS.items()} | {DEFAULT: DEFAULT_GOAL}
    out += ["", "| total (worksurface) | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols),
            "| retained | " + " | ".join(f"{k}/{n} ({k / n:.1%})" if n else "-" for k, n in totals.values()) + " |",
            "| goal | " + " | ".join(f"{goals.get(c, 0):.0%}" for c in cols) + " |"]
    out += ["", *per_user_table(results, cols)]
    out += ["", "| session | run | worksurface forgot |", "|---|---|---|"]
    for stem, session in results["sessions"].items():
        for c in cols:
            ws = session["runs"][c]["methods"]["worksurface"]
            forgot = ", ".join(ws.get("forgotten", [])) or "-"
            out.append(f"| {stem} | {c} | {forgot} |")
    briefs = results.get("briefs", {})
    if briefs:
        kept = sum(b["retained"] for b in briefs.values())
        total = sum(b["total"] for b in briefs.values())
        out += ["", f"| brief ({BRIEF_BUDGET} tokens, task: the latest request) | constraint + negative kept | tokens | forgot |",
                "|---|---|---|---|"]
        out += [f"| {stem} | {b['retained']}/{b['total']} | {b['tokens']:,} | {', '.join(b['forgotten']) or '-'} |"
                for stem, b in briefs.items()]
        out.append(f"| total | {kept}/{total} ({kept / total:.0%}) | | |" if total else "| total | - | | |")
    for stem, points in results.get("curves", {}).items():
        out += ["", f"curve {stem} (window {results['window']}): "
                + ", ".join(f"{p['retained']}/{p['total']} ({p['tokens_after']:,})" for p in points)]
    return "\n".join(out)


def first_scores(targets: Sequence[int]) -> dict[str, Any]:
    """The first scores recorded right after each blind labeling, shaped as a measured run: the
    honest unseen figure, kept beside the probe file and never re-measured."""
    from .replay import OWN_PROBES_DIR

    sessions: dict[str, Any] = {}
    for first in sorted(OWN_PROBES_DIR.rglob("*.first-score.json")):
        recorded = json.loads(first.read_text(encoding="utf-8"))
        probes = first.with_name(first.name.replace(".first-score.json", ".json"))
        transcript = SHARED / "transcripts" / (ProbeSet.load(probes).transcript or "")
        sessions[probes.stem] = {"user": user_of(transcript), "runs": recorded["runs"],
                                 "measured_on": recorded.get("measured_on")}
    return {"targets": list(targets), "sessions": sessions}


def per_user_table(results: dict[str, Any], cols: Sequence[str]) -> list[str]:
    """Retained share per user/repository and method, summed over that user's sessions: a change counts
    when it raises the users it was not developed on, which a pooled total can hide."""
    sums: dict[tuple[str, str], dict[str, list[int]]] = {}
    sessions: dict[str, list[str]] = {}
    for stem, session in results["sessions"].items():
        user = session.get("user", "?")
        sessions.setdefault(user, []).append(stem)
        for c in cols:
            for name, method in session["runs"][c]["methods"].items():
                cell = sums.setdefault((user, name), {}).setdefault(c, [0, 0])
                cell[0] += method["retained"]
                cell[1] += method["total"]
    out = ["| user (sessions) | method | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for (user, name), cells in sorted(sums.items(), key=lambda item: item[0][0]):
        label = f"{user} ({', '.join(sessions[user])})"
        out.append(f"| {label} | {name} | " + " | ".join(
            f"{cells[c][0]}/{cells[c][1]} ({cells[c][0] / cells[c][1]:.0%})" if c in cells and cells[c][1] else "-"
            for c in cols) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(map(str, TARGETS)))
    parser.add_argument("--sessions", default="", help="Comma-separated probe-set stems (default: all).")
    parser.add_argument("--file", action="append", default=[], metavar="STEM=PATH")
    parser.add_argument("--curve", default="258c7280,8463c716",
                        help="Probe-set stems to also replay with `probe curve` ('' for none).")
    parser.add_argument("--window", type=int, default=60000)
    parser.add_argument("--json", type=Path, help="Write all figures here.")
    parser.add_argument("--first-scores", action="store_true",
                        help="Print the recorded first (blind, untuned) scores of the project's own probe sets "
                             "(benchmarks/probes/**/<stem>.first-score.json) instead of measuring.")
    args = parser.parse_args(argv)
    targets = [int(t) for t in args.targets.split(",") if t]
    if args.first_scores:
        print(tables(first_scores(targets)))
        return 0
    wanted = {s for s in args.sessions.split(",") if s}
    files = dict(pair.split("=", 1) for pair in args.file)
    baselines = [b for b in WANTED_BASELINES if b in DEFAULT_BASELINES]
    results: dict[str, Any] = {"targets": targets, "baselines": baselines, "window": args.window,
                               "sessions": {}, "curves": {}, "briefs": {}}
    for probe_file in hand_probe_files():
        stem = probe_file.stem
        if wanted and stem not in wanted:
            continue
        transcript = Path(files.get(stem) or SHARED / "transcripts" / (ProbeSet.load(probe_file).transcript or ""))
        started = time.perf_counter()
        try:
            results["sessions"][stem] = measure(probe_file, transcript, targets, baselines)
        except Exception as exc:  # a session that cannot be read is reported, the others still run
            print(f"[probe_table] {stem}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if stem in args.curve.split(","):
            results["curves"][stem] = measure_curve(probe_file, transcript, args.window)
        results["briefs"][stem] = measure_brief(probe_file, transcript, BRIEF_BUDGET)
        print(f"[probe_table] {stem} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    print(tables(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
