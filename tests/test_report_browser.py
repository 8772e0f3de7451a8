"""The report page in a real headless Chromium: loads with no console error and no request, one map
cell per message with colour counts equal to the report's JSON, a click on a cleared message shows
its artifact id, a screenshot is not blank, and the reinjector notes read as sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worksurface.cli import app
from worksurface.report.browser import BrowserUnavailable, find_chromium

ROOT = Path(__file__).resolve().parents[1]
LONG = ROOT / "fixtures" / "long.jsonl"
SMALL = ROOT / "fixtures" / "small.jsonl"
# A blank or single-colour page has (almost) no variance; the map, legend and charts give plenty.
MIN_PIXEL_VARIANCE = 200.0


def _skip_reason() -> str | None:
    try:
        find_chromium()
    except BrowserUnavailable as exc:
        return str(exc)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


# slow, and a real client: CI runs it (the README's test command takes `client` tests), Chromium from .ci/run.
pytestmark = [pytest.mark.slow, pytest.mark.client,
              pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")]


def _report(tmp_path: Path, *args: str) -> tuple[Path, dict]:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", *args, "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium (fresh profile) for the module; each test opens its page in a new tab."""
    from worksurface.report.browser import Chromium

    with Chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def long_page(tmp_path_factory):
    """One prepare of the long fixture: budgeted, snipped and cleared results, no compaction."""
    return _report(tmp_path_factory.mktemp("report"), str(LONG))


COLOURS_JS = """() => {
  const legend = {};
  document.querySelectorAll('#legend [data-fate]').forEach(s => {
    legend[getComputedStyle(s.querySelector('.sw')).backgroundColor] = s.getAttribute('data-fate');
  });
  const counts = {};
  const cells = document.querySelectorAll('#map > i');
  cells.forEach(c => {
    const fate = legend[getComputedStyle(c).backgroundColor] || 'unknown:' + getComputedStyle(c).backgroundColor;
    counts[fate] = (counts[fate] || 0) + 1;
  });
  return {cells: cells.length, counts: counts, legend: Object.keys(legend).length};
}"""


def test_page_loads_offline_and_its_colours_count_like_the_json(chromium, long_page):
    path, data = long_page
    with chromium.open(path) as opened:
        seen = opened.page.evaluate(COLOURS_JS)
        assert opened.console_errors == []
        assert opened.foreign_requests == [] and opened.requests == [opened.url]
    assert seen["legend"] == len(data["fates"])  # every fate has its own colour
    assert seen["cells"] == len(data["cells"])
    assert seen["counts"] == {f: n for f, n in data["counts"].items() if n}
    assert data["counts"]["cleared"] > 0 and data["counts"]["budgeted"] > 0


def test_clicking_a_cleared_message_shows_its_artifact_id(chromium, long_page):
    path, data = long_page
    index = next(i for i, c in enumerate(data["cells"]) if c["fate"] == "cleared")
    cell = data["cells"][index]
    with chromium.open(path) as opened:
        page = opened.page
        page.click(f'#map > i[data-i="{index}"]')
        detail = page.inner_text("#detail")
        assert opened.console_errors == []
    assert cell["artifact"] and cell["artifact"] in detail
    assert cell["id"] in detail and "cleared by microcompact" in detail and "microcompact" in detail


def test_screenshot_of_a_replay_with_probes_is_not_blank(chromium, tmp_path):
    from PIL import Image, ImageStat

    from worksurface.probes.derivation import derive
    from test_report_html import compacting_window
    from worksurface.formats import read_transcript
    from worksurface.core.tokens import TokenCounter

    transcript = read_transcript(SMALL)
    probes = derive(transcript.messages, SMALL.name, transcript.queued_inputs)
    probe_file = tmp_path / "probes.json"
    probes.save(probe_file)
    window, target = compacting_window(TokenCounter().messages(transcript.messages))
    path, data = _report(tmp_path, str(SMALL), "--replay", "--window", str(window), "--target", str(target),
                         "--probes", str(probe_file))
    shot = tmp_path / "report.png"
    with chromium.open(path) as opened:
        charts = opened.page.locator("svg.chart").count()
        opened.page.click('#map > i[data-i="0"]')
        opened.page.screenshot(path=str(shot), full_page=True)
        assert opened.console_errors == [] and opened.foreign_requests == []
    assert charts >= 4  # waterfall, sawtooth, cache share, retention curve
    assert data["replay"]["summary"]["compactions"] >= 1
    image = Image.open(shot).convert("L")
    assert image.size[1] > 1500  # the whole page, not one screen
    assert ImageStat.Stat(image).var[0] > MIN_PIXEL_VARIANCE
    assert sum(1 for n in image.histogram() if n) > 20  # many grey levels, not two


def test_the_harness_sees_console_errors_and_requests(chromium, tmp_path):
    """The checks above can fail: a page that errors and fetches is caught (the fetch aborted)."""

    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"><script>undefinedFunction()</script>'
                    "</body></html>", encoding="utf-8")
    with chromium.open(page) as opened:
        errors, foreign = list(opened.console_errors), opened.foreign_requests
    assert foreign == ["http://127.0.0.1:9/x.png"]
    assert any("undefinedFunction" in e for e in errors)


LEDGER_AND_TREE_JS = """() => {
  const heading = [...document.querySelectorAll('h3')].find(h => h.textContent.startsWith('Ledger ('));
  const rows = [];
  for (let el = heading && heading.nextElementSibling; el && el.tagName !== 'H2' && el.tagName !== 'H3';
       el = el.nextElementSibling) {
    el.querySelectorAll('tbody tr, tr').forEach(r => { if (r.querySelector('td')) rows.push(r.innerText); });
  }
  const nodes = [...document.querySelectorAll('svg.tree g.agent, svg.tree g.unlinked')].map(g => {
    const box = g.getBoundingClientRect();
    return {kind: g.getAttribute('class'), type: g.getAttribute('data-type'), text: g.textContent,
            width: box.width, height: box.height};
  });
  return {heading: heading ? heading.textContent : null, rows: rows, nodes: nodes};
}"""


def test_the_ledger_entries_and_the_sub_agent_tree_show_in_the_page(chromium, tmp_path):
    import cc_records
    from builders import words

    main_path, side_path = cc_records.subagent_pair(tmp_path / "projects", words, tokens=200)
    (side_path.parent / "agent-acompact-0f0f.jsonl").write_text(side_path.read_text())
    path, data = _report(tmp_path, str(main_path))
    entries = data["surface"]["ledger"]
    with chromium.open(path) as opened:
        seen = opened.page.evaluate(LEDGER_AND_TREE_JS)
        assert opened.console_errors == [] and opened.foreign_requests == []
    assert entries and seen["heading"] == f"Ledger ({len(entries)} entries)"
    assert len(seen["rows"]) == len(entries)  # one visible row per entry the JSON lists
    assert any("/repo/lib/p0.ex" in r for r in seen["rows"])
    kinds = [n["kind"] for n in seen["nodes"]]
    assert kinds == ["agent", "unlinked"]
    assert seen["nodes"][0]["type"] == "Explore" and "Explore: find panes" in seen["nodes"][0]["text"]
    assert all(n["width"] > 100 and n["height"] > 10 for n in seen["nodes"])  # drawn, not hidden


HARNESS_MARKS_JS = """() => {
  const charts = [...document.querySelectorAll('svg.chart')];
  const saw = charts.find(c => c.textContent.includes('view tokens per call'));
  const box = saw.getBoundingClientRect();
  const marks = [...saw.querySelectorAll('circle')].filter(c => {
    const t = c.querySelector('title');
    return t && t.textContent.startsWith("the harness's own compaction");
  }).map(c => { const b = c.getBoundingClientRect(); return {x: b.x, y: b.y, w: b.width, title: c.textContent}; });
  return {marks: marks, box: {x: box.x, y: box.y, w: box.width, h: box.height},
          legend: saw.textContent.includes("the harness's own compaction")};
}"""


def test_the_harness_s_own_compactions_are_marked_on_the_sawtooth(chromium, tmp_path):
    import cc_records
    from builders import words

    s = cc_records.Session()
    for k in range(3):  # three stretches of work, the harness compacting after the first two
        s.user(f"task {k}: refactor module {k}")
        for i in range(4):
            s.call("Read", {"file_path": f"/repo/m{k}{i}.py"}, words(900, seed=k * 10 + i))
        s.say(f"Task {k} done.")
        if k < 2:
            s._add(type="system", subtype="compact_boundary", content="Conversation compacted",
                   compactMetadata={"trigger": "auto", "preTokens": 9000})
            s._add(type="user", isCompactSummary=True,
                   message={"role": "user", "content": f"This session is being continued. Summary {k}."})
    src = tmp_path / "harness.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in s.records))
    path, data = _report(tmp_path, str(src), "--replay", "--no-usage", "--window", "60000")
    expected = [c for c in data["replay"]["calls"] if c["harness_compaction"]]
    with chromium.open(path) as opened:
        seen = opened.page.evaluate(HARNESS_MARKS_JS)
        assert opened.console_errors == [] and opened.foreign_requests == []
    assert len(expected) == 2 and len(seen["marks"]) == len(expected) and seen["legend"]
    box = seen["box"]
    for mark, call in zip(sorted(seen["marks"], key=lambda m: m["x"]), expected):
        assert box["x"] <= mark["x"] <= box["x"] + box["w"] and box["y"] <= mark["y"] <= box["y"] + box["h"]
        assert f": {call['call']}," in mark["title"]  # at the call the harness compacted before


def test_the_reinjector_notes_read_as_sentences_under_their_rows(chromium, tmp_path):
    """A compaction's reinjector table: each note sits on a line of its own across the columns (it used
    to be squeezed into a last column, one word per line), and the screenshot of the table has ink."""
    from PIL import Image, ImageStat

    path, data = _report(tmp_path, str(LONG), "--force")
    notes = [r["skipped"] for r in data["prepare"]["reinjected"] if r.get("skipped")]
    assert notes, "the forced compaction of the long fixture leaves some reinjector with nothing to add"
    shot = tmp_path / "reinjectors.png"
    with chromium.open(path) as opened:
        table = opened.page.locator("h3:has-text('Reinjectors') + table")
        table.screenshot(path=str(shot))
        boxes = opened.page.evaluate("""() => {
          const t = document.evaluate("//h3[starts-with(., 'Reinjectors')]/following-sibling::table[1]",
            document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
          const line = parseFloat(getComputedStyle(t.querySelector('tr.rownote td[colspan]')).lineHeight);
          return [...t.querySelectorAll('tr.rownote td[colspan]')].map(td => {
            const r = td.getBoundingClientRect();
            return {text: td.innerText, width: r.width, lines: Math.round((r.height - 3) / line)};
          });
        }""")
        assert opened.console_errors == []
    assert sorted(b["text"] for b in boxes) == sorted(notes)
    for box in boxes:
        assert box["lines"] <= 1 or box["width"] > 600, box  # a sentence on one line, or a wide block
    image = Image.open(shot).convert("L")
    assert ImageStat.Stat(image).var[0] > MIN_PIXEL_VARIANCE / 4  # text on white, not a blank strip
