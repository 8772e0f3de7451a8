"""Section 5: retention per token. At each real compaction point, the probes the view still shows for
worksurface and every baseline (given worksurface's view size), at each post-compact target.

Points: a Claude Code session's first real compact boundary; for a transcript without one, the first
call at which the live transcript passes the autocompact threshold (where any harness must compact).
Probes: derived mechanically at each point (`worksurface.probes.derivation`), and the hand-labeled sets in
the shared probes folder, scored the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from worksurface import Config
from worksurface.formats import Transcript, read_transcript
from worksurface.core.tokens import TokenCounter

from . import replay
from .plan import Plan
from .plot import Panel, Series, line_chart
from .report import table

if TYPE_CHECKING:  # worksurface.probes is imported where the section runs (it may be missing)
    from worksurface.probes.check import MethodResult

NAME = "retention"
PLOT_FILE = "retention.png"
CLAUDE_CODE = "claude-code"  # its real summary has the size it has: one point, not a curve
# worksurface sized as its commands are by default: the target is the view as the provider measures it.
MEASURED = "worksurface, measured"
OVER = "†"  # marks a cell whose view is larger than the target


def run(plan: Plan, out_dir: Path | None = None) -> dict[str, Any]:
    try:
        from worksurface.probes import ProbeSet, derive
        from worksurface.probes.check import check
        from worksurface.probes.cut import first_boundary
    except ImportError as exc:
        return {"available": False, "reason": f"worksurface.probes is not available: {exc}"}
    notes: list[str] = []
    points = []
    for source in plan.sources:
        transcript = replay.load(source)
        at, how = compaction_point(transcript, first_boundary)
        probes = derive(transcript.messages[:at], source.path.name, transcript.queued_inputs)
        points.append(_score(check, source.name, "derived", how, transcript, probes, at, plan.targets, notes))
    for path in plan.hand_probes:
        probes = ProbeSet.load(path)
        target_file = replay.SHARED / "transcripts" / (probes.transcript or "")
        if not probes.transcript or not target_file.is_file():
            notes.append(f"{path.name}: skipped, its transcript {probes.transcript!r} is not in {replay.SHARED}")
            continue
        transcript = read_transcript(target_file)
        at = first_boundary(transcript.messages)
        if at is None:
            notes.append(f"{path.name}: skipped, {target_file.name} has no compact boundary")
            continue
        points.append(_score(check, path.stem, "hand-labeled", "real compact boundary", transcript, probes, at,
                             plan.targets, notes))
    result = {"available": True, "targets": list(plan.targets), "points": points, "means": _means(points),
              "notes": list(dict.fromkeys(notes))}
    if out_dir is not None:
        result["plot"] = _plot(result, out_dir / PLOT_FILE)
    return result


def compaction_point(transcript: Transcript, first_boundary) -> tuple[int, str]:
    """Where to compact: the first real boundary, else the first call over the threshold, else the end."""
    messages = transcript.messages
    boundary = first_boundary(messages)
    if boundary is not None:
        return boundary, "real compact boundary"
    threshold, counter, total = Config().threshold, TokenCounter(), 0
    counts = [0]
    for m in messages:
        total += counter.message(m)
        counts.append(total)
    for call in replay.call_points(messages):
        if counts[call] > threshold:
            return call, "first call over the autocompact threshold"
    return len(messages), "end of transcript (never over the threshold)"


def _score(check, name: str, kind: str, how: str, transcript: Transcript, probes, at: int,
           targets, notes: list[str]) -> dict[str, Any]:
    methods: dict[str, dict[str, Any]] = {}
    tokens_before = 0
    for target in targets:
        # Every method gets the same budget of counted text: the targets are text, not the measured size.
        result = check(transcript, probes, at=at, target=target, use_usage=False)
        tokens_before = result.tokens_before
        notes.extend(f"{name}: {n}" for n in result.notes)
        for method, r in result.methods.items():
            methods.setdefault(method, {})[str(target)] = _entry(r, r.tokens > target)
        # Its target holds the harness's fixed part too, so its view is not compared with the target.
        measured = check(transcript, probes, at=at, target=target, baselines=(), use_usage=True)
        methods.setdefault(MEASURED, {})[str(target)] = _entry(measured.methods["worksurface"], False)
    return {"name": name, "probes": kind, "cut": how, "at_message": at, "probe_count": len(probes),
            "tokens_before": tokens_before, "methods": methods}


def _entry(r: MethodResult, over_target: bool) -> dict[str, Any]:
    return {"retained": len(r.score.retained), "total": r.score.total, "tokens": r.tokens,
            "fraction": round(r.score.fraction, 4), "over_target": over_target,
            "by_category": {c: list(v) for c, v in r.score.by_category.items()}}


def _means(points: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per probe kind and method, per target: mean retained fraction and mean view tokens over points."""
    acc: dict[tuple[str, str, str], list[tuple[float, int]]] = {}
    for p in points:
        for method, cells in p["methods"].items():
            for target, cell in cells.items():
                acc.setdefault((p["probes"], method, target), []).append((cell["fraction"], cell["tokens"]))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (kind, method, target), values in acc.items():
        out.setdefault(kind, {}).setdefault(method, {})[target] = {
            "fraction": round(sum(f for f, _ in values) / len(values), 4),
            "tokens": round(sum(t for _, t in values) / len(values)), "points": len(values)}
    return out


def _plot(result: dict[str, Any], path: Path) -> str:
    panels = []
    for kind, methods in result["means"].items():
        series = []
        for method, cells in methods.items():
            if method == CLAUDE_CODE:
                cell = next(iter(cells.values()))
                series.append(Series(method, [(cell["tokens"], cell["fraction"])], markers_only=True))
            else:
                series.append(Series(method, [(int(t), c["fraction"]) for t, c in cells.items()]))
        panels.append(Panel(f"{kind} probes", "post-compact target (tokens)", "retained", series))
    if not panels:
        return "not drawn: no compaction points"
    line_chart(panels, path)
    return path.name


def _cell(cell: dict[str, Any], method: str) -> str:
    over = OVER if cell.get("over_target") and method != CLAUDE_CODE else ""
    return f"{cell['retained']}/{cell['total']} ({cell['tokens']:,} tok){over}"


def render(result: dict[str, Any], caption: str) -> str:
    if not result.get("available"):
        return "\n\n".join(["## Retention per token", caption, f"Not available: {result.get('reason')}"])
    targets = [str(t) for t in result["targets"]]
    rows = []
    for p in result["points"]:
        for method, cells in p["methods"].items():
            rows.append([p["name"], p["probes"], method] + [
                _cell(cells[t], method) if t in cells else "n/a" for t in targets])
    point_rows = [[p["name"], p["probes"], p["cut"], p["at_message"], p["tokens_before"], p["probe_count"]]
                  for p in result["points"]]
    mean_rows = []
    for kind, methods in result["means"].items():
        for method, cells in methods.items():
            mean_rows.append([kind, method] + [f"{cells[t]['fraction']:.0%}" if t in cells else "n/a"
                                               for t in targets])
    head = [f"target {int(t):,}" for t in targets]
    parts = ["## Retention per token", caption,
             "`worksurface.probes.check` at each compaction point: worksurface compacts (forced) with "
             "post-compact target T in counted tokens (`--no-usage`: a text budget, the same for every method); "
             "every baseline gets as many tokens as worksurface's view "
             "(truncate = newest messages; mask = observation masking then truncation; trim = LangChain "
             "`trim_messages`); claude-code = the summary Claude Code really wrote at that boundary (its own "
             "size, the same at every T); worksurface, measured = the same compaction sized as its commands "
             "are by default: T is the view as the provider measures it, the harness's fixed part (system "
             "prompt, tools: from the recorded usage) included, and where that part leaves the text under the "
             "floor the floor is kept (autocompact.text_floor, text_floor_tokens). Cells: probes retained / "
             "probes (view tokens, counted). Deterministic: one run.",
             table(["point", "probes", "cut", "at message", "live tokens", "probes"], point_rows),
             table(["point", "probes", "method"] + head, rows),
             f"Cells marked {OVER}: the view is larger than the target (worksurface could not get under it, e.g. its kept "
             "tail alone is larger; the baselines then got the same larger budget).",
             "Mean retained share over the points (the retention-versus-budget curve):",
             table(["probes", "method"] + head, mean_rows)]
    if result.get("plot", "").endswith(".png"):
        parts.append(f"![retention versus budget]({result['plot']})")
    elif result.get("plot"):
        parts.append(f"Plot {result['plot']}.")
    parts += [f"- {n}" for n in result["notes"]]
    return "\n\n".join(parts)
