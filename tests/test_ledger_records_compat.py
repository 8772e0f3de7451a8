"""New record fields (a task text's issue, a manifest's scripts) persist, and records stored before
they existed still load with their defaults."""

from __future__ import annotations

from worksurface.facts import Identifiers, TaskSpec
from worksurface.ledger import codec


def test_new_fields_round_trip_and_old_records_load():
    spec = TaskSpec("bd show a; bd show b (b)", "○ b · Title", "m1", 3, ("done",), "text", "b")
    assert codec.from_json(TaskSpec, codec.to_json(spec)) == spec
    old = codec.to_json(spec)
    del old["issue"]
    assert codec.from_json(TaskSpec, old).issue == ""
    ids = Identifiers("/repo", ("main",), (), (), (), (), (), (), (), ("f_name",), ("test: vitest run",))
    assert codec.from_json(Identifiers, codec.to_json(ids)) == ids
    stored = codec.to_json(ids)
    del stored["scripts"]
    assert codec.from_json(Identifiers, stored).scripts == ()
