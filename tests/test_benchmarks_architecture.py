"""benchmarks/architecture.py: the issue-53 figures are read from the source by its AST."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` lives at the repo root

from benchmarks import architecture  # noqa: E402


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_meta_reads_are_counted_by_key_outside_formats_only(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pipeline/core/a.py": "def f(m):\n    return m.meta.get('epoch'), m.meta['kind'], 'raw' in m.meta, m.meta.get('epoch')\n",
        "pipeline/core/b.py": "def g(m):\n    m.meta['written'] = 1\n    return m.other.get('x')\n",
        "pipeline/formats/c.py": "def h(m):\n    return m.meta.get('format_only')\n",
    })
    assert architecture.meta_reads(root) == {"epoch": 2, "kind": 1, "raw": 1}


def test_status_modules_that_parse_are_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pipeline/status/a.py": "import re\n",
        "pipeline/status/b.py": "from ..facts.todos import TodoItem\n",
        "pipeline/status/c.py": "from ..core.model import Message\n",
    })
    assert architecture.status_parsers(root) == ["pipeline/status/a.py (re)", "pipeline/status/b.py (facts)"]


def test_skip_reasons_read_by_their_text_are_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "stages/a.py": "def f(r):\n    return r.skipped.startswith('stopped'), r.skipped == 'under target', r.outcome is None\n",
    })
    assert architecture.skip_text_matches(root) == ["stages/a.py:2", "stages/a.py:2"]


def test_the_live_tree_is_measured() -> None:
    figures = architecture.measure(Path(__file__).resolve().parents[1])
    assert figures["stage_context_fields"] == len(figures["details"]["stage_context_fields"]) > 0
    assert "ledger" in figures["details"]["session_attributes"]
