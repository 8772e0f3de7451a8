"""The session floor: one agent conversation's persistent state and its `prepare` before every call.

`session.py` syncs the transcript, runs the graph and commits; `store.py` persists the log, the edits,
the ledger and the artifacts; `statusbar.py` plans each call's status publication.
"""

from typing import TYPE_CHECKING

from ..core.lazy import lazy_getattr

if TYPE_CHECKING:
    from .session import InvariantError, Prepared, PrepareReport, Session, compact

# LangGraph loads with the session module: imported on first use, as the package root does.
_LAZY = dict.fromkeys(("InvariantError", "Prepared", "PrepareReport", "Session", "compact"), "session")

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["InvariantError", "Prepared", "PrepareReport", "Session", "compact"]
