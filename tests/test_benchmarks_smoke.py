"""Smoke test of the benchmarks: every section on a tiny generated transcript (JSON shape and sane
values, never timings), the PNG writer, and the prefix measure."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` lives at the repo root

from benchmarks import __main__ as entry  # noqa: E402
from benchmarks import cache, overhead, plot, prefix, replay, retention, scale  # noqa: E402
from benchmarks.plan import Plan  # noqa: E402
from benchmarks.report import dumps  # noqa: E402
from benchmarks.stats import partial_slope, percentile, slope  # noqa: E402
from fixturegen import write_session  # noqa: E402
from worksurface.core.model import Message, Text  # noqa: E402
from worksurface.core.tokens import TokenCounter  # noqa: E402


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    path = write_session(tmp_path_factory.mktemp("bench") / "tiny.jsonl", 8_000, seed=3)
    return Plan("smoke", [replay.Source("tiny", path)], repeats=1, baseline_stride=2, baseline_repeats=1,
                scale_sizes=(6_000, 12_000), scale_repeats=1, targets=(1_000, 3_000))


@pytest.fixture(scope="module")
def results(plan, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("out")
    return {"overhead": overhead.run(plan), "scale": scale.run(plan), "cache": cache.run(plan),
            "retention": retention.run(plan, out), "out": out}


def test_overhead_times_every_call_and_the_baselines_on_the_sampled_ones(plan, results):
    r = results["overhead"]
    row = r["transcripts"][0]
    calls = len(replay.call_points(replay.load(plan.sources[0]).messages))
    assert row["calls"] == calls > 3
    assert row["worksurface"]["all"]["n"] == calls and row["worksurface"]["all"]["median"] > 0
    assert row["sampled_no_fire_calls"] >= 1
    for name in overhead.BASELINES:
        assert row["baselines"][name]["median"] > 0
        assert row["ratios"][name] > 0
    assert set(row["growth_ms_per_100k"]) == {"worksurface", "recount", "new_content", "beyond_new_content",
                                              "at_equal_new_content", "at_equal_new_content_cpu"}
    growth = row["growth_ms_per_100k"]
    # (d) is timed on every call, so both of its figures are numbers (a NaN slope: no calls timed).
    assert growth["new_content"] == growth["new_content"] and growth["beyond_new_content"] == growth["beyond_new_content"]
    assert isinstance(row["meets_targets_beyond_new_content"], bool)
    assert isinstance(row["meets_targets_at_equal_new_content"], bool)
    # Every call is timed in CPU time too, so its growth is a number and every session is judged on it.
    cpu = growth["at_equal_new_content_cpu"]
    assert cpu == cpu and isinstance(row["meets_targets_at_equal_new_content_cpu"], bool)
    assert r["targets"]["sessions_meeting_targets_at_equal_new_content_cpu"] <= r["targets"]["sessions"]
    assert set(r["targets"]) >= {"below_target_vs_recount", "within_target_vs_empty_graph"}


def test_overhead_names_the_sessions_whose_new_content_alone_grows_past_the_target(results):
    """A session whose exact count of only its new messages ((d)) already grows by the target is named
    in the verdict: there the raw growth target is below what any exact counter needs."""
    r = results["overhead"]
    row = r["transcripts"][0]
    over = r["targets"]["sessions_over_target_by_new_content_alone"]
    assert over == ([row["name"]] if row["growth_ms_per_100k"]["new_content"] >= overhead.TARGET_GROWTH_MS else [])
    steep = {**row, "name": "steep", "growth_ms_per_100k": {**row["growth_ms_per_100k"], "new_content": 2.2}}
    flat = {**row, "name": "flat", "growth_ms_per_100k": {**row["growth_ms_per_100k"], "new_content": 0.4}}
    unknown = {**row, "name": "unknown", "growth_ms_per_100k": {**row["growth_ms_per_100k"], "new_content": float("nan")}}
    named = overhead._over_by_new_content([steep, flat, unknown])
    assert named == ["steep"]
    md = overhead.render({**r, "targets": {**r["targets"], "sessions_over_target_by_new_content_alone": named}}, "c")
    assert "On steep, (d) alone" in md and "flat" not in md.split("On steep")[1]


def test_overhead_replays_at_the_plans_window(plan, results):
    """`--window`: the sessions are configured for it, so a window the tiny session outgrows has stages
    fire where the default one has none, and the section says which window it ran at."""
    small = overhead.run(dataclasses.replace(plan, window=4_000))
    row, default_row = small["transcripts"][0], results["overhead"]["transcripts"][0]
    assert small["window"] == 4_000 and results["overhead"]["window"] == 200_000
    assert row["no_fire_calls"] < default_row["no_fire_calls"]
    assert "4,000-token window" in overhead.render(small, "caption")
    assert "-token window" not in overhead.render(results["overhead"], "caption")
    assert dataclasses.replace(plan, mode="quick", window=4_000).command == "python -m benchmarks --quick --window 4000"


def test_scale_reports_each_size_with_memory_and_hot_spots(results):
    r = results["scale"]
    tokens = [row["tokens"] for row in r["rows"]]
    assert len(tokens) == 2 and tokens[0] < tokens[1]
    for row in r["rows"]:
        assert row["compact_s"] > 0 and row["peak_rss_mb"] > 0 and row["tokens_after"] > 0
    assert r["rows"][0]["per_token_vs_smallest"] == 1.0
    assert r["hot_spots"] and all(h["calls"] > 0 for h in r["hot_spots"])
    assert any(h["function"].startswith(("pipeline/", "stages/", "reinjectors/"))
               for h in r["worksurface_cumulative"])


def test_cache_shares_are_fractions_and_the_unmanaged_transcript_never_breaks(results):
    rows = {row["method"]: row for row in results["cache"]["rows"]}
    assert {f"worksurface ({s})" for s in cache.STRATEGIES} <= set(rows)
    assert "summarize at threshold" in rows
    for row in rows.values():
        assert 0 <= row["cached_share"] <= 1
        assert row["uncached_tokens"] <= row["tokens_sent"]
    unmanaged = rows["unmanaged transcript (reference)"]
    assert unmanaged["breaks"] == 0 and unmanaged["cached_share"] > 0.5


def test_retention_scores_worksurface_and_the_baselines_at_every_target(results):
    r = results["retention"]
    assert r["available"]
    point = r["points"][0]
    assert point["probe_count"] > 0
    assert {"worksurface", "truncate", "mask"} <= set(point["methods"])
    for cells in point["methods"].values():
        assert set(cells) == {"1000", "3000"}
        assert all(0 <= c["fraction"] <= 1 and c["retained"] <= c["total"] for c in cells.values())
        assert all(isinstance(c["over_target"], bool) for c in cells.values())
    png = (results["out"] / retention.PLOT_FILE).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_results_render_to_markdown_and_strict_json(plan, results):
    sections = {k: v for k, v in results.items() if k != "out"}
    doc = {"command": plan.command, "mode": "smoke", "started_at": "now", "total_seconds": 1.0,
           "machine": {"cores": 2, "cpu": "x", "python": "3.11", "libraries": {"worksurface": "0"}},
           "sections": sections}
    md = entry.render(doc, plan)
    for heading in ("## Per-call overhead", "## Scale", "## Prompt-cache stability", "## Retention per token"):
        assert heading in md
    assert "python -m benchmarks --smoke" in md
    json.loads(dumps(doc))  # NaN written as null, so strict parsers accept it


def test_png_writer_produces_a_decodable_image(tmp_path):
    from matplotlib.image import imread

    path = tmp_path / "c.png"
    plot.line_chart([plot.Panel("T", "X", "Y", [plot.Series("a", [(1, 0.2), (2, 0.8)])])], path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    pixels = imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[::97]}) > 2  # more than white was drawn


def test_common_prefix_counts_whole_equal_messages_then_tokens_of_the_first_difference():
    counter = TokenCounter()
    a = Message("1", "user", (Text("hello world"),))
    b = Message("2", "assistant", (Text("one two three four"),))
    b2 = Message("other-id", "assistant", (Text("one two five"),))
    common = prefix.common_prefix_tokens([a, b], [a, b2], counter)
    assert common == counter.message(a) + 2
    assert prefix.common_prefix_tokens([a, b], [a, b], counter) == counter.messages([a, b])
    assert prefix.common_prefix_tokens([b], [a], counter) == 0


def test_partial_slope_separates_growth_with_the_view_from_growth_with_new_content():
    # Time = 1 + 0.5 per view unit + 2 per new unit, new content larger on bigger views: the plain slope
    # on the view mixes both, the fit with the new content as a second regressor finds 0.5 again.
    views = [10, 20, 30, 40, 50, 60]
    new = [1, 5, 2, 9, 4, 12]
    times = [1 + 0.5 * v + 2 * n for v, n in zip(views, new)]
    assert abs(partial_slope(views, new, times) - 0.5) < 1e-9
    assert slope(views, times) > 0.8
    assert partial_slope(views, [2 * v for v in views], times) != partial_slope(views, [2 * v for v in views], times)


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([0, 10], 95) == pytest.approx(9.5)


def test_store_section_compares_both_backends_and_checks_the_concurrent_run(plan, postgres_url, monkeypatch):
    from dataclasses import replace

    from benchmarks import store
    from shared import TRANSCRIPTS
    monkeypatch.setenv(store.BENCH_URL_ENV, postgres_url)
    r = store.run(replace(plan, store_sessions=2, store_calls=2))
    row = r["backends"]["rows"][0]
    for backend in ("diskcache", "postgres"):
        assert row[backend]["prepare_ms"]["n"] == row["calls"] > 3
        assert row[backend]["commit_ms"]["n"] >= 1 and row[backend]["stored_bytes"] > 0
    assert row["diskcache"]["records"] == row["postgres"]["records"]  # the same session, record for record
    c = r["concurrent"]
    if TRANSCRIPTS.exists():
        assert c["sessions"] == 2 and c["calls"] == 4 and c["records_ok"] and c["identical_views"] == 2
    assert "## Session store" in store.render(r, "caption")


def test_the_probe_table_sums_each_user_apart_and_names_the_user_of_a_field_session(tmp_path):
    from benchmarks import probe_table

    field = tmp_path / "transcripts" / "field" / "acme-cli" / "12" / "ab" / "0" / "full.jsonl"
    long = tmp_path / "transcripts" / "claude-code" / "258c.jsonl"
    assert probe_table.user_of(field) == "acme-cli"
    assert probe_table.user_of(long) == "claude-code"

    def session(user: str, kept: int, truncated: int) -> dict:
        methods = {"worksurface": {"retained": kept, "total": 35}, "truncate": {"retained": truncated, "total": 35}}
        return {"user": user, "runs": {"4000": {"methods": methods}}}

    results = {"sessions": {"a": session("acme-cli", 30, 10), "b": session("other", 20, 5),
                            "c": session("acme-cli", 25, 12)}}
    rows = probe_table.per_user_table(results, ["4000"])
    assert "| acme-cli (a, c) | worksurface | 55/70 (79%) |" in rows
    assert "| acme-cli (a, c) | truncate | 22/70 (31%) |" in rows
    assert "| other (b) | worksurface | 20/35 (57%) |" in rows
    assert rows.index("| other (b) | worksurface | 20/35 (57%) |") > rows.index("| acme-cli (a, c) | truncate | 22/70 (31%) |")
