"""pytest plugin (entry point `pytest11`): a temporary worksurface session and `assert_retains`.

    def test_compaction_keeps_the_plan(worksurface_session, assert_retains):
        prepared = worksurface_session.compact(transcript)
        assert_retains(prepared, "probes.json", min_fraction=0.9)

pytest imports this module in every run of every project that has worksurface installed, so it
imports nothing of worksurface's own at import time: the session (LangGraph, tiktoken, pydantic)
and the assertions are imported by the fixtures, when a test asks for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pytest

if TYPE_CHECKING:
    from ..session.session import Session


@pytest.fixture
def worksurface_session(tmp_path: Path) -> Iterator["Session"]:
    """A fresh `Session` stored under the test's tmp_path, closed after the test."""
    from ..session.session import Session

    with Session.open(tmp_path / "worksurface-session") as session:
        yield session


@pytest.fixture(name="assert_retains")
def assert_retains_fixture() -> Callable[..., object]:
    """`assert_retains(view, probes, min_fraction=1.0)`, also importable from `worksurface.probes`."""
    from .assertions import assert_retains

    return assert_retains
