"""`worksurface artifact`: print what a stage replaced, from a session directory or from the file a
compaction wrote (its session is kept beside it, or in its Claude Code session folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.artifacts import fetch
from ..core.errors import ArtifactNotFoundError, WorksurfaceError
from ..session import homes
from ..session.store import SessionStore
from .app import app, fail


@app.command()
def artifact(
    where: Path = typer.Argument(..., help="The compacted file (`compact -o OUT`, a Claude Code session file), or "
                                           "the session directory (`--session DIR`, `Session.open(DIR)`)."),
    artifact_id: str = typer.Argument(..., help="The artifact id a marker in the view names."),
    start_line: Optional[int] = typer.Option(None, "--start-line", min=1, help="First line to print (1-based)."),
    end_line: Optional[int] = typer.Option(None, "--end-line", min=1, help="Last line to print (inclusive)."),
    info: bool = typer.Option(False, "--info", help="Print what was recorded with it (kind, tokens, path) as JSON."),
) -> None:
    """Print an artifact: the original content a budget, microcompact or ingestion marker stands for."""
    session_dir = homes.session_for(where)
    if session_dir is None:  # never create a session where none is
        if where.is_dir():
            raise fail(f"{where}: not a session directory")
        looked = " or ".join(str(c) for c in homes.candidates(where))
        raise fail(f"{where}: no session kept for it (looked for {looked}; was it compacted with --no-session?)")
    try:
        with SessionStore.open(session_dir) as store:
            if info:
                typer.echo(json.dumps(store.artifact_info(artifact_id), indent=2, ensure_ascii=False))
                return
            store.get_artifact(artifact_id)  # a missing id is an error here, not a tool answer
            args = {"id": artifact_id, "start_line": start_line, "end_line": end_line}
            typer.echo(fetch(_Reader(store), {k: v for k, v in args.items() if v is not None}))
    except ArtifactNotFoundError:
        raise fail(f"{session_dir}: no artifact {artifact_id!r} in this session") from None
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None


class _Reader:
    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def artifact(self, artifact_id: str) -> str:
        return self.store.get_artifact(artifact_id)
