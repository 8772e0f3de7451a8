"""The pytest plugin: `assert_retains` fails with a readable list of what was forgotten."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from worksurface.core.model import Message, Text
from worksurface.probes import Probe, assert_retains

pytest_plugins = ["pytester"]

# Once the `pytest11` entry point is installed pytest loads the plugin itself; loading it again
# with -p would register it twice.
INSTALLED = any(ep.value == "worksurface.probes.plugin" for ep in entry_points(group="pytest11"))
PLUGIN_ARGS = [] if INSTALLED else ["-p", "worksurface.probes.plugin"]

VIEW = [Message("m", "user", (Text("Summary: we edited lib/app.py and ran 12 tests."),))]
PROBES = [Probe("artifact-1", "artifact", ("lib/app.py",)),
          Probe("constraint-1", "constraint", ("no ad-hoc SQL",), "fuzzy:85", note="epic rule"),
          Probe("status-1", "status", ("13 tests",))]


def test_assert_retains_lists_forgotten_probes_with_their_categories():
    with pytest.raises(AssertionError) as err:
        assert_retains(VIEW, PROBES)
    text = str(err.value)
    assert "view retains 1/3 probes (33%), needs 100%" in text
    assert "  constraint-1 [constraint] 'no ad-hoc SQL' (fuzzy:85) - epic rule" in text
    assert "  status-1 [status] '13 tests' (exact)" in text
    assert "artifact-1" not in text


def test_assert_retains_passes_at_the_fraction_and_returns_the_score():
    score = assert_retains(VIEW, PROBES, min_fraction=0.33)
    assert score.by_category["artifact"] == (1, 1)
    prepared_like = type("Prepared", (), {"messages": VIEW})()
    assert assert_retains(prepared_like, PROBES[:1]).fraction == 1.0


def test_plugin_fixtures_in_a_user_test_suite(pytester):
    pytester.makefile(".json", probes='{"probes": [{"id": "plan-1", "category": "plan", '
                                      '"needles": ["write the migration"], "match": "exact"}]}')
    pytester.makepyfile("""
        from worksurface.core.model import Message, Text

        VIEW = [Message("u", "user", (Text("Next: write the tests."),))]

        def test_forgets(assert_retains):
            assert_retains(VIEW, "probes.json")

        def test_session(worksurface_session):
            prepared = worksurface_session.prepare(VIEW)
            assert "u" in [m.id for m in prepared.messages]
    """)
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*view retains 0/1 probes (0%), needs 100%; forgotten:*",
                                 "*plan-1 ?plan? 'write the migration' (exact)*"])
