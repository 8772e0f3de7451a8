"""What each call's output view is checked for (tool calls and results still paired, no id twice) and
its digest (the store's record of the view it last produced). Both look only at the appended messages
when the view extends the one checked before (the same message objects), as on most calls."""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from ..core.edits import Edit, Insert, ReplaceMessages
from ..core.errors import WorksurfaceError
from ..core.model import Message, Origin, begins_with, orphans, shared_length
from ..core.view import check_no_duplicates, pairing_problems
from .statusbar import STAGE as STATUS_STAGE


class InvariantError(WorksurfaceError):
    """A view broke one of the invariants (pairing, order, no duplicates): a bug in worksurface,
    never the input."""


class OutputChecks:
    """The checks of one session's output views, remembering the last view each one read."""

    def __init__(self) -> None:
        # (a view checked (a copy), its message ids, the list the caller passed)
        self._ids: tuple[list[Message], set[str], object] | None = None
        self._hash: tuple[list[Message], Any] | None = None  # (a view, its running digest state)

    def check(self, live: list[Message], view: list[Message], edits: Sequence[Edit] = (), rewound: bool = True,
              base: Sequence[Message] | None = None) -> None:
        """Raise InvariantError when `view` (made from `live` by `edits`) breaks an invariant. `base`: a
        list checked or digested before, unchanged since, that the caller knows `view` begins with."""
        if not rewound and edits and all(status_only(e) for e in edits):
            # The status bar inserts and removes only its own messages, which carry no tool blocks: pairing
            # cannot change, so only the ids are checked.
            if not self._ids_unique(view, base):
                raise InvariantError("worksurface produced an invalid view: " + "; ".join(check_no_duplicates(view)[:5]))
            return
        before_calls, before_results = orphans(live)
        after_calls, after_results = orphans(view)
        problems = []
        if not after_calls <= before_calls or not after_results <= before_results:
            problems += pairing_problems(view)
        problems += check_no_duplicates(view)
        if problems:
            raise InvariantError("worksurface produced an invalid view: " + "; ".join(problems[:5]))

    def _ids_unique(self, view: list[Message], base: Sequence[Message] | None = None) -> bool:
        known = self._ids
        if known is not None:
            # The view checked before had each id once: without the ids of its messages from where this
            # view first differs (the status bar's own message, mostly), the set holds those before it.
            checked, ids, passed = known
            n = len(checked) if base is not None and passed is base else shared_length(view, checked)
            ids.difference_update(m.id for m in checked[n:])
            new = view[n:]
        else:
            ids, new = set(), view
        for m in new:
            if m.id in ids:
                self._ids = None
                return False
            ids.add(m.id)
        self._ids = (list(view), ids, view)
        return True

    def digest(self, view: list[Message], extends: Sequence[Message] | None = None) -> str:
        """`view_digest(view)`, hashing only the messages after the previous view when `view` starts
        with it (`extends`: a list digested before, unchanged since, that the caller knows `view`
        begins with: not compared again when it is the previous one)."""
        previous = self._hash
        if previous is not None and ((extends is not None and previous[0] is extends) or begins_with(view, previous[0])):
            h = _hashed(previous[1].copy(), view[len(previous[0]):])
        else:
            h = _hashed(hashlib.blake2b(digest_size=16), view)
        self._hash = (view, h)  # never updated again: the next call copies it before adding to it
        return h.hexdigest()


def status_only(edit: Edit) -> bool:
    """An edit of the status bar's own messages: an insert of block-free status messages, or a removal."""
    if edit.stage != STATUS_STAGE:
        return False
    if isinstance(edit, Insert):
        return all(m.origin is Origin.STATUS and not m.tool_calls and not m.tool_results for m in edit.messages)
    return isinstance(edit, ReplaceMessages) and not edit.replacement


def view_digest(view: Sequence[Message]) -> str:
    """A digest of a whole view, from the per-message digests (cheap: those are cached)."""
    return _hashed(hashlib.blake2b(digest_size=16), view).hexdigest()


def _hashed(h: Any, messages: Sequence[Message]) -> Any:
    """`h` with the digests of `messages` added, in order (what `view_digest` hashes)."""
    for m in messages:
        h.update(m.digest.encode())
    return h
