"""Reinjectors: rebuild the working surface after a compact boundary, one part per module.

Each module ends with its declaration, `REINJECTOR` (`worksurface.engine.state.Reinjector`): its name,
its `run(view, config, ctx, budget) -> Reinjection`, the context fields it reads and the inputs it
takes. `worksurface.graph.registry` lists them in the order the graph runs them.
"""
