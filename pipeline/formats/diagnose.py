"""Why auto-detection failed: the most specific error instead of "unrecognised transcript format".

A file that is meant to be a transcript but has one bad line or record sniffs as nothing, because
sniffers are cheap and forgiving. When detection fails this module looks again: broken JSON or JSON
Lines gets the decoder's line and column; a JSON document whose shape points at one format (a
`history` list, OpenHands events, a chat `messages` list, Claude Code records) is read by that
format's adapter so its error, naming the record, is reported.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from ..core import strictjson
from ..core.errors import FormatError, UnknownFormatError
from .jsondoc import MAX_DEPTH, as_messages, too_deep

# JSON Lines formats whose first record names itself with these keys.
_JSONL_HINTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("codex", ("payload",)),
    ("claude-code", ("uuid", "sessionId", "parentUuid")),
)

Reader = Callable[[str, "str | None"], Any]


def unrecognised(text: str, path: str | None, readers: Mapping[str, Reader]) -> FormatError:
    """The error to raise when no adapter's sniff accepted `text`."""
    names = ", ".join(readers)
    generic = UnknownFormatError(f"unrecognised transcript format (expected one of: {names})", path=path)
    if not text.strip():
        return UnknownFormatError("the file is empty: no transcript in it", path=path)
    if text.lstrip()[:1] not in ("[", "{"):
        return generic
    try:
        doc = strictjson.loads(text)
    except strictjson.UnreadableNumber as exc:
        return strictjson.number_error(exc, text, path)
    except RecursionError:
        return FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path)
    except json.JSONDecodeError as exc:
        return _jsonl_error(text, path, readers) or FormatError(
            f"invalid JSON ({exc.msg} at column {exc.colno})", path=path, line=exc.lineno)
    if too_deep(doc):
        return FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path)
    name = _near(doc)
    if name is not None and name in readers:
        try:
            readers[name](text, path)
        except FormatError as exc:
            return exc
        except RecursionError:
            return FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path)
    return generic


def _near(doc: Any) -> str | None:
    """The format a parsed document's shape points at, if any."""
    if isinstance(doc, dict) and "history" in doc:
        return "swe-agent"
    if isinstance(doc, dict) and str(doc.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return "mini-swe-agent"
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "source" in doc[0] \
            and ("action" in doc[0] or "observation" in doc[0]):
        return "openhands"
    if as_messages(doc) is not None:
        return "anthropic" if isinstance(doc, dict) and "system" in doc else "openai"
    return None


def _jsonl_error(text: str, path: str | None, readers: Mapping[str, Reader]) -> FormatError | None:
    """For JSON Lines (the first line is a whole JSON object): the first bad line's error, from
    the adapter the first record points at when it names one, else from the decoder."""
    lines = text.splitlines()
    try:
        first = json.loads(lines[0]) if lines else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(first, dict):
        return None
    for name, keys in _JSONL_HINTS:
        if name in readers and any(k in first for k in keys):
            try:
                readers[name](text, path)
            except FormatError as exc:
                return exc
            except RecursionError:
                break
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            strictjson.loads(line)
        except strictjson.UnreadableNumber as exc:
            return strictjson.number_error(exc, line, path, number)
        except json.JSONDecodeError as exc:
            return FormatError(f"invalid JSON Lines record ({exc.msg} at column {exc.colno})", path=path,
                               line=number)
        except RecursionError:
            return FormatError(f"JSON nested more than {MAX_DEPTH} levels deep: not read", path=path,
                               line=number)
    return None
