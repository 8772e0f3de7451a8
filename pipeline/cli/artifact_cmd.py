"""`worksurface artifact`: print what a stage replaced, from a session directory or database."""

from __future__ import annotations

import json
from typing import Optional

import typer

from ..core.artifacts import fetch
from ..core.errors import ArtifactNotFoundError, WorksurfaceError
from ..session.store import Store
from .app import SESSION_ID_HELP, app, fail


@app.command()
def artifact(
    location: str = typer.Argument(..., help="The session: its directory (`--session DIR`, `Session.open(DIR)`), "
                                             "or a postgresql:// URL with --session-id."),
    artifact_id: str = typer.Argument(..., help="The artifact id a marker in the view names."),
    start_line: Optional[int] = typer.Option(None, "--start-line", min=1, help="First line to print (1-based)."),
    end_line: Optional[int] = typer.Option(None, "--end-line", min=1, help="Last line to print (inclusive)."),
    info: bool = typer.Option(False, "--info", help="Print what was recorded with it (kind, tokens, path) as JSON."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
) -> None:
    """Print an artifact: the original content a budget, microcompact or ingestion marker stands for."""
    from ..session.locations import describe, open_store

    where = describe(location, session_id)
    try:
        with open_store(location, session_id, create=False) as store:  # never create a session where none is
            if info:
                typer.echo(json.dumps(store.artifact_info(artifact_id), indent=2, ensure_ascii=False))
                return
            store.get_artifact(artifact_id)  # a missing id is an error here, not a tool answer
            args = {"id": artifact_id, "start_line": start_line, "end_line": end_line}
            typer.echo(fetch(_Reader(store), {k: v for k, v in args.items() if v is not None}))
    except ArtifactNotFoundError:
        raise fail(f"{where}: no artifact {artifact_id!r} in this session") from None
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None


class _Reader:
    def __init__(self, store: Store) -> None:
        self.store = store

    def artifact(self, artifact_id: str) -> str:
        return self.store.get_artifact(artifact_id)
