"""Suite-wide settings: the `slow` marker and the shared-data location (see tests/shared.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# Test helper modules (builders, shared, ...) import by plain name.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a few seconds (real clients, browsers, clusters)")
    config.addinivalue_line("markers", "client: drives a real harness binary (Claude Code, Codex) on loopback")
