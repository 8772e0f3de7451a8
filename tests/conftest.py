"""Suite-wide settings: the `slow` marker and the shared-data location (see tests/shared.py)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run ("repeatable"), so a CI run fails only on a
# change, never on a lucky draw; HYPOTHESIS_PROFILE=explore draws new ones (run it when working on the
# core, and pin what it finds with @example).
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# No test reads the developer's own ~/.config/worksurface (their settings, the project files they
# trust): the suite, and every process it starts, gets an empty user configuration folder of its own.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="worksurface-tests-config-")

# Test helper modules (builders, shared, ...) import by plain name; the synthetic-session generator
# (`fixturegen`) and `benchmarks` live at the repository root, outside the installed package.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if str(HERE.parent) not in sys.path:
    sys.path.insert(1, str(HERE.parent))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a few seconds (real clients, browsers, clusters)")
    config.addinivalue_line("markers", "client: drives a real client binary (Claude Code, Codex, Chromium) on loopback")


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server for the store tests: `WORKSURFACE_TEST_POSTGRES` (what `.ci/run` starts),
    else a throwaway cluster of this run's own (`pgcluster`); skips, saying why, only when the server
    is not installed. A URL that is set but unreachable, or binaries that will not start a cluster,
    fail the tests instead of skipping them."""
    url = os.environ.get("WORKSURFACE_TEST_POSTGRES")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"psycopg 3 / psycopg_pool not installed ({exc.name}): pip install -e '.[test]'")
    if url:
        yield url
        return
    from pgcluster import Cluster, ClusterUnavailable, find_bin_dir
    if find_bin_dir() is None:
        pytest.skip("no PostgreSQL server binaries (Debian: apt-get install postgresql; .ci/run installs them)")
    try:
        cluster = Cluster.start()
    except ClusterUnavailable as exc:  # installed but not starting: a broken setup, not a reason to skip
        pytest.fail(f"PostgreSQL's server binaries are installed but a throwaway cluster would not start: {exc}")
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def fresh_database(postgres_url):
    """A new, empty database on the test server (its URL), for tests that need the whole database to
    themselves (its schema, every session in it); dropped afterwards."""
    import uuid

    import psycopg

    name = f"ws_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{postgres_url.rsplit('/', 1)[0]}/{name}"
    yield url
    from worksurface.session import pgstore
    for key in [k for k in pgstore._pools if k[1] == url]:
        pgstore._pools.pop(key).close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["disk", "postgres"])
def backend(request, tmp_path):
    """The same test on both persistent backends: a directory and a PostgreSQL database."""
    from backends import Backend
    if request.param == "postgres":
        yield Backend.postgres(request.getfixturevalue("postgres_url"))
    else:
        yield Backend.disk(tmp_path / "sessions")
