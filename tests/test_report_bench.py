"""The benchmark section for the report page, on a tiny plan: it measures sizes and (when Chromium is
there) open times for every transcript and a generated one, and renders its table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` lives at the repo root

from benchmarks import report_page, replay  # noqa: E402
from benchmarks.plan import Plan  # noqa: E402
from fixturegen import write_session  # noqa: E402


@pytest.mark.slow
def test_report_section_measures_size_and_open_time(tmp_path, monkeypatch):
    monkeypatch.setattr(report_page, "OPENS", 1)
    path = write_session(tmp_path / "tiny.jsonl", 8_000, seed=3)
    plan = Plan("smoke", [replay.Source("tiny", path)], repeats=1, baseline_stride=2, baseline_repeats=1,
                scale_sizes=(6_000, 12_000), scale_repeats=1)
    result = report_page.run(plan)
    rows = result["rows"]
    assert [r["transcript"] for r in rows] == ["tiny", "generated 12,000 tokens"]
    for r in rows:
        assert r["cells"] >= r["messages"] > 10 and 0 < r["bytes"] < report_page.TARGET_BYTES
        assert r["build_s"] > 0
        if not result["notes"]:  # a browser was there: every cell drawn, nothing logged or fetched
            assert r["open_s"] > 0 and r["all_cells_drawn"] and r["console_errors_or_requests"] == 0
    md = report_page.render(result, "_caption_")
    assert md.startswith("## Report page") and "generated 12,000 tokens" in md
