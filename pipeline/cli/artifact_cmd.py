"""`worksurface artifact`: print what a stage replaced, from a session directory, a PostgreSQL session,
or the file a compaction wrote (its session is kept beside it, or in its Claude Code session folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.artifacts import fetch
from ..core.errors import ArtifactNotFoundError, WorksurfaceError
from ..session import homes
from ..session.pgstore import is_postgres_url
from ..session.store import Store
from .app import SESSION_ID_HELP, app, fail


@app.command()
def artifact(
    where: str = typer.Argument(..., help="The compacted file (`compact -o OUT`, a Claude Code session file), the "
                                          "session directory (`--session DIR`, `Session.open(DIR)`), or a "
                                          "postgresql:// URL with --session-id."),
    artifact_id: str = typer.Argument(..., help="The artifact id a marker in the view names."),
    start_line: Optional[int] = typer.Option(None, "--start-line", min=1, help="First line to print (1-based)."),
    end_line: Optional[int] = typer.Option(None, "--end-line", min=1, help="Last line to print (inclusive)."),
    info: bool = typer.Option(False, "--info", help="Print what was recorded with it (kind, tokens, path) as JSON."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
) -> None:
    """Print an artifact: the original content a budget, microcompact or ingestion marker stands for."""
    from ..session.locations import describe, open_store

    location = _session_of(where, session_id)
    try:
        with open_store(location, session_id, create=False) as store:  # never create a session where none is
            if info:
                typer.echo(json.dumps(store.artifact_info(artifact_id), indent=2, ensure_ascii=False))
                return
            store.get_artifact(artifact_id)  # a missing id is an error here, not a tool answer
            args = {"id": artifact_id, "start_line": start_line, "end_line": end_line}
            typer.echo(fetch(_Reader(store), {k: v for k, v in args.items() if v is not None}))
    except ArtifactNotFoundError:
        raise fail(f"{describe(location, session_id)}: no artifact {artifact_id!r} in this session") from None
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None


def _session_of(where: str, session_id: Optional[str]) -> str:
    """The session location `where` names: a URL or a directory of sessions as given, else the session
    directory it is or that a compaction kept for it."""
    if is_postgres_url(where) or session_id is not None:
        return where
    path = Path(where)
    session_dir = homes.session_for(path)
    if session_dir is None:
        if path.is_dir():
            raise fail(f"{path}: not a session directory")
        looked = " or ".join(str(c) for c in homes.candidates(path))
        raise fail(f"{path}: no session kept for it (looked for {looked}; was it compacted with --no-session?)")
    return str(session_dir)


class _Reader:
    def __init__(self, store: Store) -> None:
        self.store = store

    def artifact(self, artifact_id: str) -> str:
        return self.store.get_artifact(artifact_id)
