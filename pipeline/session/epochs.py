"""Which status epoch a session is in (the session before any compaction is epoch 1), read from the
transcript incrementally: its compact boundaries, and worksurface's own messages fed back in it."""

from __future__ import annotations

from typing import Sequence

from ..core.model import Message, Origin
from ..status.replay import epoch_after
from .statusbar import FIRST_EPOCH


class EpochReader:
    """The newest epoch the transcript shows, reading on each call only what the previous call did not."""

    def __init__(self) -> None:
        self._live_seen: tuple[int, int] | None = None  # (live messages read, their newest epoch)
        self._boundaries_seen: tuple[int, Message, int] | None = None  # (messages read, the last, epoch)

    def forget_boundaries(self) -> None:
        """History was rewound: the boundaries are read again from the start."""
        self._boundaries_seen = None

    def boundary_epoch(self, full: Sequence[Message]) -> int:
        """`status.replay.transcript_epoch(full)`, reading only the messages after those of the
        previous call when the transcript still starts with them (its last one is the same object)."""
        seen = self._boundaries_seen
        if seen is not None and 0 < seen[0] <= len(full) and full[seen[0] - 1] is seen[1]:
            start, epoch = seen[0], seen[2]
        else:
            start, epoch = 0, FIRST_EPOCH
        for m in full[start:]:
            epoch = epoch_after(m, epoch)
        if full:
            self._boundaries_seen = (len(full), full[-1], epoch)
        return epoch

    def live_epoch(self, live: Sequence[Message], keep: int) -> int:
        """`own_epoch(live)`, reading only the messages after those of the previous call (still valid
        up to `keep`)."""
        seen = self._live_seen
        if seen is not None and seen[0] <= keep:
            epoch = max(seen[1], own_epoch(live[seen[0]:]))
        else:
            epoch = own_epoch(live)
        self._live_seen = (len(live), epoch)
        return epoch


def own_epoch(live: Sequence[Message]) -> int:
    """The newest epoch among worksurface's own messages in the transcript (a view fed back, or a
    file worksurface compacted before), so new ids never collide with the ones already there."""
    epochs = [m.meta.get("epoch") for m in live if m.origin is not Origin.CONVERSATION]
    return max((e for e in epochs if isinstance(e, int)), default=FIRST_EPOCH)
