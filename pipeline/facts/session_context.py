"""The session's context one message shows: the harness's per-message fields (date, permission mode),
a `cd` the agent ran, and what a search output lists. Parsers only; the ledger's status reader
(`ledger/walk.py`) applies them message by message, so the status bar parses nothing itself.
"""

from __future__ import annotations

import hashlib
import itertools
import posixpath
import re
from typing import Any, Mapping

# Short hashes identify output lines and whole outputs; 12 hex digits make a collision within
# one session practically impossible while keeping the event log small.
HASH_HEX = 12
# Result items hashed per search: a search listing more than this is not "nothing new" anyway.
MAX_RESULT_ITEMS = 500
# Lines of search output that report rather than list results (Claude Code Grep/Glob).
_NOT_A_RESULT = re.compile(r"^(?:Found \d+ (?:files?|match(?:es)?|lines?)|No (?:files|matches) found"
                           r"|No matches)\b", re.I)
# `cd DIR` leading a command line (alone, or followed by `&&` or `;`).
_CD = re.compile(r"""^\s*cd\s+("[^"]+"|'[^']+'|[^\s;&|]+)\s*(?:&&|;|$)""")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()[:HASH_HEX]


def result_fingerprints(output: str) -> tuple[str, ...]:
    """Hashes of a search output's result lines (its report lines, "Found 3 files", left out)."""
    items = dict.fromkeys(s for line in output.splitlines() if (s := line.strip()) and not _NOT_A_RESULT.match(s))
    return tuple(short_hash(i) for i in itertools.islice(items, MAX_RESULT_ITEMS))


def stamp_date(stamp: Any) -> str | None:
    """The day (YYYY-MM-DD) a message's timestamp field names, or None when it is not one."""
    return stamp[:10] if isinstance(stamp, str) and _DATE.match(stamp) else None


def permission_mode(meta: Mapping[str, Any]) -> str | None:
    """The harness's permission mode recorded with a message (the adapter's field, or Claude Code's
    `permissionMode` in the source record it keeps)."""
    raw = meta.get("raw")
    mode = meta.get("permission_mode") or (raw.get("permissionMode") if isinstance(raw, Mapping) else None)
    return mode if isinstance(mode, str) and mode else None


def cd_directory(command: str, cwd: str | None) -> str | None:
    """The directory a command line leading with `cd DIR` moves to, made absolute against `cwd`; None
    when it does not lead with one, or the target is relative with no known cwd, or is `~`, `$VAR`
    or `-` (not knowable from the text)."""
    m = _CD.match(command)
    if m is None:
        return None
    target = m.group(1).strip("'\"")
    if target.startswith(("~", "$", "-")) or not (posixpath.isabs(target) or cwd):
        return None
    return posixpath.normpath(posixpath.join(cwd or "/", target))
