"""worksurface's benchmarks: per-call overhead, scale, prompt-cache stability, retention per token.

Run from the repository root: `python -m benchmarks --quick` (or `--full`). Results go to
`benchmarks/RESULTS.md` and `benchmarks/results.json`. Not part of the installed package.
"""
