"""Every stage and reinjector worksurface ships, imported statically and listed in their order: the
one place that names them (the graph composes whatever it is given; the session passes these).

Stages reduce in this order on every call: ingestion (new results, before they are first sent), the
tool-result budget, snip, microcompact, collapse, autocompact. After a compaction the reinjectors
rebuild the working surface in priority order, each within what the ones before it left of the
post-compact target, so budgets shrink from the least valuable end: the status first (it reserves
its share and runs last, to report the rebuilt view), then constraints, plan, files, skills, tools,
and `details` (what the summary had no room for, packed into whatever the others left).
"""

from __future__ import annotations

from typing import Any

from worksurface.reinjectors import constraints, details, files, plan, skills, status, tools
from worksurface.stages import autocompact, budget, collapse, ingest, microcompact, snip

from ..engine.state import Reinjector, Stage

STAGES: tuple[Stage[Any], ...] = (ingest.STAGE, budget.STAGE, snip.STAGE, microcompact.STAGE, collapse.STAGE,
                                  autocompact.STAGE)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
REINJECTORS: tuple[Reinjector, ...] = (status.REINJECTOR, constraints.REINJECTOR, plan.REINJECTOR, files.REINJECTOR,
                                       skills.REINJECTOR, tools.REINJECTOR, details.REINJECTOR)
