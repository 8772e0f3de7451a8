"""Forgetting probes: what a compaction made the agent forget (DESIGN.md section 8).

Light imports only: `check` and `curve` (which run the pipeline) are imported from their modules.
"""

from .assertions import assert_retains
from .derive import derive
from .match import Score, retained, score
from .model import CATEGORIES, Probe, ProbeError, ProbeSet

__all__ = ["CATEGORIES", "Probe", "ProbeError", "ProbeSet", "Score", "assert_retains", "derive", "retained",
           "score"]
