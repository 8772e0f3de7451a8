"""A session tells the parts that remember its previous view (the bill, the digest, the checks, the
protected ids, the log's sync) when the new view begins with that one, so they skip their own pass over
the whole view. The slow path is the specification: with the hints, every output equals the one
computed without them, on random sessions (appends, rewinds, re-parsed histories, harness clearings,
stages firing)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from hypothesis import HealthCheck, given, settings, strategies as st

from builders import Convo, words
from worksurface import Config, Session
from worksurface.core.model import Message, Origin, Text
from worksurface.core.tokens import TokenCounter
from worksurface.core.view import IncrementalRecovery, clean_recovered, close_interrupted, live_slice
from worksurface.engine.pricing import PromptCache, _common_prefix, _common_token_prefix, price_model, same_content
from worksurface.engine.protection import ProtectedIds, protected_ids
from worksurface.session.outputcheck import OutputChecks, view_digest

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Forgetful(IncrementalRecovery):
    """Recovery that never says what it gave or was given again: the session compares its whole log,
    the ledger its whole transcript."""

    def __call__(self, full: Sequence[Message]) -> Any:
        out = super().__call__(full)
        self.previous, self.transcript_previous = None, None
        return out


class _NoHints(Session):
    """The specification: every part compares the whole view itself."""

    def _load(self) -> None:
        super()._load()
        self._recovery = _Forgetful()

    def _current_view(self, live: list[Message], keep: int) -> tuple[list[Message], list[Message] | None]:
        return super()._current_view(live, keep)[0], None

    def _known_tokens(self, view: list[Message], extends: bool = False) -> int:
        return super()._known_tokens(view)


def _transcript(steps: list[int]) -> list[Message]:
    c = Convo().user("port the module, file by file")
    for i, kind in enumerate(steps):
        if kind == 0:
            c.tool("Read", {"file_path": f"/repo/m{i % 5}.py"}, words(400 + 50 * (i % 3), seed=i))
        elif kind == 1:
            c.tool("Bash", {"command": "pytest -q"}, f"{i} passed")
        elif kind == 2:
            c.say(f"step {i} done")
            c.user(f"go on with step {i + 1}")
        else:
            c.tool("Read", {"file_path": "/repo/same.py"}, words(500, seed=7))  # the same output again
    return c.messages


def _reparsed(messages: list[Message]) -> list[Message]:
    """The same history as new objects (a harness that parses its file again)."""
    return [dataclasses.replace(m) for m in messages]


def _outputs(session_type: type[Session], full: list[Message], plan: list[tuple[int, int]],
             status_strategy: str = "delta") -> list[Any]:
    config = Config().with_overrides(microcompact={"trigger_tokens": 2_000, "clear_at_least": 200},
                                     status_strategy=status_strategy)
    out = []
    with session_type.open(None, config=config) as session:
        history = list(full)
        for k, (end, how) in enumerate(plan):
            sent = history[:end]
            if how == 1:
                sent = _reparsed(sent)
            elif how == 2 and sent:
                sent = sent[:-1]  # a rewind of the last message
            elif how == 4 and sent:
                # Another reader has the session's ledger read an edited history (as `worksurface
                # brief` does): the next call's transcript is not what the ledger read last.
                edited = list(sent)
                edited[0] = edited[0].with_blocks((Text("forget the port: write the release notes"),))
                session.ledger.update(edited)
            prepared = session.prepare(sent, now=1_000.0 + (400.0 if how == 3 else 10.0) * k)
            r = prepared.report
            out.append((view_digest(prepared.messages), r.view_tokens_before, r.tokens_after, r.cost, r.cost_total,
                        [(s.name, s.tokens_before, s.tokens_after, str(s.outcome), s.items) for s in r.stages],
                        json.dumps(r.status, sort_keys=True, default=str), prepared.cache_edits, r.notices,
                        [m.digest for m in session._log],
                        {key: session.store._get(key) for key in sorted(session.store._keys())}))
    return out


@FAST
@given(st.lists(st.integers(0, 3), min_size=4, max_size=24),
       st.lists(st.tuples(st.integers(1, 100), st.sampled_from([0, 0, 0, 1, 2, 3, 4])), min_size=2, max_size=12),
       st.sampled_from(["delta", "replace", "append"]))
def test_a_session_with_the_hints_decides_what_one_without_them_decides(steps: list[int],
                                                                       calls: list[tuple[int, int]],
                                                                       status_strategy: str) -> None:
    full = _transcript(steps)
    # Mostly growing calls, as a harness makes them; a rewind or a re-parse now and then.
    ends = sorted(max(1, len(full) * e // 100) for e, _ in calls)
    plan = [(end, how) for end, (_, how) in zip(ends, calls)]
    # "replace" removes the previous status message on every call: a view that does not only grow.
    assert _outputs(Session, full, plan, status_strategy) == _outputs(_NoHints, full, plan, status_strategy)


def test_the_hinted_session_skips_the_whole_log_compare_on_a_growing_session() -> None:
    full = _transcript([0, 1, 2] * 6)
    hinted = 0
    with Session.open(None) as session:
        for end in range(4, len(full) + 1, 3):
            committed = session._log_source  # the recovered list the log was last committed from
            session.prepare(full[:end], now=1_000.0 + end)
            recovery = session._recovery
            if committed is not None and recovery.previous is committed:
                hinted += 1
                assert recovery.unchanged >= end // 2  # most of the log is known without a compare
    assert hinted == len(range(4, len(full) + 1, 3)) - 1  # every call after the first


# --- the parts, each against its slow path --------------------------------------------------------

def _old_common_prefix(previous: Sequence[Message], current: Sequence[Message],
                       counter: TokenCounter) -> tuple[int, bool]:
    """The message-by-message comparison `_common_prefix` must equal."""
    total = 0
    for a, b in zip(previous, current):
        if same_content(a, b):
            total += counter.message(b)
            continue
        if a.role == b.role:
            total += _common_token_prefix("\n".join(t.text for t in a.blocks if isinstance(t, Text)),
                                          "\n".join(t.text for t in b.blocks if isinstance(t, Text)))
        return total, True
    return total, False


_POOL = [Message(f"p{i}", "user" if i % 2 else "assistant", (Text(f"message {i} " + "word " * (i % 7)),))
         for i in range(12)]


def _lists() -> st.SearchStrategy[tuple[list[Message], list[Message]]]:
    """Two views sharing a run of the same objects, then content-equal copies, edits or other messages."""
    def build(shared: int, tail_a: list[int], tail_b: list[int], copy: bool) -> tuple[list[Message], list[Message]]:
        head = _POOL[:shared]
        a = head + [_POOL[i] for i in tail_a]
        b = (_reparsed(head) if copy else list(head)) + [
            _POOL[i] if i < 12 else _POOL[i - 12].with_blocks((Text(f"message {i - 12} edited"),)) for i in tail_b]
        return a, b
    return st.builds(build, st.integers(0, 12), st.lists(st.integers(0, 11), max_size=5),
                     st.lists(st.integers(0, 23), max_size=5), st.booleans())


@settings(max_examples=150, deadline=None)
@given(_lists(), st.booleans())
def test_the_common_prefix_found_at_c_speed_equals_the_message_by_message_one(views: tuple[list[Message], list[Message]],
                                                                             total_known: bool) -> None:
    previous, current = views
    counter = TokenCounter()
    known = counter.messages(previous) if total_known else None
    assert _common_prefix(previous, current, counter, known) == _old_common_prefix(previous, current, counter)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=12))
def test_bills_protected_ids_and_digests_with_the_hint_equal_those_without(steps: list[tuple[int, int]]) -> None:
    """Each call either appends to the previous view (and says so) or rebuilds one from scratch."""
    prices = price_model()
    hinted, plain = PromptCache(prices, TokenCounter()), PromptCache(prices, TokenCounter())
    protected, checks = ProtectedIds(), OutputChecks()
    view: list[Message] = [Message("sys", "system", (Text("you are a coding agent"),))]
    previous: list[Message] | None = None
    for k, (grow, edit) in enumerate(steps):
        extends = previous is not None and edit != 0
        if edit == 0 and len(view) > 2:  # an edit in the middle: the prefix breaks
            view = view[:1] + [view[1].with_blocks((Text(f"edited {k}"),))] + view[2:]
        view = view + [Message(f"m{k}-{i}", "user" if i % 2 else "assistant", (Text(f"turn {k} {i} " * 30),),
                               Origin.CONVERSATION) for i in range(grow)]
        base = previous if extends else None
        at = 1_000.0 + 60.0 * k
        assert hinted.send(view, at, extends=base) == plain.send(view, at)
        assert protected(view, extends=base) == protected_ids(view)
        assert checks.digest(view, extends=base) == view_digest(view)
        previous = view


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=20), st.lists(st.integers(1, 100), min_size=1, max_size=8))
def test_recovery_says_only_what_it_gave_again_as_the_same_objects(steps: list[int], cuts: list[int]) -> None:
    full = _transcript(steps)
    recovery = IncrementalRecovery()
    last: list[Message] | None = None
    for cut in sorted(cuts):
        sent = full[:max(1, len(full) * cut // 100)]
        out = recovery(sent).messages
        assert out == clean_recovered(close_interrupted(live_slice(sent))).messages
        assert recovery.previous is last
        if last is not None:
            assert all(a is b for a, b in zip(out[:recovery.unchanged], last))
            assert recovery.unchanged <= min(len(out), len(last))
        last = out


class _Reader:
    """A ledger follower that records what it read (a fresh start clears it)."""

    def __init__(self) -> None:
        self.seen = 0
        self.read: list[str] = []

    def reset(self) -> None:
        self.seen, self.read = 0, []

    def observe(self, message: Message, index: int, progress: Any) -> None:
        self.read.append(message.digest)
        self.seen = index + 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=16),
       st.lists(st.tuples(st.integers(1, 100), st.booleans()), min_size=1, max_size=8))
def test_a_ledger_told_what_it_read_before_reads_what_one_comparing_everything_reads(
        steps: list[int], calls: list[tuple[int, bool]]) -> None:
    """Updates marked as the session marks them, with another reader's unmarked update of an edited
    history now and then: the mark of the update before it no longer vouches for anything."""
    from worksurface.ledger import Ledger

    full = _transcript(steps)
    hinted, plain = Ledger(), Ledger()
    hinted_reader, plain_reader = _Reader(), _Reader()
    hinted.follow(hinted_reader)
    plain.follow(plain_reader)
    recovery = IncrementalRecovery()
    for cut, elsewhere in sorted(calls):
        sent = full[:max(1, len(full) * cut // 100)]
        if elsewhere:
            edited = [sent[0].with_blocks((Text("write the release notes instead"),))] + sent[1:]
            hinted.update(edited)
            plain.update(edited)
        recovery(sent)
        hinted.update(sent, mark=recovery.transcript_mark, same=(recovery.transcript_previous, recovery.transcript_same))
        plain.update(sent)
        assert hinted_reader.read == plain_reader.read == [m.digest for m in sent]
