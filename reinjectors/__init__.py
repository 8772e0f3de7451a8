"""Reinjectors: rebuild the working surface after a compact boundary, in priority order.

Each module satisfies `worksurface.engine.state.Reinjector`: `NAME` and
`run(view, config, ctx, budget) -> Reinjection`; the graph's reinjection node runs them in this order, each within what the ones before it left of the
post-compact target, so budgets shrink from the least valuable end.
"""

from worksurface.engine.state import Reinjector

from . import constraints, details, files, plan, results, skills, status, tools

# `details` packs what the summary had no room for into whatever the others left of the target;
# `results` then spends what is still left on the newest tool results from before the tail (the
# status always runs last).
DEFAULT_REINJECTORS: tuple[Reinjector, ...] = (status, constraints, plan, files, skills, tools, details, results)
