"""Per-call work follows what is new, not the size of the session: the session's running token
totals equal a full recount after any replay (appends, rewinds, compactions), and a call where no
stage fires reads, counts and folds only the messages new since the previous call."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from builders import Convo, words
from worksurface import Session
from worksurface.session.session import NOTHING_NEW
from worksurface.session.memstore import MemoryStore
from worksurface.core.tokens import TokenCounter

# Small windows so a short generated session crosses the thresholds and compacts.
SMALL = {"window": 12_000, "post_compact_target_tokens": 4_000}


def _convo(rounds: int, seed: int) -> Convo:
    c = Convo()
    c.system("You are a coding agent.")
    c.user("Port the parser to the new API.")
    for i in range(rounds):
        c.tool("Read", {"file_path": f"/repo/mod{(seed + i) % 4}.py"}, words(150 + 40 * ((seed + i) % 5), seed=seed + i))
        c.tool("Bash", {"command": f"pytest -q tests/test_{i}.py"}, f"{i + 1} passed in 0.{i % 9}s")
        if i % 4 == 3:
            c.user(f"Also handle case {i}.")
        c.say(f"round {i} done")
    return c


def _assert_totals_match(session: Session, prepared) -> None:
    fresh = TokenCounter()
    view, tokens = session._view_tokens  # the running total the next call starts from
    assert view is prepared.messages or view == prepared.messages
    assert tokens == fresh.messages(prepared.messages)
    assert session._log_tokens[-1] == fresh.messages(session._log)
    assert len(session._log_tokens) == len(session._log) + 1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["grow", "rewind", "compact"]), st.integers(1, 12)),
                min_size=3, max_size=10),
       st.integers(0, 50))
# A rewind after a compaction restarted the status ids at epoch 1 while the compaction's reinjected
# status (epoch 2) stayed in the view; the next compaction published the same id again.
@example(steps=[("grow", 1), ("compact", 1), ("grow", 1), ("rewind", 1), ("compact", 1)], seed=0)
def test_running_totals_equal_a_full_recount_after_rewinds_and_compactions(steps, seed):
    messages = _convo(30, seed).messages
    with Session.open(None, **SMALL) as session:
        n = 3
        prepared = session.prepare(messages[:n], now=0.0)
        _assert_totals_match(session, prepared)
        for k, (action, amount) in enumerate(steps, 1):
            if action == "rewind":
                n = max(2, n - amount)
            else:
                n = min(len(messages), n + amount)
            if action == "compact":
                prepared = session.compact(messages[:n], now=float(k))
            else:
                prepared = session.prepare(messages[:n], now=float(k))
            _assert_totals_match(session, prepared)
            if prepared.report.stages[0].skipped != NOTHING_NEW:  # a repeat reports the view it returns again
                assert prepared.report.tokens_before == TokenCounter().messages(messages[:n])


def test_reopened_session_continues_the_totals(tmp_path):
    messages = _convo(12, 3).messages
    with Session.open(tmp_path / "s", **SMALL) as session:
        session.prepare(messages[:20], now=0.0)
    with Session.open(tmp_path / "s", **SMALL) as again:
        prepared = again.prepare(messages[:26], now=1.0)
        _assert_totals_match(again, prepared)


class _Spy(TokenCounter):
    """Counts every message the core asks the size of (memoized or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def message(self, message):  # type: ignore[override]
        self.asked += 1
        return super().message(message)


def test_a_no_fire_call_reads_only_the_new_messages():
    c = _convo(60, 1)
    spy = _Spy()
    with Session.open(None) as s:  # default 200k window: nothing fires on this session
        session = Session(s.store, s.config, counter=spy)
        session.prepare(c.messages[:-6], now=0.0)
        session.prepare(c.messages[:-3], now=1.0)
        view_size = len(session.view())
        assert view_size > 200
        encoded, asked, folded = spy.encoded, spy.asked, session.ledger.folded
        prepared = session.prepare(c.messages, now=2.0)
        assert all(st.skipped for st in prepared.report.stages)  # a no-fire call
        new = 3
        # Counting: only the new messages and the status publication, not the view.
        assert spy.asked - asked <= 4 * new + 12, (spy.asked - asked, view_size)
        assert spy.encoded - encoded <= 4 * new + 8
        # Recovery re-reads the new messages and the last assistant turn; nothing read the ledger, so
        # it folded nothing (the status bar read the new messages on the ledger's walk).
        assert session._recovery.recomputed <= new + 4
        assert session.ledger.folded == folded and session.ledger.pending
        assert session.status_bar.derived.seen == len(c.messages)
        assert prepared.report.cost > 0 and prepared.report.cost_total > prepared.report.cost


def test_cost_is_in_the_report_and_survives_a_reopen(tmp_path):
    c = _convo(20, 2)
    with Session.open(tmp_path / "s") as session:
        first = session.prepare(c.messages[:30], now=0.0).report
        second = session.prepare(c.messages[:40], now=10.0).report
    assert second.cost_total == first.cost + second.cost
    # The second call reads the first call's view from the cache: cheaper per token than writing it.
    assert second.cost < first.cost * 40 / 30 * 1.25
    with Session.open(tmp_path / "s") as again:
        third = again.prepare(c.messages, now=20.0).report
    assert abs(third.cost_total - (second.cost_total + third.cost)) < 1e-9
    data = third.to_json()
    assert data["cost"] == round(third.cost, 6) and data["cost_total"] == round(third.cost_total, 6)


def test_compact_json_carries_the_billed_cost(tmp_path):
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from worksurface.cli import app
    from worksurface.engine.pricing import PRESETS

    small = Path(__file__).resolve().parents[1] / "fixtures" / "small.jsonl"
    res = CliRunner().invoke(app, ["compact", str(small), "-o", str(tmp_path / "out.jsonl"), "--force", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    # A one-shot compaction is one cold call: every token of the view is written to the cache.
    anthropic = PRESETS["anthropic"]
    assert data["cost"] > 0 and data["cost_total"] == data["cost"]
    assert data["cost"] <= data["tokens_after"] * 2 * anthropic.cache_write / 1_000_000


def test_the_running_bill_equals_an_independent_bill_of_the_returned_views():
    from worksurface import Config
    from worksurface.engine.pricing import PromptCache, price_model

    messages = _convo(40, 5).messages
    cache = PromptCache(price_model(Config().pricing), TokenCounter())
    with Session.open(None, **SMALL) as session:
        for k, n in enumerate(range(6, len(messages) + 1, 5)):
            now = 100.0 * k if k != 4 else 100.0 * k + 3_600  # one idle gap: the cache goes cold
            prepared = session.prepare(messages[:n], now=now)
            billed = cache.send(prepared.messages, now)
            assert abs(prepared.report.cost - billed.cost) < 1e-12
            assert abs(prepared.report.cost_total - billed.total) < 1e-9


def test_a_session_and_its_store_count_with_one_counter(tmp_path) -> None:
    """An output counted for the view is not encoded again when a stage stores it as an artifact
    (an empty counter passed in is still the one used: it once read as false and was replaced)."""
    for location in (None, tmp_path / "s"):
        with Session.open(location) as session:
            assert session.store.counter is session.counter
    counter = TokenCounter()
    store = MemoryStore(counter)
    with Session.open(store) as session:
        assert session.counter is counter
    encoded: list[str] = []
    real = counter._enc.encode_ordinary
    counter._enc = SimpleNamespace(encode_ordinary=lambda text: encoded.append(text) or real(text))
    output = words(400, seed=3)
    counted = counter.text(output)
    assert store.put_artifact(output, kind="tool_result").tokens == counted and encoded == [output]
