"""Suite-wide settings: the `slow` marker and the shared-data location (see tests/shared.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import settings

# Property tests draw the same examples on every run ("repeatable"), so a CI run fails only on a
# change, never on a lucky draw; HYPOTHESIS_PROFILE=explore draws new ones (run it when working on the
# core, and pin what it finds with @example).
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# Test helper modules (builders, shared, ...) import by plain name; the synthetic-session generator
# (`fixturegen`) and `benchmarks` live at the repository root, outside the installed package.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if str(HERE.parent) not in sys.path:
    sys.path.insert(1, str(HERE.parent))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a few seconds (real clients, browsers, clusters)")
    config.addinivalue_line("markers", "client: drives a real harness binary (Claude Code, Codex) on loopback")
