"""A whole session as one file, so it moves between stores (a directory, a PostgreSQL database) and
back with its views byte for byte: the store's own records (`Store.records`), unchanged.

The file is JSON Lines: a header naming the format and the store version, one `{"key", "value"}`
line per record (the value is the stored JSON text itself, as a string, so nothing is re-encoded),
and a trailer with the record count and a digest over every record, so a truncated or edited file
is refused by name and line instead of importing half a session.
"""

from __future__ import annotations

import hashlib
import json
from typing import IO, Any, Iterator

from ..core.errors import FormatError
from .store import STORE_VERSION, Store

ARCHIVE_FORMAT = "worksurface-session"
ARCHIVE_VERSION = 1


class _Digest:
    """The digest over an archive's records (key, value; each followed by a NUL)."""

    def __init__(self) -> None:
        self._h = hashlib.blake2b(digest_size=16)

    def add(self, key: str, value: str) -> None:
        for part in (key, value):
            self._h.update(part.encode("utf-8", "surrogatepass") + b"\0")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, separators=(",", ":")) + "\n").encode("ascii")


def export_session(store: Store, out: IO[bytes], source: str) -> int:
    """Write the session `store` holds to `out` as one snapshot (under its lock); returns the
    number of records. `source` names where it came from (no password), for the header."""
    digest = _Digest()
    n = 0
    with store.lock():
        out.write(_line({"format": ARCHIVE_FORMAT, "version": ARCHIVE_VERSION, "store_version": STORE_VERSION,
                         "source": source}))
        for key, value in store.records():
            out.write(_line({"key": key, "value": value}))
            digest.add(key, value)
            n += 1
    out.write(_line({"end": {"records": n, "digest": digest.hexdigest()}}))
    return n


def import_session(source: IO[bytes], store: Store, name: str) -> int:
    """Fill the new, empty session `store` from the archive `source` (named `name` in errors), in one
    transaction: a damaged archive leaves the store as it was. Returns the number of records."""
    records = _read(source, name)
    count = [0]

    def counted() -> Iterator[tuple[str, str]]:
        for record in records:
            count[0] += 1
            yield record

    store.restore(counted())
    return count[0]


def _read(source: IO[bytes], name: str) -> Iterator[tuple[str, str]]:
    """The archive's records, checked line by line; the trailer is checked before the last is given."""
    digest = _Digest()
    n = 0
    line_no = 0
    header_seen = False
    for line_no, raw in enumerate(source, 1):
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FormatError(f"not a JSON line ({exc})", path=name, line=line_no) from None
        if not header_seen:
            _check_header(data, name)
            header_seen = True
            continue
        if isinstance(data, dict) and set(data) == {"end"}:
            end = data["end"]
            if not isinstance(end, dict) or end.get("records") != n or end.get("digest") != digest.hexdigest():
                raise FormatError(f"the trailer does not match the {n} records read (the file was edited or "
                                  "damaged)", path=name, line=line_no)
            rest = source.read()
            if rest.strip():
                raise FormatError("data after the trailer", path=name, line=line_no + 1)
            return
        if not (isinstance(data, dict) and set(data) == {"key", "value"}
                and isinstance(data["key"], str) and isinstance(data["value"], str)):
            raise FormatError("not a session record ({\"key\": ..., \"value\": ...})", path=name, line=line_no)
        digest.add(data["key"], data["value"])
        n += 1
        yield data["key"], data["value"]
    if not header_seen:
        raise FormatError("empty file: not a worksurface session export", path=name)
    raise FormatError(f"ends after {n} records without its trailer (a truncated export)", path=name,
                      line=line_no)


def _check_header(data: Any, name: str) -> None:
    if not isinstance(data, dict) or data.get("format") != ARCHIVE_FORMAT:
        raise FormatError("not a worksurface session export (`worksurface session export` writes them)",
                          path=name, line=1)
    if data.get("version") != ARCHIVE_VERSION or data.get("store_version") != STORE_VERSION:
        raise FormatError(f"export format {data.get('version')} of store version {data.get('store_version')}; this "
                          f"worksurface reads format {ARCHIVE_VERSION} of store version {STORE_VERSION}",
                          path=name, line=1)


__all__ = ["ARCHIVE_FORMAT", "export_session", "import_session"]
