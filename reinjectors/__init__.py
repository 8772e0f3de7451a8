"""Reinjectors: rebuild the working surface after a compact boundary, in priority order."""

# Filled in priority order by the reinjector modules (status, constraints, plan, files, skills, tools).
DEFAULT_REINJECTORS: tuple = ()
