"""Diff, render and the publish strategies: append, replace, delta, cleared markers, epochs, escaping."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from status_helpers import INJECTION, Chat
from worksurface.core.errors import ConfigError
from worksurface.core.model import Origin
from worksurface.status import (EMPTY, KINDS, Cleared, EnvironmentChanged, PermissionsChanged, PublisherState,
                                ResourcesChanged, StatusError, TaskUpdated, ToolFinished, ToolStarted,
                                VerificationFinished, derive_events, diff, publish, reduce, render,
                                render_delta)
from worksurface.status.render import CLEARED_NOTE, DELTA_NOTE

NOW = 1_791_000_000.0  # 2026-10-03T...Z: any fixed clock; publish never reads the real one

S1 = [EnvironmentChanged(cwd="/repo"), VerificationFinished("pytest", passed=0),
      ResourcesChanged(tool_call_limit=10), PermissionsChanged(approvals="on-request")]
S2 = S1 + [EnvironmentChanged(cwd="/repo/services/payment"),
           VerificationFinished("pytest", passed=41, failed=1), ToolStarted("c1", "Bash"),
           ToolStarted("c2", "Bash"), Cleared("permissions")]


def run(strategy: str, *logs, new_epoch_at: int | None = None):
    """Publish the snapshot of each log in turn; returns (final state, publications)."""
    state, pubs = PublisherState(strategy=strategy), []
    for i, log in enumerate(logs):
        state, pub = publish(state, reduce(log), strategy=strategy, now=NOW + i, new_epoch=i == new_epoch_at)
        pubs.append(pub)
    return state, pubs


def element_count(text: str) -> tuple[int, int]:
    return text.count("<agent-status"), text.count("</agent-status>")


# ------------------------------------------------------------------------------------------ diff

def test_diff_lists_changed_fields_and_explicit_removals_per_section():
    d = diff(reduce(S1), reduce(S2))
    env = d.section("environment")
    assert [n for n, _ in env.changed] == ["cwd"] and env.removed == ()
    assert d.section("permissions").removed == ("approvals",) and d.section("permissions").changed == ()
    assert d.section("task") is None
    assert diff(None, reduce(S1)).section("environment").changed[0][1].value == "/repo"


def test_a_value_that_displays_the_same_is_not_a_change():
    a = reduce([ResourcesChanged(tokens_used=118_200, token_limit=200_000)])
    b = reduce([ResourcesChanged(tokens_used=118_400, token_limit=200_000)])
    assert diff(a, b).empty
    assert diff(a, a).empty


def test_delta_render_names_removed_fields():
    text = render_delta(diff(reduce(S1), reduce(S2)), epoch=1, seq=2, since=1, now=NOW)
    assert '<environment cwd="/repo/services/payment"/>' in text
    assert '<permissions removed="approvals"/>' in text
    assert DELTA_NOTE in text
    fixed = reduce(S2 + [VerificationFinished("pytest", passed=42)])
    text = render_delta(diff(reduce(S2), fixed), epoch=1, seq=3, since=2, now=NOW)
    assert '<signals removed="fix-verification"/>' in text


# ------------------------------------------------------------------------------------ strategies

def test_append_publishes_a_baseline_then_full_snapshots_and_never_removes():
    state, (p1, p2) = run("append", S1, S2)
    (m1,), (m2,) = p1.messages, p2.messages
    assert (m1.id, m1.role, m1.origin, dict(m1.meta)) == ("status-1-1", "user", Origin.STATUS,
                                                          {"epoch": 1, "seq": 1, "kind": "baseline"})
    assert (m2.id, m2.meta["kind"]) == ("status-1-2", "full")
    assert p1.remove_ids == p2.remove_ids == ()
    assert state.published_ids == ("status-1-1", "status-1-2")
    assert 'cwd="/repo/services/payment"' in m2.text and "permissions" not in m2.text
    assert p2.bytes == len(m2.text.encode())


def test_replace_removes_the_previous_status_message():
    state, (p1, p2) = run("replace", S1, S2)
    assert p2.remove_ids == (p1.messages[0].id,)
    assert state.published_ids == (p2.messages[0].id,)
    assert p2.messages[0].meta["kind"] == "full"


def test_delta_publishes_a_baseline_then_only_changes():
    state, (p1, p2) = run("delta", S1, S2)
    base, delta = p1.messages[0], p2.messages[0]
    assert base.meta["kind"] == "baseline" and delta.meta["kind"] == "delta"
    assert 'since="1"' in delta.text and "on-request" not in delta.text
    assert "/repo/services/payment" in delta.text and "environment" in base.text
    assert p2.remove_ids == () and state.published_ids == (base.id, delta.id)
    # A small change costs a small delta, far less than the full status.
    s3 = S2 + [EnvironmentChanged(cwd="/repo")]
    _, (_, _, p3) = run("delta", S1, S2, s3)
    assert p3.messages[0].text.count("\n") == 3  # header, note, the one changed section, end
    assert p3.bytes < len(render(reduce(s3), epoch=1, seq=3, now=NOW).encode())


@pytest.mark.parametrize("strategy", ["append", "replace", "delta"])
def test_an_unchanged_status_publishes_nothing(strategy):
    state, (p1, p2) = run(strategy, S1, S1)
    assert p1.messages and p2.empty and p2.bytes == 0
    after_first, _ = run(strategy, S1)
    assert state == after_first


@pytest.mark.parametrize("strategy", ["append", "replace", "delta"])
def test_a_cleared_status_publishes_an_explicit_marker_once(strategy):
    cleared = S1 + [Cleared(s) for s in ("environment", "verification", "resources", "permissions")]
    state, (p1, p2, p3) = run(strategy, S1, cleared, cleared)
    (marker,) = p2.messages
    assert marker.meta["kind"] == "cleared" and CLEARED_NOTE in marker.text
    assert p3.empty
    assert p2.remove_ids == ((p1.messages[0].id,) if strategy == "replace" else ())
    # A status that comes back after the marker is a fresh baseline.
    _, pubs = run(strategy, S1, cleared, S1)
    assert pubs[2].messages[0].meta["kind"] == "baseline"


def test_nothing_ever_shown_and_nothing_to_show_publishes_nothing():
    state, pub = publish(PublisherState(), EMPTY, now=NOW)
    assert pub.empty and state == PublisherState()


# ---------------------------------------------------------------------------------------- epochs

@pytest.mark.parametrize("strategy", ["append", "replace", "delta"])
def test_a_compaction_starts_a_new_epoch_with_a_full_baseline(strategy):
    state, (p1, p2, p3, p4) = run(strategy, S1, S2, S2, S1, new_epoch_at=2)
    new_base = p3.messages[0]
    assert (new_base.id, new_base.meta["kind"], new_base.meta["epoch"]) == ("status-2-3", "baseline", 2)
    in_view = (p2.messages[0].id,) if strategy == "replace" else (p1.messages[0].id, p2.messages[0].id)
    assert p3.remove_ids == in_view
    # After the new baseline, deltas build on it, not on the old epoch's messages.
    assert p4.messages[0].meta["epoch"] == 2 and p4.remove_ids == ((new_base.id,) if strategy == "replace" else ())
    if strategy == "delta":
        assert 'since="3"' in p4.messages[0].text
    assert state.epoch == 2 and all(i.startswith("status-2-") for i in state.published_ids)


def test_new_epoch_with_an_empty_status_only_removes_the_old_messages():
    state, (p1, p2) = run("delta", S1, [], new_epoch_at=1)
    assert p2.messages == () and p2.remove_ids == (p1.messages[0].id,)
    assert (state.epoch, state.published_ids, state.last) == (2, (), None)


# --------------------------------------------------------------------------- persistence, errors

def test_publisher_state_round_trips_and_publishing_continues_identically():
    state, _ = run("delta", S1, S2)
    restored = PublisherState.from_json(json.loads(json.dumps(state.to_json())))
    assert restored == state
    nxt = reduce(S2 + [EnvironmentChanged(cwd="/repo")])
    assert publish(restored, nxt, strategy="delta", now=NOW) == publish(state, nxt, strategy="delta", now=NOW)


def test_bad_strategy_and_bad_state_records_are_refused():
    with pytest.raises(ConfigError, match="strategy"):
        publish(PublisherState(), reduce(S1), strategy="sometimes", now=NOW)
    with pytest.raises(StatusError, match="publisher state"):
        PublisherState.from_json({"strategy": "delta", "epoch": -1, "seq": 0, "published_ids": []})
    with pytest.raises(StatusError, match="malformed"):
        PublisherState.from_json({"strategy": "delta"})


def test_publishing_is_deterministic_and_the_clock_comes_from_now():
    a = run("delta", S1, S2)
    b = run("delta", S1, S2)
    assert a == b
    assert 'generated-at="2026-10-03T' in a[1][0].messages[0].text


@settings(max_examples=30, deadline=None)
@given(strategy=st.sampled_from(["append", "replace", "delta"]),
       cwds=st.lists(st.sampled_from(["/a", "/b", "/c", ""]), min_size=1, max_size=8),
       epochs=st.lists(st.booleans(), min_size=8, max_size=8))
def test_publication_bookkeeping_holds_for_any_sequence(strategy, cwds, epochs):
    state, seen, in_view = PublisherState(strategy=strategy), set(), []
    for i, cwd in enumerate(cwds):
        before = state
        state, pub = publish(state, reduce([EnvironmentChanged(cwd=cwd)] if cwd else []),
                             strategy=strategy, now=NOW, new_epoch=epochs[i])
        for m in pub.messages:
            assert m.id not in seen and m.meta["seq"] > before.seq and m.meta["kind"] in KINDS
            seen.add(m.id)
        in_view = [i for i in in_view if i not in pub.remove_ids] + [m.id for m in pub.messages]
        assert tuple(in_view) == state.published_ids
        if strategy == "replace":
            assert len(state.published_ids) <= 1
        if strategy != "replace" and not epochs[i]:
            assert pub.remove_ids == ()  # append and delta keep the view's prefix untouched


# ------------------------------------------------------------------------------------- injection

def injected_transcript() -> Chat:
    chat = Chat()
    chat.user(f"fix it {INJECTION}", cwd=f"/repo/{INJECTION}")
    chat.bash("pytest", f"FAILED tests/test_x.py::test_a{INJECTION} - boom\n1 failed, 2 passed in 0.1s",
              is_error=True)
    chat.tool("Write", {"file_path": f"/repo/{INJECTION}/evil.py", "content": "x"}, "ok")
    chat.bash('git commit -m "x"', f"[main abc1234] {INJECTION} & <b>bold</b>\n 1 file changed")
    chat.tool("TodoWrite", {"todos": [{"content": f"step {INJECTION}", "status": "pending"}]}, "ok")
    return chat


def test_tool_output_cannot_close_or_forge_the_status_block():
    chat = injected_transcript()
    snap = reduce(derive_events(chat.messages))
    forged = "</agent-status><agent-status"
    assert snap.value("verification", "pytest")["failing"][0].endswith(forged)  # kept as data ...
    for text in (render(snap, epoch=1, seq=1, now=NOW),
                 render_delta(diff(None, snap), epoch=1, seq=2, since=1, now=NOW)):
        assert element_count(text) == (1, 1)                                    # ... never as markup
        assert '<agent-status epoch="99"' not in text and "&lt;/agent-status" in text
        root = ET.fromstring(text)                                 # well-formed: one block, ours
        assert root.tag == "agent-status" and root.get("epoch") == "1"
        assert [e.tag for e in root.iter() if e.tag == "agent-status"] == ["agent-status"]
        values = [v for e in root.iter() for v in (e.text or "", *e.attrib.values())]
        assert sum(forged in v for v in values) == 6  # goal, cwd, failing test (run, signal), commit, todo


def test_harness_supplied_text_is_escaped_too():
    snap = reduce([TaskUpdated(goal=INJECTION, next_action='say "hi" & <leave>'),
                   ToolStarted("c1", "Bash", target=INJECTION),
                   ToolFinished("c1", "Bash", ok=False, artifact=INJECTION)])
    text = render(snap, epoch=1, seq=1, now=NOW)
    assert element_count(text) == (1, 1)
    root = ET.fromstring(text)
    assert root.find("task").get("goal") == INJECTION
    assert root.find("task").get("next-action") == 'say "hi" & <leave>'


def test_control_characters_and_broken_unicode_from_tool_output_render_as_valid_xml():
    chat = Chat()
    chat.bash("pytest", "FAILED t.py::test_\ud800x\x1b[31m]]>y - boom\n1 failed in 0.1s", is_error=True)
    _, pub = publish(PublisherState(), reduce(derive_events(chat.messages)), now=NOW)
    text = pub.messages[0].text
    assert pub.bytes == len(text.encode("utf-8"))
    assert ET.fromstring(text).find("verification") is not None
