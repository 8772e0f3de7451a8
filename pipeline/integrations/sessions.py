"""One worksurface session per conversation thread and agent, and the prepare step the integrations share.

A LangGraph thread id names a conversation; each gets its own session: a directory under a base
directory, a memory-only session, or whatever a factory returns. Several agents running on one thread
in one process (a supervisor and its sub-agents) each get their own session too (seed 003: read
caches and content-replacement decisions belong to one agent instance), keyed by the agent id or name
the run config carries; nothing is kept in a global.
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

    from ..session.session import Session

# A graph run without a checkpointer has no thread id; all such runs share this session.
DEFAULT_THREAD = "default"
# Thread ids that are safe as a directory name as they are; others get a sanitized name plus a hash.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")

SessionSource = Union[Callable[[str], "Session"], str, os.PathLike, None]
# Where a run config names its agent: an explicit `configurable.agent_id` (or `agent_name`), else the
# name LangChain's `create_agent(name=...)` puts in `metadata.lc_agent_name`.
AGENT_KEYS = ("agent_id", "agent_name")
LC_AGENT_NAME = "lc_agent_name"
# Joins a thread's directory name and an agent's: never produced by `thread_dirname`, so an agent's
# session can never share a directory with a thread's.
AGENT_SEPARATOR = "+"


def thread_id_of(config: Mapping[str, Any] | None) -> str:
    """The LangGraph thread id in a RunnableConfig (DEFAULT_THREAD when there is none)."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    return DEFAULT_THREAD if thread is None else str(thread)


def agent_id_of(config: Mapping[str, Any] | None) -> str | None:
    """The agent instance a RunnableConfig names (None: the thread's only or main agent)."""
    configurable = (config or {}).get("configurable") or {}
    for key in AGENT_KEYS:
        if configurable.get(key) is not None:
            return str(configurable[key])
    name = ((config or {}).get("metadata") or {}).get(LC_AGENT_NAME)
    return None if name is None else str(name)


def session_key(thread_id: str, agent_id: str | None = None) -> str:
    """The key a pool's sessions are known by: the thread id, or `<thread dir>+<agent dir>` for a
    named agent on that thread (also the directory name, and what a factory callable is given)."""
    if agent_id is None:
        return thread_id
    return f"{thread_dirname(thread_id)}{AGENT_SEPARATOR}{thread_dirname(agent_id)}"


def thread_dirname(thread_id: str) -> str:
    """A directory name for a thread id: the id itself when safe, else a sanitized form + hash
    (so distinct ids never share a directory and `..` never escapes the base)."""
    if _SAFE_NAME.fullmatch(thread_id) and thread_id not in (".", ".."):
        return thread_id
    digest = hashlib.blake2b(thread_id.encode(), digest_size=6).hexdigest()
    return f"{_UNSAFE_CHARS.sub('_', thread_id)[:48]}-{digest}"


def session_id_for(key: str) -> str:
    """A database session id for a pool key: the key itself when a database can hold it, else its
    sanitized form with a hash (as a directory name would be)."""
    from ..core.errors import InvalidSessionIdError
    from ..session.pgstore import check_session_id

    try:
        return check_session_id(key)
    except InvalidSessionIdError:
        return thread_dirname(key)


class SessionPool:
    """Sessions by thread id and agent, opened on first use. `source` is a base directory (one
    subdirectory per thread, and per named agent on a thread), a `postgresql://` URL (one session per
    key in that database), None (memory-only sessions), or a callable key -> Session (the key is the thread id, or `session_key(thread, agent)`). `config`
    goes to `Session.open` (config overrides, `summarizer=`...)."""

    def __init__(self, source: SessionSource = None, **config: Any) -> None:
        self._source = source
        self._config = config
        self._sessions: dict[str, Session] = {}
        self._caches: dict[str, ConversionCache] = {}
        self._lock = threading.Lock()

    def get(self, thread_id: str, agent_id: str | None = None) -> "Session":
        """The session of `agent_id` on `thread_id` (the thread's own when None), opened on first use."""
        key = session_key(thread_id, agent_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = self._open(key, agent_id is None)
                self._caches[key] = ConversionCache()
            return session

    def conversions(self, thread_id: str, agent_id: str | None = None) -> ConversionCache:
        """The agent's message conversion cache on the thread (an agent runs one step at a time)."""
        self.get(thread_id, agent_id)
        return self._caches[session_key(thread_id, agent_id)]

    def _open(self, key: str, plain_thread: bool) -> "Session":
        if callable(self._source):
            return self._source(key)
        from ..session.session import Session  # imported on first use: keeps importing an integration light
        from ..session.pgstore import is_postgres_url
        if is_postgres_url(self._source):
            return Session.open(str(self._source), session_id=session_id_for(key), **self._config)
        name = thread_dirname(key) if plain_thread else key  # an agent key is already two safe names
        path = None if self._source is None else Path(self._source) / name
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
                 thread_id: str, agent_id: str | None = None) -> list["BaseMessage"]:
    """The view for the next model call of `agent_id` on `thread_id`, as LangChain messages;
    `messages` is not modified."""
    history = list(messages)
    converted = pool.conversions(thread_id, agent_id).to_worksurface(history)
    prepared = pool.get(thread_id, agent_id).prepare(converted, usage=last_input_tokens(history))
    return from_worksurface(prepared.messages, history)
