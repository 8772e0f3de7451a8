"""The reducing stages, one per module, each ending with its declaration `STAGE`
(`worksurface.engine.state.Stage`); `worksurface.graph.registry` lists them in their fixed order:
ingest, budget, snip, microcompact, collapse, autocompact."""
