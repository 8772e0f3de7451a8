"""One worksurface session per conversation thread, and the prepare step the agent integrations share.

A LangGraph thread id names a conversation; each gets its own session: a directory under a base
directory, a memory-only session, or whatever a factory returns.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from .langchain_messages import ConversionCache, from_worksurface

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ..session import Session

# A graph run without a checkpointer has no thread id; all such runs share this session.
DEFAULT_THREAD = "default"
# Thread ids that are safe as a directory name as they are; others get a sanitized name plus a hash.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")

SessionSource = Union[Callable[[str], "Session"], str, os.PathLike, None]


def thread_id_of(config: Mapping[str, Any] | None) -> str:
    """The LangGraph thread id in a RunnableConfig (DEFAULT_THREAD when there is none)."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    return DEFAULT_THREAD if thread is None else str(thread)


def thread_dirname(thread_id: str) -> str:
    """A directory name for a thread id: the id itself when safe, else a sanitized form + hash
    (so distinct ids never share a directory and `..` never escapes the base)."""
    if _SAFE_NAME.fullmatch(thread_id) and thread_id not in (".", ".."):
        return thread_id
    digest = hashlib.blake2b(thread_id.encode(), digest_size=6).hexdigest()
    return f"{_UNSAFE_CHARS.sub('_', thread_id)[:48]}-{digest}"


class SessionPool:
    """Sessions by thread id, opened on first use. `source` is a base directory (one subdirectory
    per thread), None (memory-only sessions), or a callable thread_id -> Session. `config` goes to
    `Session.open` (config overrides, `summarizer=`...)."""

    def __init__(self, source: SessionSource = None, **config: Any) -> None:
        self._source = source
        self._config = config
        self._sessions: dict[str, Session] = {}
        self._caches: dict[str, ConversionCache] = {}
        self._lock = threading.Lock()

    def get(self, thread_id: str) -> "Session":
        with self._lock:
            session = self._sessions.get(thread_id)
            if session is None:
                session = self._sessions[thread_id] = self._open(thread_id)
                self._caches[thread_id] = ConversionCache()
            return session

    def conversions(self, thread_id: str) -> ConversionCache:
        """The thread's message conversion cache (a thread runs one step at a time)."""
        self.get(thread_id)
        return self._caches[thread_id]

    def _open(self, thread_id: str) -> "Session":
        if callable(self._source):
            return self._source(thread_id)
        from ..session import Session  # imported on first use: keeps importing an integration light
        path = None if self._source is None else Path(self._source) / thread_dirname(thread_id)
        return Session.open(path, **self._config)

    def close(self) -> None:
        with self._lock:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()
            self._caches.clear()


def last_input_tokens(messages: Sequence["BaseMessage"]) -> int | None:
    """The provider's input tokens reported with the newest AI message: the size of the view the
    previous call really sent (tools and system prompt included), the anchor for the estimate."""
    for m in reversed(messages):
        if m.type in ("ai", "AIMessageChunk"):
            usage = getattr(m, "usage_metadata", None) or {}
            tokens = usage.get("input_tokens")
            return tokens if isinstance(tokens, int) and tokens > 0 else None
    return None


def prepare_view(pool: SessionPool, messages: Sequence["BaseMessage"],
                 thread_id: str) -> list["BaseMessage"]:
    """The view for the next model call, as LangChain messages; `messages` is not modified."""
    history = list(messages)
    converted = pool.conversions(thread_id).to_worksurface(history)
    prepared = pool.get(thread_id).prepare(converted, usage=last_input_tokens(history))
    return from_worksurface(prepared.messages, history)
