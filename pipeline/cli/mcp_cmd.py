"""`worksurface mcp`: the stdio MCP server a harness starts to fetch artifacts back (see worksurface.hooks.mcp);
it needs the `mcp` extra, and says so in one line when it is missing."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..core.errors import WorksurfaceError
from ..core.lazy import require_extra
from ..session import homes
from .app import app, fail, installed_version


@app.command()
def mcp(
    sessions: Optional[List[Path]] = typer.Option(
        None, "--session",
        help="Look artifacts up only in this session directory, or the one kept for this compacted file "
             "(repeatable). Default: the session directories worksurface keeps (Claude Code session folders, "
             "$CODEX_HOME/worksurface, <file>.worksurface beside files in the current folder, the gateway's "
             "default store)."),
) -> None:
    """Serve the fetch_artifact tool and the artifacts as resources over stdio (MCP, on the official SDK:
    pip install 'worksurface[mcp]'), for `claude mcp add` or `codex mcp add`."""
    try:
        require_extra("mcp", "worksurface mcp", "mcp")
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    from ..hooks.mcp import serve_stdio

    found = []
    for given in sessions or ():
        home = homes.session_for(given)
        if home is None:
            raise fail(f"{given}: not a session directory, and no session is kept for it")
        found.append(home)
    serve_stdio(found, installed_version(), _gateway_store())


def _gateway_store() -> list[Path]:
    """The gateway's default session store, when the gateway extra is installed."""
    try:
        from ..gateway.config import default_store
    except ImportError:
        return []
    return [Path(default_store())]
