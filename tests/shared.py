"""Where the shared data lives: real public transcripts and hand-labeled probes.

They are not part of the repository (licenses, size). `WORKSURFACE_SHARED` names the folder; the
default is `../shared` beside the repository, as laid out on the project's machines.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WORKSURFACE_SHARED", REPO.parent / "shared")).resolve()
TRANSCRIPTS = SHARED / "transcripts"
PROBES = SHARED / "probes"
SKIP_REASON = (f"shared transcripts not found at {TRANSCRIPTS}: set WORKSURFACE_SHARED to the folder that "
               "holds transcripts/ and probes/ (the project's machines have it at ../shared)")
LONG_CC = sorted((TRANSCRIPTS / "claude-code").glob("*-*-*-*-*.jsonl")) if TRANSCRIPTS.exists() else []


def needs_shared(path: Path | None = None):
    """A skip marker for tests that read the shared folder (or one file in it)."""
    target = path or TRANSCRIPTS
    return pytest.mark.skipif(not target.exists(), reason=SKIP_REASON if path is None
                              else f"{target} not found: {SKIP_REASON}")
