"""Probe files: loading, validation errors that name the file and the probe, atomic round trip."""

from __future__ import annotations

import json

import pytest

from probes_samples import PROBES
from worksurface.core.errors import FormatError
from worksurface.probes import CATEGORIES, Probe, ProbeSet

GOOD = {"id": "a1", "category": "artifact", "needles": ["lib/x.ex"], "match": "exact"}


def write(tmp_path, data) -> str:
    path = tmp_path / "probes.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


@pytest.mark.parametrize("bad, problem", [
    ({"category": "artifact", "needles": ["x"]}, "missing 'id'"),
    ({**GOOD, "category": "memory"}, "category 'memory' is not one of"),
    ({**GOOD, "needles": []}, "'needles' must be a non-empty list"),
    ({**GOOD, "needles": "lib/x.ex"}, "'needles' must be a non-empty list"),
    ({**GOOD, "needles": ["ok", " "]}, "every needle must be a non-empty string"),
    ({**GOOD, "match": "fuzzy"}, "must be \"exact\" or \"fuzzy:N\""),
    ({**GOOD, "match": "fuzzy:101"}, "0 < N <= 100"),
    ({**GOOD, "established_at": 12}, "'established_at' must be a message id"),
    ({**GOOD, "needle": ["x"]}, "unknown key(s) needle"),
    ("not an object", "a probe must be a JSON object"),
])
def test_a_bad_probe_is_named_by_file_and_index(tmp_path, bad, problem):
    path = write(tmp_path, {"probes": [GOOD | {"id": "first"}, bad]})
    with pytest.raises(FormatError) as err:
        ProbeSet.load(path)
    assert err.value.path == path
    assert err.value.record == "probes[1]"
    assert problem in str(err.value)


def test_file_level_errors(tmp_path):
    with pytest.raises(FormatError, match="no such probe file"):
        ProbeSet.load(tmp_path / "missing.json")
    with pytest.raises(FormatError, match="not JSON") as err:
        ProbeSet.load(write(tmp_path, '{"probes": [\n  {"id": }\n]}'))
    assert err.value.line == 2
    with pytest.raises(FormatError, match="'probes' must be a list"):
        ProbeSet.load(write(tmp_path, {"probes": {}}))
    with pytest.raises(FormatError, match="duplicate probe id 'a1'") as err:
        ProbeSet.load(write(tmp_path, {"probes": [GOOD, GOOD]}))
    assert err.value.record == "probes[1]"


def test_round_trip_keeps_extra_keys_and_optional_fields(tmp_path):
    data = {"transcript": "t.jsonl", "cut": "before first compact_boundary",
            "probes": [GOOD, {"id": "r1", "category": "request", "needles": ["fix it"],
                              "match": "fuzzy:85", "established_at": "m1", "note": "the task"}]}
    ps = ProbeSet.load(write(tmp_path, data))
    assert ps.transcript == "t.jsonl" and len(ps) == 2
    assert ps.probes[1].threshold == 85 and ps.probes[0].threshold is None
    out = tmp_path / "out" / "again.json"
    ps.save(out)
    assert json.loads(out.read_text()) == data
    assert not [p for p in out.parent.iterdir() if p.name != "again.json"]  # no temp file left


def test_probe_constructor_validates():
    with pytest.raises(ValueError, match="category"):
        Probe("x", "nope", ("a",))
    assert Probe("x", "plan", ["a", "b"]).needles == ("a", "b")


@pytest.mark.skipif(not PROBES.is_dir(), reason="shared hand-labeled probes not available")
@pytest.mark.parametrize("name", ["258c7280.json", "8463c716.json"])
def test_the_hand_labeled_probe_files_load(name):
    ps = ProbeSet.load(PROBES / name)
    assert len(ps) == 35
    assert {p.category for p in ps} == set(CATEGORIES)
