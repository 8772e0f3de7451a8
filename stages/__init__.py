"""The five reducing stages, in their fixed order: budget, snip, microcompact, collapse, autocompact."""
