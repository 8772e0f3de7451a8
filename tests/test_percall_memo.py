"""What a call carries instead of working out again (the store's JSON text assembled from remembered
parts, meta values the store already holds, the newest user turn of an extended view) gives exactly
what working it out afresh gives."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from builders import Convo, read_and_test_rounds
from worksurface import Session
from worksurface.core.jsontext import EncodedJSON, encode
from worksurface.engine.protection import ProtectedIds, protected_ids
from worksurface.ledger import Ledger
from worksurface.session.memstore import MemoryStore

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                     max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(), _json, max_size=5))
def test_an_object_assembled_from_encoded_values_is_the_encoding_of_the_object(value):
    assembled = EncodedJSON.of_object((k, encode(v)) for k, v in value.items())
    assert assembled.text == encode(value) and assembled.value() == json.loads(encode(value))


def test_a_store_keeps_an_encoded_value_as_given_and_reads_it_back():
    store = MemoryStore()
    store.set_meta("part", EncodedJSON.of_object([("a\u00e9", encode([1, "x"]))]))
    store.set_meta("plain", {"a\u00e9": [1, "x"]})
    assert store.get_meta("part") == store.get_meta("plain") == {"a\u00e9": [1, "x"]}
    assert store._get("meta:part") == store._get("meta:plain")


def _work(steps: int) -> Convo:
    return read_and_test_rounds(steps, "Port the parser. Never edit vendor/.", read_words=60)


def test_a_ledger_saved_call_by_call_in_encoded_parts_loads_back_whole():
    c = _work(6)
    ledger, stored = Ledger(), {}
    for n in range(2, len(c.messages) + 1):
        ledger.update(c.messages[:n])
        ledger.settle()  # a call that read the ledger (a compaction): its fold is what the save writes
        save = ledger.write(lambda key, value: stored.__setitem__(key, json.loads(
            value.text if isinstance(value, EncodedJSON) else encode(value))))
        assert save is not None
        ledger.saved(save)
    again = Ledger.load(stored.get)
    assert again.to_json() == ledger.to_json()
    assert again.upto().test_runs() == Ledger.over(c.messages).upto().test_runs() != []


def test_meta_the_store_holds_is_not_rewritten_but_a_snip_or_an_event_in_between_is_seen():
    c = _work(3)
    with Session.open(None) as session:
        session.prepare(c.messages)
        store, writes = session.store, []
        real = store.set_meta
        store.set_meta = lambda key, value: (writes.append(key), real(key, value))  # type: ignore[method-assign]
        c.say("and the lexer?")
        session.prepare(c.messages)
        assert "pending_snips" not in writes and "inputs_changed" not in writes
        session.snip([c.messages[2].id], "stale read")
        writes.clear()
        c.user("go on")
        prepared = session.prepare(c.messages)
        assert "pending_snips" in writes and store.get_meta("pending_snips") == []
        assert c.messages[2].id not in {m.id for m in prepared.messages}


def test_protected_ids_of_extended_views_equal_a_fresh_search():
    c = _work(4)
    protect = ProtectedIds()
    views = [c.messages[:n] for n in range(1, len(c.messages) + 1)]
    views.append(views[-1][:1] + views[-1][3:])  # an edited view: not an extension of the previous
    c.user("now the tests").say("on it")
    views.append(list(views[-1]) + c.messages[-2:])
    for view in views:
        assert protect(view) == protected_ids(view)
