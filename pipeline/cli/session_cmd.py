"""`worksurface session export|import|list|delete`: move a session between a directory and a
PostgreSQL database (and back, its views byte for byte), and manage the sessions a store holds."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..core.errors import WorksurfaceError
from ..core.fileio import atomic_writer, check_output_path
from .output import echo
from .app import SESSION_ID_HELP, app, fail

session_app = typer.Typer(help="Move sessions between stores (a directory, a postgresql:// database); list and "
                               "delete the sessions a store holds.", no_args_is_help=True)
app.add_typer(session_app, name="session")
# An export holds everything the session saw (file contents, command output): private to its owner.
EXPORT_FILE_MODE = 0o600

LOCATION_HELP = "A session directory, or a postgresql:// URL (with --session-id)."


@session_app.command("export")
def export_command(
    location: str = typer.Argument(..., help=LOCATION_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="The file to write (JSON Lines, private: mode 0600)."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
) -> None:
    """Write a whole session (log, edits, ledger, artifacts, status, counters) to one file."""
    from ..session.archive import export_session
    from ..session.locations import describe, open_store

    try:
        check_output_path(out)
        with open_store(location, session_id, create=False) as store, atomic_writer(out, EXPORT_FILE_MODE) as fh:
            n = export_session(store, fh, describe(location, session_id))
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    echo(f"exported {n} records from {describe(location, session_id)} to {out}", err=True)


@session_app.command("import")
def import_command(
    file: Path = typer.Argument(..., help="A file `worksurface session export` wrote."),
    location: str = typer.Argument(..., help=LOCATION_HELP + " The session must not exist yet."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
) -> None:
    """Create a session from an export, in one transaction (a damaged file leaves nothing behind)."""
    from ..session.archive import import_session
    from ..session.locations import delete_session, describe, open_store

    try:
        _refuse_existing(location, session_id)
        with open(_regular(file), "rb") as fh:
            with open_store(location, session_id) as store:
                try:
                    n = import_session(fh, store, str(file))
                except BaseException:
                    store.close()
                    delete_session(location, session_id)  # the new session it began: nothing is left behind
                    raise
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{file}: cannot read it ({exc.strerror or exc})") from None
    echo(f"imported {n} records into {describe(location, session_id)}", err=True)


@session_app.command("list")
def list_command(location: str = typer.Argument(..., help="A directory of sessions, or a postgresql:// URL.")) -> None:
    """Print the ids of the sessions a store holds, one a line."""
    from ..session.locations import list_sessions

    try:
        for session_id in list_sessions(location):
            echo(session_id)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None


@session_app.command("delete")
def delete_command(
    location: str = typer.Argument(..., help="A directory of sessions, or a postgresql:// URL."),
    session_id: str = typer.Argument(..., help="The session to remove."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for a process still using it."),
) -> None:
    """Remove a session and everything it holds, once no process is using it."""
    from ..session.locations import delete_session, describe

    try:
        delete_session(location, session_id, timeout=timeout)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    echo(f"deleted {describe(location, session_id)}", err=True)


def _refuse_existing(location: str, session_id: Optional[str]) -> None:
    """An import creates a session: one that exists already is refused before anything is written."""
    from ..core.errors import SessionNotFoundError
    from ..session.locations import describe, open_store

    try:
        open_store(location, session_id, create=False).close()
    except SessionNotFoundError:
        return
    raise fail(f"{describe(location, session_id)}: a session exists there already; import into a new location "
               "(or delete it first: worksurface session delete)")


def _regular(file: Path) -> Path:
    """The import file, refused unless it is a regular file (a FIFO would block, a directory fail late)."""
    if not file.is_file():
        raise fail(f"{file}: not a regular file")
    return file
