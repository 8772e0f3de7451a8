"""The session floor: one agent conversation's persistent state and its `prepare` before every call.

`session.py` syncs the transcript, runs the graph and commits; `store.py` is the store contract (the
log, the edits, the ledger, the artifacts) that `diskstore.py` (a directory) and `pgstore.py`
(PostgreSQL) implement, chosen by location in `locations.py`; `statusbar.py` plans each call's status
publication.
"""

from typing import TYPE_CHECKING

from ..core.lazy import lazy_getattr

if TYPE_CHECKING:
    from .locations import delete_session, list_sessions, open_store
    from .session import InvariantError, Prepared, PrepareReport, Session, compact

# LangGraph loads with the session module: imported on first use, as the package root does.
_LAZY = {**dict.fromkeys(("InvariantError", "Prepared", "PrepareReport", "Session", "compact"), "session"),
         **dict.fromkeys(("delete_session", "list_sessions", "open_store"), "locations")}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["InvariantError", "Prepared", "PrepareReport", "Session", "compact", "delete_session", "list_sessions",
           "open_store"]
