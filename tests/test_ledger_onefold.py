"""One fold: the status bar's derivation reads the messages on the ledger's walk (each once), the record
kinds are one table, and a save writes only the kinds a call changed."""

from __future__ import annotations

from pathlib import Path

from builders import Convo
from worksurface.core.model import Message
from worksurface.facts.reading import MessageProgress
from worksurface.formats import read_transcript
from worksurface.ledger import Ledger
from worksurface.ledger.kinds import KINDS, Kind
from worksurface.status import derive_events, reduce
from worksurface.status.derive import DerivedStatus

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "small.jsonl"


class _Counting(DerivedStatus):
    def __init__(self) -> None:
        self.reads: list[str] = []
        super().__init__()

    def observe(self, message: Message, index: int, progress: MessageProgress | None = None) -> None:
        self.reads.append(message.id)
        super().observe(message, index, progress)


def _messages() -> list[Message]:
    return list(read_transcript(FIXTURE).messages)


def test_the_ledger_walk_feeds_the_status_each_message_once_and_it_equals_a_whole_derivation() -> None:
    messages = _messages()
    ledger, status = Ledger(), _Counting()
    ledger.follow(status)
    for n in range(1, len(messages) + 1, 3):
        ledger.update(messages[:n])
    ledger.update(messages)
    assert status.reads == [m.id for m in messages]
    assert status.reducer.snapshot() == reduce(derive_events(messages))


def test_a_reopened_ledger_brings_a_new_follower_up_to_date_and_a_rewind_starts_it_over() -> None:
    messages = _messages()
    first = Ledger()
    first.update(messages[:-4])
    reopened = Ledger.from_json(first.to_json())
    status = _Counting()
    reopened.follow(status)
    reopened.update(messages)  # catches up on what another process folded, then reads the new ones
    assert status.reducer.snapshot() == reduce(derive_events(messages))
    edited = messages[:5] + [Convo().user("Start over on the parser instead.").messages[0]]
    reopened.update(edited)
    assert status.seen == len(edited) and status.resets == 1
    assert status.reducer.snapshot() == reduce(derive_events(edited))


def test_an_excluded_message_is_not_read_and_reads_again_once_it_is_back() -> None:
    messages = _messages()
    ledger, status = Ledger(), DerivedStatus()
    ledger.follow(status)
    gone = frozenset({messages[2].id})
    status.exclude(gone)
    ledger.update(messages)
    assert status.reducer.snapshot() == reduce(derive_events([m for m in messages if m.id not in gone]))
    status.exclude(frozenset())
    ledger.update(messages)
    assert status.reducer.snapshot() == reduce(derive_events(messages))


def test_every_record_kind_is_declared_once_and_persists_by_its_declaration() -> None:
    names = [k.name for k in KINDS]
    assert len(names) == len(set(names))
    ledger = Ledger.over(_messages())
    data = ledger.to_json()
    assert {k.name for k in KINDS if k.stored} <= set(data) and not {k.name for k in KINDS if not k.stored} & set(data)
    assert {e["kind"] for e in ledger.entries()} <= set(names)
    view = ledger.upto()
    assert view.records("requests") == view.user_messages() and view.records("tests") == view.test_runs()


def test_a_kind_keeps_the_first_or_the_latest_record_of_a_key_as_declared() -> None:
    first = Kind("x", tuple, key=lambda r: r[0], merge="first")
    latest = Kind("y", tuple, key=lambda r: r[0])
    for kind, kept in ((first, ("k", 1)), (latest, ("k", 2))):
        records: dict = {}
        assert kind.put(records, ("k", 1))
        kind.put(records, ("k", 2))
        assert records == {"k": kept}
        assert not kind.put(records, kept)  # the same record again changes nothing


def test_a_save_writes_only_the_kinds_the_call_changed() -> None:
    c = Convo().user("Add retries to the client. Never touch vendor/.")
    c.tool("Bash", {"command": "pytest -q"}, "3 passed in 0.31s")
    ledger = Ledger()
    ledger.update(c.messages)
    ledger.saved(ledger.save())
    c.say("The tests pass.")
    ledger.update(c.messages)
    written = set(ledger.save().parts)
    assert "ledger.tests" not in written and "ledger.constraints" not in written and "ledger.requests" not in written
    c.tool("Bash", {"command": "pytest -q"}, "1 failed, 3 passed in 0.40s", is_error=True)
    ledger.update(c.messages)
    assert "ledger.tests" in set(ledger.save().parts)


def test_a_constraint_said_again_later_keeps_when_it_was_first_said() -> None:
    c = Convo().user("Add retries to the client. Never touch vendor/.")
    c.tool("Bash", {"command": "pytest -q"}, "3 passed in 0.31s")
    first = len(c.messages)
    c.say("Retries are in.")
    c.user("Never touch vendor/.")
    ledger = Ledger()
    ledger.update(c.messages[:first])
    ledger.settle()
    ledger.update(c.messages)  # the repeat arrives in a later fold window
    said = [k for k in ledger.upto(first).standing_constraints() if "vendor" in k.text]
    assert said and said[0].index == 0
    assert len(said) == 1
