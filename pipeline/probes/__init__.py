"""Forgetting probes: what a compaction made the agent forget, per category, against baselines.

Light imports only: `check` and `curve` (which run the pipeline) are imported from their modules.
"""

from typing import TYPE_CHECKING

from ..core.lazy import lazy_getattr

if TYPE_CHECKING:
    from .assertions import assert_retains
    from .derivation import derive
    from .match import Score, retained, score
    from .model import CATEGORIES, Probe, ProbeError, ProbeSet

# Imported on first use (PEP 562): the pytest plugin lives in this package and pytest loads it in
# every test run of every project that installs worksurface, so the package imports nothing heavy.
_LAZY = {"assert_retains": "assertions", "derive": "derivation", "Score": "match", "retained": "match",
         "score": "match", **dict.fromkeys(("CATEGORIES", "Probe", "ProbeError", "ProbeSet"), "model")}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["CATEGORIES", "Probe", "ProbeError", "ProbeSet", "Score", "assert_retains", "derive", "retained",
           "score"]
