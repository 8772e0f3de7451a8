"""The stage contract and what stages share: the typed per-call context and reports (`state`), the
price model and firing rule (`pricing`), output reduction at ingestion (`reduce_output`), the
reinjectors' shared helpers (`reinject`) and the protection rules every stage obeys (`protection`).

Stages and reinjectors build on this floor; the graph composes them above it.
"""
