"""The report page without a browser: one map cell per message, the page's counts equal the data's,
nothing fetched, the SVG charts, the size bound, and the `worksurface report` command."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.formats import read_transcript
from worksurface.probes.derivation import derive
from worksurface.report import build_report, render_html
from worksurface.report.data import TEXT_BUDGET_CHARS, text_chars
from worksurface.report.fates import Fate
from worksurface.report.html import FATE_INDEX
from worksurface.report.svg import Bar, Chart, Series, before_after_bars, line_chart, nice_ticks
from worksurface.core.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "fixtures" / "small.jsonl"
LONG = ROOT / "fixtures" / "long.jsonl"


class _Page(HTMLParser):
    """Map cells (their classes), JSON scripts by id, and every attribute that could fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.scripts: dict[str, str] = {}
        self.fetching: list[str] = []
        self._in_map = 0
        self._script: str | None = None
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"] or "")
        if tag == "div" and a.get("id") == "map":
            self._in_map = 1
        elif tag == "div" and self._in_map:
            self._in_map += 1
        if tag == "i" and self._in_map:
            self.cells.append(a.get("class") or "")
        if tag == "script":
            self._script = a.get("id")
            if a.get("src"):
                self.fetching.append(f"script src={a['src']}")
        for name in ("src", "href", "srcset", "poster", "action"):
            if a.get(name) and tag != "script":
                self.fetching.append(f"{tag} {name}={a[name]}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._in_map:
            self._in_map -= 1
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script:
            self.scripts[self._script] = self.scripts.get(self._script, "") + data


def parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


@pytest.fixture(scope="module")
def long_report() -> dict:
    return build_report(read_transcript(LONG), source=LONG.name)


@pytest.fixture(scope="module")
def small_full(tmp_path_factory) -> dict:
    """small.jsonl replayed with a window small enough to compact, with probes."""
    from worksurface.core.config import Config

    transcript = read_transcript(SMALL)
    probes = derive(transcript.messages, SMALL.name, transcript.queued_inputs)
    window, target = compacting_window(TokenCounter().messages(transcript.messages))
    config = Config().with_overrides(window=window, post_compact_target_tokens=target)
    return build_report(transcript, source=SMALL.name, config=config, replay=True, probes=probes)


def compacting_window(tokens: int) -> tuple[int, int]:
    """A window whose autocompact threshold is about half the transcript (so a replay compacts a few
    times, whatever the config's reserve rule), and a post-compact target well under it."""
    from worksurface.core.config import Config

    for window in range(2_000, 200_001, 250):
        threshold = Config().with_overrides(window=window).threshold
        if threshold >= tokens // 2:
            return window, max(500, threshold // 3)
    raise AssertionError(f"no window gives a threshold near {tokens // 2}")


def test_one_cell_per_message_and_the_page_counts_equal_the_data(long_report):
    data = long_report
    page = parse(render_html(data))
    transcript = read_transcript(LONG)
    assert len(page.cells) == len(data["cells"])
    assert sum(c["source"] == "transcript" for c in data["cells"]) == len(transcript.messages)
    by_class = Counter(re.search(r"\bf(\d+)\b", c).group(1) for c in page.cells)  # type: ignore[union-attr]
    assert {int(k): v for k, v in by_class.items()} == {FATE_INDEX[f]: n for f, n in data["counts"].items() if n}
    # One prepare of the long fixture budgets, snips and clears, without compacting.
    assert data["counts"]["budgeted"] == 2 and data["counts"]["cleared"] > 0 and data["counts"]["snipped"] > 0
    assert data["counts"]["summarized"] == 0
    cells = json.loads(page.scripts["cell-data"])
    fields = json.loads(page.scripts["cell-fields"])
    assert len(cells) == len(data["cells"])
    fate_at = fields.index("fate")
    assert Counter(c[fate_at] for c in cells) == Counter({f: n for f, n in data["counts"].items() if n})
    artifact_at = fields.index("artifact")
    assert all(c[artifact_at] for c in cells if c[fate_at] in ("budgeted", "cleared"))


def test_the_page_fetches_nothing_and_forbids_fetching(long_report):
    html = render_html(long_report)
    page = parse(html)
    assert page.fetching == []
    assert "default-src 'none'" in html
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", html)


def test_message_text_cannot_break_out_of_the_page():
    from builders import Convo

    c = Convo()
    c.user("</script><script>alert(1)</script><img src=http://example.com/x.png>")
    c.say("ok")
    page_html = render_html(build_report(_transcript(c.messages), source="evil.jsonl"))
    page = parse(page_html)
    assert page.fetching == [] and "alert(1)</script>" not in page_html
    assert set(page.scripts) >= {"cell-data", "cell-fields", "fate-labels"}
    cells = json.loads(page.scripts["cell-data"])
    assert "</script><script>alert(1)" in cells[0][json.loads(page.scripts["cell-fields"]).index("before")]


def _transcript(messages):
    from worksurface.formats.base import Transcript

    return Transcript(messages=messages, format="openai")


def test_replay_and_probe_sections(small_full):
    data = small_full
    replay = data["replay"]
    assert replay["summary"]["compactions"] >= 1 and len(replay["calls"]) > 5
    assert all(0 <= c["cached_tokens"] <= c["view_tokens"] for c in replay["calls"])
    assert 0 < replay["summary"]["cache_share"] <= 1
    assert data["last_compaction"] is not None and data["last_compaction"]["report"]["boundary"]
    probes = data["probes"]
    assert "worksurface" in probes["curve"] and "truncate" in probes["curve"]
    assert probes["main_target"] in probes["targets"]
    for points in probes["curve"].values():
        assert all(0 <= p["fraction"] <= 1 for p in points)
    html = render_html(data)
    for heading in ("Message map", "Stage waterfall", "The surface", "Replay", "Forgetting probes"):
        assert f"<h2>{heading}</h2>" in html
    assert html.count('class="vmark"') >= 2 * replay["summary"]["compactions"]  # sawtooth and share charts
    costs = [c["cost"] for c in replay["calls"]]
    assert all(c >= 0 for c in costs) and replay["summary"]["total_cost"] == pytest.approx(sum(costs), abs=1e-5)
    assert replay["summary"]["total_cost"] > 0 and "Billed cost: $" in html


def test_surface_lists_summary_and_reinjections_by_kind():
    data = build_report(read_transcript(SMALL), source=SMALL.name, force=True)
    surface = data["surface"]
    assert surface["summary"] and surface["summary_id"].startswith("summary-")
    assert surface["reinjected"] and all(e["text"] for es in surface["reinjected"].values() for e in es)
    html = render_html(data)
    assert f"({surface['summary_id']})" in html
    for kind in surface["reinjected"]:
        assert f"<b>{kind}</b>" in html


def test_ledger_entries_render_by_kind():
    from worksurface.report.html import ledger_section

    html = ledger_section([{"kind": "constraint", "text": "no <SQL>", "source_id": "m1"},
                           {"kind": "request", "text": "fix it", "source_id": "m0"},
                           {"kind": "constraint", "text": "pytest only", "source_id": "m2"}])
    assert "Ledger (3 entries)" in html and "<b>constraint</b> (2)" in html and "no &lt;SQL&gt;" in html
    counted = ledger_section([], {"constraints": 4, "files": 0})
    assert "constraints 4" in counted and "files" not in counted


def test_text_budget_keeps_large_transcripts_small():
    assert text_chars(10) == 400
    for n in (1_000, 5_000, 20_000, 100_000):
        assert text_chars(n) * 2 * n <= max(TEXT_BUDGET_CHARS, 2 * 60 * n)


def test_svg_helpers_draw_every_series_and_mark():
    svg = line_chart(Chart([Series("a", [(0, 1), (1, 3), (2, 2)]), Series("b", [(1, 2)], markers_only=True)],
                           hlines=[(2.5, "threshold")], vmarks=[(1, "compaction")]))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<path") == 1 and svg.count("<circle") == 4 and 'class="vmark"' in svg
    assert ">threshold<" in svg and ">a<" in svg and ">b<" in svg
    bars = before_after_bars([Bar("budget", 100, 60), Bar("snip", 60, 60)])
    assert bars.count("<rect") == 4 and "(−40)" in bars
    assert nice_ticks(0, 1) == [0, 0.25, 0.5, 0.75, 1.0]


def test_cli_writes_the_page_and_prints_the_data(tmp_path):
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(SMALL), "-o", str(out), "--force", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    page = parse(out.read_text(encoding="utf-8"))
    assert len(page.cells) == len(data["cells"]) == sum(data["counts"].values())
    assert data["counts"]["summarized"] > 0 and data["output"] == str(out)
    assert data["bytes"] == out.stat().st_size


def test_cli_errors_name_the_problem(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(app, ["report", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "r.html")])
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    probes = runner.invoke(app, ["report", str(SMALL), "-o", str(tmp_path / "r.html"), "--probes", str(bad)])
    assert probes.exit_code == 2 and "bad.json" in probes.output
    cut = runner.invoke(app, ["report", str(SMALL), "-o", str(tmp_path / "r.html"), "--at", "boundary"])
    assert cut.exit_code == 2 and "boundary" in cut.output
    assert not (tmp_path / "r.html").exists()


def test_fates_legend_covers_every_fate(long_report):
    assert [f["fate"] for f in long_report["fates"]] == [f.value for f in Fate]


def test_artifact_ids_on_the_page_fetch_the_originals_from_the_saved_session(tmp_path):
    from worksurface import Session

    out, session_dir = tmp_path / "r.html", tmp_path / "session"
    result = CliRunner().invoke(app, ["report", str(LONG), "-o", str(out), "--session", str(session_dir),
                                      "--at", "400", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["source"]["messages"] == 400 and data["source"]["cut_from"] > 400
    originals = {m.id: m for m in read_transcript(LONG).messages[:400]}
    replaced = [c for c in data["cells"] if c["artifact"]]
    assert replaced
    with Session.open(session_dir) as session:
        for c in replaced:
            content = session.artifact(c["artifact"])
            assert content in {r.content for r in originals[c["id"]].tool_results}
