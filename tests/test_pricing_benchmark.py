"""The cost section of the benchmarks on a tiny generated transcript: every method billed on the same
calls, the table rendered and one plot per transcript written (shape and sane values, no timings)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` lives at the repo root

from benchmarks import cost, replay  # noqa: E402
from benchmarks.plan import Plan  # noqa: E402
from fixturegen import write_session  # noqa: E402

METHODS = {"worksurface", "unmanaged transcript", "summarize at threshold", "sliding window (40k)",
           "LangChain ClearToolUsesEdit (100k, keep 3)", "OpenCode prune (protect 40k, min 20k)",
           "observation masking (10 turns)"}


def test_cost_section_bills_every_method_and_draws_a_plot(tmp_path):
    path = write_session(tmp_path / "tiny.jsonl", 8_000, seed=3)
    plan = Plan("smoke", [replay.Source("tiny", path)], repeats=1, baseline_stride=2, baseline_repeats=1,
                scale_sizes=(6_000,), scale_repeats=1)
    result = cost.run(plan, tmp_path, generated_tokens=0)
    rows = {r["method"]: r for r in result["rows"]}
    assert set(rows) == METHODS
    calls = len(replay.call_points(replay.load(plan.sources[0]).messages))
    for r in rows.values():
        assert r["calls"] == calls and r["cost_usd"] > 0 and 0 < r["cached_share"] <= 1
    # Under every trigger nothing is cleared or summarized: the unmanaged transcript is the cheapest
    # view, and the sliding window (which trims on every call) can only cost more.
    assert rows["unmanaged transcript"]["cost_usd"] <= rows["sliding window (40k)"]["cost_usd"]
    assert result["plots"] == ["cost-tiny.png"] and (tmp_path / "cost-tiny.png").stat().st_size > 5_000
    text = cost.render(result, "_caption_")
    assert "## Billed cost per session" in text and "| tiny | worksurface |" in text


def test_cost_rows_split_the_bill_into_reads_and_writes(tmp_path):
    path = write_session(tmp_path / "tiny.jsonl", 8_000, seed=3)
    plan = Plan("smoke", [replay.Source("tiny", path)], repeats=1, baseline_stride=2, baseline_repeats=1,
                scale_sizes=(6_000,), scale_repeats=1)
    for r in cost.run(plan, None, generated_tokens=0)["rows"]:
        plain = r["cost_usd"] - r["read_usd"] - r["write_usd"]
        # Plain input: only the first calls, under the provider's minimum cacheable prompt.
        assert r["read_usd"] > 0 and r["write_usd"] > 0 and -1e-3 <= plain <= 0.2 * r["cost_usd"]
        assert 0 < r["mean_view_tokens"] <= r["max_view_tokens"] and r["big_rewrites"] == 0
