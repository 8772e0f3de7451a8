"""The cyclic garbage collector, paused while worksurface builds many objects that hold no cycles.

Reading a transcript builds a few objects per JSON value (dicts, lists, strings, messages, blocks),
none of them in a reference cycle, so the collector finds nothing; but its full collections walk
every live object, and while 100k messages are read that walk runs again and again (a third of
reading such a file). Reference counting still frees everything at once; only the search for cycles
waits until the block ends.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector comes back as it was (nested blocks and
    a collector the caller turned off are left alone)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
