"""Section 2: per-call overhead of `Session.prepare` over a replay, against the per-call baselines.

Each transcript is replayed `repeats` times through a fresh memory-only session (a call's time is its
median over the replays). On every `baseline_stride`-th call of the first `baseline_repeats` replays,
the baselines run right after worksurface on the same live messages: (a) a full tiktoken recount,
(b) LangChain `trim_messages` with that counter, (c) the empty graph. Ratios compare medians over the
same calls, those where no stage fired. Other users' sessions (`plan.field_sources`) are replayed the
same way, `plan.field_repeats` times each, and every session is judged on its own against the targets
(a pooled figure hides the session that misses them). Peak memory is the replay's RSS high-water mark
above the RSS before it. (d), timed on every call: a recount of only the messages new since the
previous call, the least any counting harness pays; a session whose new outputs grow as it goes has a
growth even there, so the growth beyond (d) (worksurface's time minus (d), call by call) is reported
beside the raw growth, and so is the growth at equal new content: the slope on view tokens of a fit
that also has the new tokens as a regressor (what per-call work grows by with the session when what is
new is the same size).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from worksurface import Config, Session
from worksurface.core.view import live_slice

from . import floors, memory, replay
from .plan import Plan
from .report import table
from .stats import median, partial_slope, ratio, slope, summary

NAME = "overhead"
# The targets for calls where no stage fires.
TARGET_VS_RECOUNT = 0.1
TARGET_VS_GRAPH = 2.0
BASELINES = ("recount", "trim", "empty_graph")
# Growth is reported as milliseconds per call per this many tokens of view.
GROWTH_UNIT_TOKENS = 100_000
# The target for growth on calls where no stage fires, in ms per GROWTH_UNIT_TOKENS.
TARGET_GROWTH_MS = 1.0


@dataclass
class _CallRecord:
    size: int
    tokens: int = 0
    fired: bool = False
    visits: int = 0
    reinject: bool = False
    ms: list[float] = field(default_factory=list)  # worksurface, one per replay
    # The same calls in this process's CPU time: on a shared machine, wall time also counts the time
    # other processes held the cores, which a slope over a replay mistakes for growth.
    cpu_ms: list[float] = field(default_factory=list)
    base: dict[str, list[float]] = field(default_factory=dict)
    new_content_ms: float | None = None  # (d): a recount of the messages new since the previous call
    new_tokens: int = 0  # what (d) counted


def run(plan: Plan) -> dict[str, Any]:
    notes = list(plan.notes)
    rows, every = [], []
    sources = [(s, plan.repeats) for s in plan.sources] + [(s, plan.field_repeats) for s in plan.field_sources]
    for source, repeats in sources:
        row, records = _replay(source, repeats, plan, notes)
        row["meets_targets"] = _meets(row)
        row["meets_targets_beyond_new_content"] = _meets(row, "beyond_new_content")
        row["meets_targets_at_equal_new_content"] = _meets(row, "at_equal_new_content")
        row["meets_targets_at_equal_new_content_cpu"] = _meets(row, "at_equal_new_content_cpu")
        rows.append(row)
        every += records
    pooled = _aggregate("all transcripts", every)
    targets = {
        "recount_ratio_target": TARGET_VS_RECOUNT, "empty_graph_ratio_target": TARGET_VS_GRAPH,
        "growth_target_ms_per_100k": TARGET_GROWTH_MS,
        "below_target_vs_recount": bool(pooled["ratios"]["recount"] < TARGET_VS_RECOUNT),
        "within_target_vs_empty_graph": bool(pooled["ratios"]["empty_graph"] <= TARGET_VS_GRAPH),
        "sessions_meeting_targets": sum(r["meets_targets"] for r in rows), "sessions": len(rows),
        "sessions_meeting_targets_beyond_new_content": sum(r["meets_targets_beyond_new_content"] for r in rows),
        "sessions_meeting_targets_at_equal_new_content": sum(r["meets_targets_at_equal_new_content"] for r in rows),
        "sessions_meeting_targets_at_equal_new_content_cpu": sum(r["meets_targets_at_equal_new_content_cpu"]
                                                                 for r in rows),
        "sessions_over_target_by_new_content_alone": _over_by_new_content(rows),
    }
    return {"transcripts": rows, "pooled": pooled, "targets": targets, "notes": _dedupe(notes),
            "window": session_config(plan).window,
            "repeats": plan.repeats, "field_repeats": plan.field_repeats, "baseline_stride": plan.baseline_stride,
            "baseline_repeats": plan.baseline_repeats}


def session_config(plan: Plan) -> Config:
    """The replayed sessions' configuration: the defaults, at the plan's window when it names one."""
    return Config() if plan.window is None else Config(window=plan.window)


def _meets(row: dict[str, Any], growth_of: str = "worksurface") -> bool:
    """The issue's per-session targets on calls where no stage fires: at most 0.1x a recount of the same
    prefix, and growth under 1 ms per 100k tokens of view (`growth_of` "beyond_new_content": the
    growth beyond (d), what worksurface adds to counting what is new)."""
    ratio_ok = row["ratios"]["recount"] <= TARGET_VS_RECOUNT
    growth = row["growth_ms_per_100k"][growth_of]
    return bool(ratio_ok and growth == growth and growth < TARGET_GROWTH_MS)


def _over_by_new_content(rows: list[dict[str, Any]]) -> list[str]:
    """Sessions where (d) alone, counting exactly only the messages new since the previous call, grows
    by the growth target or more: there no exact counter, worksurface's included, can meet it."""
    return [r["name"] for r in rows
            if (g := r["growth_ms_per_100k"].get("new_content")) is not None and g == g and g >= TARGET_GROWTH_MS]


def _replay(source: replay.Source, repeats: int, plan: Plan,
            notes: list[str]) -> tuple[dict[str, Any], list[_CallRecord]]:
    messages = replay.load(source).messages
    calls = list(replay.calls(messages))
    records = [_CallRecord(c.size) for c in calls]
    config = session_config(plan)
    baselines = _Baselines(messages, config.threshold, notes)
    peak = 0.0
    starts = [0] + [c.size for c in calls[:-1]]
    for rep in range(repeats):
        base_rss = memory.current_mb()
        memory.reset_peak()
        with Session.open(None, config=config) as session:
            for call, rec in zip(calls, records):
                started, cpu_started = time.perf_counter(), time.process_time()
                prepared = session.prepare(messages[:call.size], now=call.now)
                rec.ms.append((time.perf_counter() - started) * 1000)
                rec.cpu_ms.append((time.process_time() - cpu_started) * 1000)
                if rep == 0:
                    new = messages[starts[call.index]:call.size]
                    started = time.perf_counter()
                    rec.new_tokens = floors.recount(new)
                    rec.new_content_ms = (time.perf_counter() - started) * 1000
                    report = prepared.report
                    rec.tokens = report.view_tokens_before
                    rec.fired = report.boundary is not None or any(not s.skipped for s in report.stages)
                    rec.visits = floors.visited_stages(report)
                    rec.reinject = report.boundary is not None
                # Right after worksurface's call, so both see the same machine load.
                if rep < plan.baseline_repeats and call.index % plan.baseline_stride == 0:
                    baselines.time(call, rec)
            peak = max(peak, memory.peak_mb() - base_rss)
    row = _aggregate(source.name, records)
    row.update(messages=len(messages), max_tokens=max((r.tokens for r in records), default=0),
               repeats=repeats, peak_rss_growth_mb=round(peak, 1))
    return row, records


class _Baselines:
    """The per-call baselines of one transcript, timed on the same live messages as worksurface."""

    def __init__(self, messages, threshold: int, notes: list[str]) -> None:
        self.messages = messages
        self.graph = floors.EmptyGraph()
        try:
            self.trim: floors.LangChainTrim | None = floors.LangChainTrim(messages, threshold)
        except ImportError:
            self.trim = None
            notes.append("trim: skipped, langchain-core is not installed (pip install 'worksurface[bench]')")

    def time(self, call: replay.Call, rec: _CallRecord) -> None:
        live = live_slice(self.messages[:call.size])
        start = call.size - len(live)
        jobs: dict[str, Callable[[], object]] = {
            "recount": lambda: floors.recount(live),
            "empty_graph": lambda: self.graph.run(live, rec.visits, rec.reinject),
        }
        if self.trim is not None:
            trim = self.trim
            jobs["trim"] = lambda: trim(start, call.size)
        for name, job in jobs.items():
            started = time.perf_counter()
            job()
            rec.base.setdefault(name, []).append((time.perf_counter() - started) * 1000)


def _aggregate(name: str, records: list[_CallRecord]) -> dict[str, Any]:
    """Summaries of one transcript's (or all) calls: worksurface on all / no-fire / fired calls, and
    on the sampled no-fire calls worksurface and each baseline, with the ratios."""
    ws = {id(r): median(r.ms) for r in records}
    quiet = [r for r in records if not r.fired]
    sampled = [r for r in quiet if r.base]
    out: dict[str, Any] = {
        "name": name, "calls": len(records), "no_fire_calls": len(quiet), "sampled_no_fire_calls": len(sampled),
        "worksurface": {"all": summary([ws[id(r)] for r in records]),
                        "no_fire": summary([ws[id(r)] for r in quiet]),
                        "fired": summary([ws[id(r)] for r in records if r.fired]),
                        "no_fire_sampled": summary([ws[id(r)] for r in sampled]),
                        # The same calls timed in the replays the baselines ran in (right after each),
                        # so a ratio compares times taken at the same moments of the machine.
                        "no_fire_paired": summary([_paired_ms(r) for r in sampled])},
        "baselines": {}, "ratios": {},
    }
    out["growth_ms_per_100k"] = {
        "worksurface": _growth(quiet, lambda r: ws[id(r)]),
        "recount": _growth(sampled, lambda r: median(r.base["recount"]) if "recount" in r.base else None),
        "new_content": _growth(quiet, lambda r: r.new_content_ms),
        "beyond_new_content": _growth(quiet, lambda r: None if r.new_content_ms is None
                                      else ws[id(r)] - r.new_content_ms),
        "at_equal_new_content": _round(partial_slope([r.tokens for r in quiet], [r.new_tokens for r in quiet],
                                                     [ws[id(r)] for r in quiet]) * GROWTH_UNIT_TOKENS),
        "at_equal_new_content_cpu": _round(partial_slope([r.tokens for r in quiet], [r.new_tokens for r in quiet],
                                                         [median(r.cpu_ms) for r in quiet]) * GROWTH_UNIT_TOKENS)}
    ws_sampled = out["worksurface"]["no_fire_paired"]["median"]
    for b in BASELINES:
        values = [median(r.base[b]) for r in sampled if b in r.base]
        if values:
            out["baselines"][b] = summary(values)
            out["ratios"][b] = ratio(ws_sampled, out["baselines"][b]["median"])
        else:
            out["baselines"][b] = None
            out["ratios"][b] = float("nan")
    return out


def _paired_ms(record: _CallRecord) -> float:
    """worksurface's time on a sampled call over the replays its baselines were timed in."""
    runs = max((len(v) for v in record.base.values()), default=len(record.ms))
    return median(record.ms[:runs])


def _growth(records: list[_CallRecord], ms_of) -> float:
    """How much a call's time grows per GROWTH_UNIT_TOKENS of view (least-squares slope)."""
    pairs = [(r.tokens, ms) for r in records if (ms := ms_of(r)) is not None]
    return _round(slope([t for t, _ in pairs], [m for _, m in pairs]) * GROWTH_UNIT_TOKENS)


def _window_text(window: int | None) -> str:
    return "" if window in (None, Config().window) else f" at a {window:,}-token window"


def _round(value: float) -> float:
    return round(value, 3) if value == value else value


def _dedupe(notes: list[str]) -> list[str]:
    return list(dict.fromkeys(notes))


def render(result: dict[str, Any], caption: str) -> str:
    rows = []
    for r in result["transcripts"] + [result["pooled"]]:
        w, b = r["worksurface"], r["baselines"]

        def med(x):
            return None if x is None else x["median"]
        rows.append([r["name"], r["calls"], r["no_fire_calls"], w["all"]["median"], w["all"]["p95"],
                     w["no_fire"]["median"], w["no_fire"]["p95"], w["fired"]["median"],
                     med(b["recount"]), med(b["trim"]), med(b["empty_graph"]),
                     _x(r["ratios"]["recount"]), _x(r["ratios"]["trim"]), _x(r["ratios"]["empty_graph"]),
                     r["growth_ms_per_100k"]["worksurface"], r["growth_ms_per_100k"]["recount"],
                     r["growth_ms_per_100k"].get("new_content"), r["growth_ms_per_100k"].get("beyond_new_content"),
                     r["growth_ms_per_100k"].get("at_equal_new_content"),
                     r["growth_ms_per_100k"].get("at_equal_new_content_cpu"),
                     r.get("max_tokens"), r.get("peak_rss_growth_mb"), _verdict(r.get("meets_targets")),
                     _verdict(r.get("meets_targets_beyond_new_content")),
                     _verdict(r.get("meets_targets_at_equal_new_content")),
                     _verdict(r.get("meets_targets_at_equal_new_content_cpu"))])
    t = result["targets"]
    verdict = (f"Target on calls where no stage fires: below {t['recount_ratio_target']}x of (a) — "
               f"{'reached' if t['below_target_vs_recount'] else 'not reached'}; within "
               f"{t['empty_graph_ratio_target']}x of (c) — "
               f"{'reached' if t['within_target_vs_empty_graph'] else 'not reached'} (pooled ratios). Per "
               f"session (at most {t['recount_ratio_target']}x of (a) and growth under "
               f"{t['growth_target_ms_per_100k']} ms per 100k tokens): {t['sessions_meeting_targets']} of "
               f"{t['sessions']} sessions; with the growth beyond (d): "
               f"{t.get('sessions_meeting_targets_beyond_new_content', 'n/a')} of {t['sessions']}; with the growth at "
               f"equal new content: {t.get('sessions_meeting_targets_at_equal_new_content', 'n/a')} of {t['sessions']}; "
               f"the same in CPU time: {t.get('sessions_meeting_targets_at_equal_new_content_cpu', 'n/a')} of "
               f"{t['sessions']}.")
    over = t.get("sessions_over_target_by_new_content_alone")
    if over:
        verdict += (f" On {', '.join(over)}, (d) alone (an exact count of only the new messages) grows by "
                    f"{t['growth_target_ms_per_100k']} ms per 100k tokens or more: no exact counter meets the "
                    "growth target there.")
    headers = ["transcript", "calls", "no-fire calls", "ws median ms", "ws p95 ms", "ws no-fire median",
               "ws no-fire p95", "ws fired median", "(a) recount ms", "(b) trim ms", "(c) empty graph ms",
               "ws/(a)", "ws/(b)", "ws/(c)", "ws growth ms/100k tok", "(a) growth ms/100k tok", "(d) new-content growth ms/100k tok",
               "ws growth beyond (d) ms/100k tok", "ws growth at equal new content ms/100k tok",
               "ws growth at equal new content, CPU ms/100k tok", "max view tokens", "peak RSS growth MB",
               "per-session target", "target, growth beyond (d)", "target, growth at equal new content",
               "target, growth at equal new content (CPU)"]
    parts = ["## Per-call overhead", caption,
             "One `prepare` per model call (prefix ending right before each assistant message that answers "
             "a user or tool message). ws = worksurface `Session.prepare` (memory-only session, default "
             f"config{_window_text(result.get('window'))}). Baseline columns are medians over the sampled calls where no stage fired, and the "
             "ratios compare worksurface's median on those same calls, timed in the replays the baselines ran in (each right "
             "before its baselines), with each baseline's. (a) re-encodes "
             "every live message with tiktoken on each call; (b) is LangChain `trim_messages` to the "
             "autocompact threshold with that counter; (c) is worksurface's graph shape with empty nodes, "
             "visiting as many nodes as worksurface did. Growth columns: least-squares slope of a call's time "
             "against its view tokens (no-fire calls), in ms per 100k tokens of view: a harness that only "
             "pays for new content has a slope near 0. (d) recounts only the messages new since the previous "
             "call (timed on every call): a session whose new outputs grow as it goes has a growth there too, "
             "and the growth beyond (d) is the slope of worksurface's time minus (d); the growth at equal new "
             "content is the slope on view tokens of a least-squares fit that also has (d)'s token count as a "
             "regressor, and its CPU column the same fit of the calls' CPU time (this process's, so the time other "
             "processes held the cores on a shared machine is not taken for growth). `field` rows are other users' sessions "
             f"(`../shared/transcripts/field/`), replayed {result.get('field_repeats', 1)} time(s) each. Peak RSS "
             "growth: the replay's RSS high-water mark above the RSS before it (the transcript is read before; "
             "the baselines' per-call work is included).",
             table(headers, rows), verdict]
    parts += [f"- {n}" for n in result["notes"]]
    return "\n\n".join(parts)


def _verdict(meets: bool | None) -> str:
    return "" if meets is None else ("met" if meets else "missed")


def _x(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}x"
