"""Matching rules: what counts as a view still showing a probe's facts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult
from worksurface.probes import Probe, retained, score
from worksurface.probes.match import haystack, needle_visible, normalize


def probe(*needles: str, match: str = "exact", category: str = "artifact", id: str = "p") -> Probe:
    return Probe(id, category, needles, match)


def test_exact_folds_case_and_whitespace():
    text = haystack("The  Migration file is\n   priv/repo/MIGRATIONS/add_state.exs\tnow.")
    assert retained(probe("migration file is priv/repo/migrations/ADD_STATE.exs"), text)
    assert not retained(probe("migration file was"), text)


def test_exact_is_a_substring_not_a_paraphrase():
    text = haystack("ran 73 tests, 0 failures")
    assert retained(probe("73 tests"), text)
    assert not retained(probe("74 tests"), text)


def test_fuzzy_threshold_decides():
    text = haystack("Latest user request: new beads for the epic where added, tackle them all.")
    needle = "new beads for the epic were added"
    assert not retained(probe(needle), text)  # one letter differs: not an exact match
    assert retained(probe(needle, match="fuzzy:85"), text)
    assert not retained(probe(needle, match="fuzzy:99"), text)
    assert not retained(probe("an entirely different sentence", match="fuzzy:85"), text)


def test_fuzzy_does_not_match_a_view_shorter_than_the_needle_by_a_fragment():
    # partial_ratio alone would align "gqc" inside the needle and score 100.
    assert not needle_visible("Implement spotter-gqc today", haystack("gqc"), 85)
    assert needle_visible("Implement spotter-gqc", haystack("implement spotter-gqc!"), 85)


def test_every_needle_is_required():
    text = haystack("mix compile --warnings-as-errors")
    both = probe("--warnings-as-errors", "credo --strict")
    assert not retained(both, text)
    assert retained(both, haystack("mix compile --warnings-as-errors && mix credo --strict"))


def test_a_cleared_result_does_not_show_its_old_content():
    call = ToolCall("c1", "Read", {"file_path": "/repo/lib/config.ex"})
    full = [Message("a", "assistant", (call,)),
            Message("r", "user", (ToolResult("c1", "config :app, secret_key_base: 123"),))]
    cleared = [full[0], Message("r", "user", (ToolResult(
        "c1", "[Old tool result content cleared: Read /repo/lib/config.ex, 40 tokens, artifact a1]"),))]
    secret = probe("secret_key_base")
    path = probe("lib/config.ex")
    assert retained(secret, haystack(full))
    assert not retained(secret, haystack(cleared))
    assert retained(path, haystack(cleared))  # the call and the placeholder still name the file


def test_worksurface_messages_count_like_any_text():
    summary = Message("sum", "user", (Text("Standing constraint: no ad-hoc SQL."),), Origin.SUMMARY)
    assert score([summary], [probe("no ad-hoc SQL", category="constraint")]).fraction == 1.0


def test_tool_call_inputs_match_despite_json_escaping():
    call = ToolCall("c", "Bash", {"command": 'git commit -m "Add poll helper"\ngit push'})
    view = [Message("a", "assistant", (call,))]
    assert retained(probe('git commit -m "Add poll helper" git push'), haystack(view))


def test_score_counts_per_category_in_standard_order():
    text = "request: fix login. file tests/test_login.py"
    probes = [probe("tests/test_login.py", category="artifact", id="a1"),
              probe("fix login", category="request", id="r1"),
              probe("missing", category="request", id="r2")]
    s = score(text, probes)
    assert list(s.by_category) == ["request", "artifact"]
    assert s.by_category == {"request": (1, 2), "artifact": (1, 1)}
    assert [p.id for p in s.forgotten] == ["r2"]
    assert s.to_json() == {"retained": 2, "total": 3, "by_category": {"request": [1, 2], "artifact": [1, 1]},
                           "forgotten": ["r2"]}
    assert score(text, []).fraction == 1.0


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=5, max_size=40).filter(lambda s: normalize(s)), st.text(max_size=40),
       st.text(max_size=40))
def test_a_needle_is_always_visible_in_text_that_contains_it(needle, left, right):
    text = haystack(left + " " + needle + " " + right)
    assert needle_visible(needle, text)
