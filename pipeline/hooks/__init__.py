"""Harness hooks: Claude Code and Codex run `worksurface hook <client>` around their own compactions.

`payload.py` reads the hook's JSON input and shapes its reply; `shown.py` works out what the harness
sends after its compaction; `run.py` answers a hook call (the surface rebuilt from the ledger, as the
SessionStart hook's `additionalContext`); `install.py` writes the hook entries into the client's
settings; `mcp.py` is the stdio MCP server through which either harness fetches an artifact back.
"""
