"""Which conversation a request belongs to, without the client's cooperation.

A harness sends the whole conversation on every call, so a conversation is known by what stays the
same: its stable prefix (everything up to and including the first user message: the system prompt,
the harness's standing context, the user's first words). A harness's own session id (Claude Code's
`metadata.user_id` session, Codex's `session_id` header or `prompt_cache_key`) narrows it further
but never replaces it, because one harness session runs several conversations (the main agent,
its sub-agents, a title request) that must not be mixed. Only `X-Worksurface-Session`, a promise by
the caller that every request carrying it is one conversation, names a session on its own.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..core.model import Message
from ..formats import ownmark
from .apis import Api
from .bodyparse import BodyParser
from .context_management import parse as parse_context_management

SESSION_HEADER = "x-worksurface-session"
# Headers harnesses send that name their own session (Codex: session_id, conversation_id).
HARNESS_HEADERS = ("session_id", "conversation_id", "x-claude-code-session-id", "x-session-id")
# Claude Code's older metadata form: user_<hash>_account_<uuid>_session_<uuid>.
_LEGACY_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})")
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ID_CHARS = 20


@dataclass(frozen=True)
class Recognized:
    """A request's session: `session_id` names its directory; `source` says how it was known."""

    session_id: str
    source: str                 # "header", "harness+prefix" or "prefix"
    harness_id: str | None = None


@dataclass(frozen=True)
class Head:
    """What is known of a request before its conversation's lock: the parsed body, and either why it
    passes through untouched or the conversation it belongs to."""

    body: Any
    passthrough: str | None
    recognized: Recognized | None


def read_head(api: Api, headers: Mapping[str, str], raw: bytes, parser: BodyParser | None = None,
              prefixes: "PrefixMemo | None" = None) -> Head:
    """Parse a request and recognise its conversation, reading only its stable prefix (an exception:
    the request is not readable, and goes on unchanged). `parser` and `prefixes` make that follow
    what changed since a recent request of the conversation (bodyparse, PrefixMemo)."""
    body = parser.parse(raw) if parser is not None else json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError(f"a request body must be a JSON object, not {type(body).__name__}")
    parse_context_management(body)
    reason = api.passthrough_reason(body)
    if reason is not None:
        return Head(body, reason, None)
    with ownmark.keyed(ownmark.NO_KEY):     # before the session's key is known, every text is the client's
        prefix = prefixes.stable_prefix(api, body) if prefixes is not None else api.stable_prefix(body)
    return Head(body, None, recognize(api.NAME, headers, body, prefix))


class PrefixMemo:
    """`api.stable_prefix(body)` once per stable prefix: a body whose values before its first user
    message are the very objects of a recent body's (what BodyParser hands back for unchanged text)
    and whose other fields are those objects or equal scalars has that body's prefix, read before."""

    def __init__(self, recent: int = 64) -> None:
        self._recent: OrderedDict[tuple[str, int], tuple[tuple[Any, ...], list[Message]]] = OrderedDict()
        self._limit = recent
        self._lock = threading.Lock()

    def stable_prefix(self, api: Api, body: dict[str, Any]) -> list[Message]:
        items = body.get(api.LIST_KEY)
        if not isinstance(items, list) or not items:
            return api.stable_prefix(body)
        end = next((i + 1 for i, item in enumerate(items) if api.is_user(item)), len(items))
        parts = (*((k, v) for k, v in body.items() if k != api.LIST_KEY), *items[:end])
        key = (api.NAME, id(items[0]))
        with self._lock:
            known = self._recent.get(key)
        if known is not None and _same_parts(known[0], parts):
            return known[1]
        prefix = api.stable_prefix(body)
        with self._lock:
            self._recent[key] = (parts, prefix)     # holding the parts keeps their identities theirs
            self._recent.move_to_end(key)
            while len(self._recent) > self._limit:
                self._recent.popitem(last=False)
        return prefix


def _same_parts(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, tuple) and isinstance(y, tuple):       # a (field, value) pair
            if x[0] != y[0] or not _same_value(x[1], y[1]):
                return False
        elif x is not y:
            return False
    return True


def _same_value(x: Any, y: Any) -> bool:
    if x is y:
        return True
    if isinstance(x, (dict, list)) or isinstance(y, (dict, list)):
        return False            # a container is the same only as the same object (never compared deep)
    return type(x) is type(y) and x == y


def recognize(api: str, headers: Mapping[str, str], body: Mapping[str, Any],
              messages: Sequence[Message]) -> Recognized:
    """The session of one request (`messages`: the transcript read from `body`)."""
    explicit = headers.get(SESSION_HEADER)
    if explicit:
        name = explicit if _SAFE.fullmatch(explicit) and explicit not in (".", "..") else _digest(explicit)
        return Recognized(f"s-{name}", "header", explicit)
    harness = harness_session(headers, body)
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{api}\x00{harness or ''}\x00".encode())
    for m in stable_prefix(messages):
        h.update(m.digest.encode())
    return Recognized(f"{_API_PREFIX.get(api, 'x')}-{h.hexdigest()[:ID_CHARS]}",
                      "harness+prefix" if harness else "prefix", harness)


_API_PREFIX = {"anthropic": "a", "openai-chat": "c", "openai-responses": "r"}


def stable_prefix(messages: Sequence[Message]) -> Sequence[Message]:
    """Everything up to and including the first user message (all of it when there is none)."""
    for i, m in enumerate(messages):
        if m.role == "user":
            return messages[:i + 1]
    return messages


def harness_session(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The harness's own session id, where it sends one."""
    for name in HARNESS_HEADERS:
        if headers.get(name):
            return headers[name]
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return key
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user, str) and user:
        try:
            parsed = json.loads(user)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str):
            return str(parsed["session_id"])
        legacy = _LEGACY_SESSION.search(user)
        if legacy:
            return legacy.group(1)
    return None


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()
