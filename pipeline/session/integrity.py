"""The store's one integrity check: every stored value is decoded, counted and cross-checked here, on
every backend, so damage is named (`StoreDamagedError`: which store, which value, what is wrong)
instead of surfacing as a traceback, and a damaged store is never silently taken for a new one.

Three depths: `check_version_record` when a store opens (a garbage or missing version record),
`check_lengths` when a session loads (the three length counters and the last entry each promises: a
handful of reads), and the decoders every read goes through (a bad log entry, edit, token chunk or
artifact is found when it is read, which `Session` does for all but artifacts at open).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from ..core.artifacts import ARTIFACT_ID_RE
from ..core.errors import ArtifactDamagedError, SessionError, StoreDamagedError

if TYPE_CHECKING:
    from .store import Store

T = TypeVar("T")

VERSION_KEY = "store:version"
# Each length counter and the entries it promises (an entry i < length exists for every key pattern).
SEQUENCES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("log:len", ("log:{}", "logmsg:{}"), "log"),
    ("edits:len", ("edit:{}",), "edit list"),
    ("tokens:len", ("tokens:{}",), "token cache"),
)


def decode(store: str, key: str, text: str) -> Any:
    """The JSON value stored under `key`."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StoreDamagedError(f"not valid JSON ({_short(exc)}): {_excerpt(text)}", store=store, key=key) from None


def count(store: str, key: str, value: Any) -> int:
    """A stored length: a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreDamagedError(f"a length must be a non-negative integer, not {_excerpt(json.dumps(value))}",
                                store=store, key=key)
    return value


def parsed(store: str, key: str, what: str, parse: Callable[[Any], T], value: Any) -> T:
    """`parse(value)`, with a shape the parser does not expect named as damage of `what`."""
    if value is None:
        raise StoreDamagedError(f"{what} is missing", store=store, key=key)
    try:
        return parse(value)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise StoreDamagedError(f"{what} does not read back ({type(exc).__name__}: {_short(exc)})",
                                store=store, key=key) from None


def check_version(store: str, value: Any, supported: int) -> None:
    """The store's key-layout version: this one, or refused (an older or newer worksurface wrote it)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreDamagedError(f"the version record is not a version number: {_excerpt(json.dumps(value))}",
                                store=store, key=VERSION_KEY)
    if value != supported:
        raise SessionError(f"{store}: session store version {value}, this worksurface reads version {supported}")


def check_version_record(store: "Store", supported: int) -> bool:
    """At open: the store's version record is this version; True when the store is new (holds
    nothing yet). A store that holds values but no version record is damaged, not new, and so is one
    whose values were all deleted after it was written (a database session's rows emptied)."""
    version = store._load(VERSION_KEY)
    if version is None:
        if store._keys():
            raise StoreDamagedError("the version record is missing while the store holds values "
                                    "(damaged, or not a worksurface session)", store=store.location, key=VERSION_KEY)
        if store._committed_before():
            raise StoreDamagedError("the session holds no values although values were committed to it: they were "
                                    "deleted; nothing was changed (delete the session to start it again)",
                                    store=store.location, key=VERSION_KEY)
        return True
    check_version(store.location, version, supported)
    return False


def check_lengths(store: "Store") -> None:
    """Under the session lock, before the session is read: each length counter is a length and the
    last entry it promises exists (a log length past the end is caught here, a hole when read)."""
    name = store.location
    promised: list[tuple[str, str, int]] = []
    for length_key, patterns, what in SEQUENCES:
        n = count(name, length_key, store._load(length_key, 0))
        if n:
            promised += [(pattern.format(n - 1), what, n) for pattern in patterns]
    present = store._get_many([key for key, _, _ in promised])
    for (key, what, n), text in zip(promised, present):
        if text is None:
            raise StoreDamagedError(f"the {what} length says {n} entries, but entry {n - 1} is missing "
                                    "(a length past the end)", store=name, key=key)


def check_artifact(store: str, artifact_id: str, content: str, digest: str | None, digest_of: Callable[[str], str]) -> None:
    """A fetched artifact is the content its id names (an id is the start of its content's digest), and
    the one its record's digest names when there is a record; ArtifactDamagedError otherwise, on every
    read: a store or file whose content was changed is never served as the original."""
    actual = digest_of(content)
    if digest is not None and actual != digest:
        raise ArtifactDamagedError("the artifact's content does not match its recorded digest",
                                   store=store, key=f"artifact:{artifact_id}")
    if not ARTIFACT_ID_RE.fullmatch(artifact_id) or not actual.startswith(artifact_id):
        raise ArtifactDamagedError(f"the artifact's content does not match its id (the content's digest starts "
                                   f"{actual[:16]})", store=store, key=f"artifact:{artifact_id}")


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc)
    return text[:limit] + ("..." if len(text) > limit else "")


@contextmanager
def reading_stored(store: "Store", what: str) -> Iterator[None]:
    """Stored state whose shape the reader does not expect is damage of the store, named as such."""
    try:
        yield
    except StoreDamagedError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise StoreDamagedError(f"the stored {what} does not read back ({type(exc).__name__}: {exc})",
                                store=store.location) from None
