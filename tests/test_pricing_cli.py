"""`worksurface replay --json` bills worksurface and every baseline, at the preset or custom prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.engine.pricing import PRESETS

SMALL = Path(__file__).resolve().parents[1] / "fixtures" / "small.jsonl"
BASELINES = {"unmanaged transcript", "summarize at threshold", "sliding window (40k)",
             "LangChain ClearToolUsesEdit (100k, keep 3)", "OpenCode prune (protect 40k, min 20k)",
             "observation masking (10 turns)"}


def _replay(*flags: str) -> dict:
    result = CliRunner().invoke(app, ["replay", str(SMALL), "--json", "--no-usage", *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def anthropic() -> dict:
    return _replay()


def test_every_call_and_the_summary_carry_the_cost_of_worksurface_and_each_baseline(anthropic):
    calls, cost = anthropic["calls"], anthropic["summary"]["cost"]
    assert cost["prices"]["name"] == "anthropic" and set(cost["baselines"]) == BASELINES
    assert all(c["cost"] > 0 and set(c["baselines"]) == BASELINES for c in calls)
    assert cost["worksurface"] == pytest.approx(sum(c["cost"] for c in calls), abs=1e-4)
    assert calls[-1]["total"] == pytest.approx(cost["worksurface"], abs=1e-6)
    for name in BASELINES:
        assert cost["baselines"][name]["cost"] == pytest.approx(sum(c["baselines"][name] for c in calls), abs=1e-4)


def test_presets_and_custom_prices_change_the_bill(anthropic):
    openai = _replay("--price", "openai", "--no-baselines")
    assert openai["summary"]["cost"]["prices"]["name"] == "openai" and not openai["summary"]["cost"]["baselines"]
    assert openai["summary"]["cost"]["worksurface"] < anthropic["summary"]["cost"]["worksurface"]
    doubled = _replay("--price-input", str(2 * PRESETS["anthropic"].input), "--price-cache-read",
                      str(2 * PRESETS["anthropic"].cache_read), "--price-cache-write",
                      str(2 * PRESETS["anthropic"].cache_write), "--no-baselines")
    assert doubled["summary"]["cost"]["prices"]["name"] == "anthropic (custom)"
    assert doubled["summary"]["cost"]["worksurface"] == pytest.approx(2 * anthropic["summary"]["cost"]["worksurface"],
                                                                       rel=1e-3)


def test_an_unknown_preset_is_a_clear_error():
    result = CliRunner().invoke(app, ["replay", str(SMALL), "--price", "acme"])
    # Refused before any work, naming the value and every preset there is.
    assert result.exit_code == 2 and "'acme' is not one of" in result.output
    assert all(name in result.output for name in ("anthropic", "openai", "gemini", "deepseek"))
