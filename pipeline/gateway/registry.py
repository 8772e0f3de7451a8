"""The sessions the gateway is serving: one entry per recognised conversation, with its lock (two
requests of one conversation are prepared one after the other), its open worksurface session (the
least recently used are closed past `max_open_sessions`) and what the last call measured."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..core.config import Config
from ..core.errors import SessionError
from ..core.model import Origin
from ..formats import ownmark
from ..formats.reuse import Memo, Reuse
from ..session.session import Session
from ..session.writebehind import Flusher, StoreWriteError, WriteBehindStore
from .config import GatewayConfig
from .encoding import BodyEncoder
from .logs import event
from .recognize import Recognized
from .workers import Workers
from .store import (delete_gateway_session, list_gateway_sessions, open_gateway_session, read_info,
                    write_info)


@dataclass
class Entry:
    """One conversation. The input tokens the upstream reports for a call are kept in the session's
    store (`Session.record_usage`, what the next `prepare` anchors its size on, on whichever replica
    it runs); `recording` is that write while it is under way."""

    id: str
    api: str
    source: str
    harness_id: str | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: Session | None = None
    reuse: Reuse = field(default_factory=Reuse)   # the previous request's messages, for reading the next
    memo: Memo = field(default_factory=Memo)      # what the previous forwarded body made of each message
    encoder: BodyEncoder = field(default_factory=BodyEncoder)     # and the bytes of its values
    recording: "asyncio.Task[None] | None" = None
    last_report: dict[str, Any] | None = None
    summaries: set[str] = field(default_factory=set)
    # The secret worksurface's marks in this conversation's forwarded requests are tagged with (kept in
    # the store beside the session, never served): a client's text is never taken for one (ownmark).
    mark_key: bytes = ownmark.NO_KEY
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    created: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.time)

    def record_usage(self, tokens: int | None, workers: Workers) -> None:
        """Keep `tokens` in the store, on a worker thread, after any write of this conversation still
        under way (so the last reported usage is the one kept). Event loop only."""
        previous = self.recording

        async def record() -> None:
            if previous is not None:
                await asyncio.shield(previous)
            async with self.lock:       # never beside a prepare of the same session object
                session = self.session
                if session is not None:
                    await workers.run(session.record_usage, tokens)
        self.recording = asyncio.get_running_loop().create_task(record())

    async def recorded(self) -> None:
        """Wait for the usage write under way, if any: a failed one is logged, never raised (the next
        call is then sized without it, as a first call is)."""
        task = self.recording
        if task is not None:
            try:
                await asyncio.shield(task)
            except Exception as exc:
                event(logging.WARNING, "reported usage not stored", session=self.id,
                      error=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                if self.recording is task:
                    self.recording = None
        await self.stored()

    async def stored(self) -> None:
        """Wait until what this conversation's calls committed is in the durable store (a hot session's
        writes go behind the request): an answer ends only then. A write that failed is logged; the
        session is then reopened from the store on its next call (Registry.open)."""
        store = self.session.store if self.session is not None else None
        if not isinstance(store, WriteBehindStore):
            return
        try:
            await asyncio.wrap_future(store.durable_future())
        except StoreWriteError as exc:
            event(logging.WARNING, "session not stored: it is read again from the store on its next call",
                  session=self.id, error=str(exc)[:300])

    def info(self) -> dict[str, Any]:
        return {"id": self.id, "api": self.api, "source": self.source, "created": self.created,
                "summaries": sorted(self.summaries), "mark_key": self.mark_key.hex()}


class Registry:
    def __init__(self, config: GatewayConfig, session_config: Config, workers: Workers,
                 flusher: Flusher | None = None) -> None:
        self.config = config
        self.workers = workers
        self.flusher = flusher      # hot sessions' writes (None: every call writes the store itself)
        self.session_config = session_config
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def entry(self, rec: Recognized, api: str) -> Entry:
        """The conversation's entry (created on its first request; event loop only)."""
        entry = self._entries.get(rec.session_id)
        if entry is None:
            entry = self._entries[rec.session_id] = Entry(rec.session_id, api, rec.source, rec.harness_id)
        self._entries.move_to_end(rec.session_id)
        entry.last_seen = time.time()
        return entry

    def find(self, session_id: str) -> Entry | None:
        return self._entries.get(session_id)

    def open(self, entry: Entry) -> Session:
        """The entry's session, opened on first use (in a worker thread, under the entry's lock). A hot
        session whose writes failed is dropped first: it is ahead of the store, which is read again."""
        failed = entry.session.store if entry.session is not None else None
        if isinstance(failed, WriteBehindStore) and failed.failed is not None:
            entry.session, entry.reuse, entry.memo, entry.encoder = None, Reuse(), Memo(), BodyEncoder()
            failed.close()      # releases the durable store; what it holds is the last stored commit
        if entry.session is None:
            stored = read_info(self.config.store, entry.id)
            entry.session = open_gateway_session(self.config.store, entry.id, self.session_config, self.flusher)
            if stored:
                entry.summaries |= set(stored.get("summaries") or ())
                entry.created = float(stored.get("created") or entry.created)
                entry.mark_key = _mark_key(stored.get("mark_key"))
            if not stored:
                entry.mark_key = ownmark.new_key()
                write_info(self.config.store, entry.id, entry.info())
            elif not entry.mark_key:    # a session stored before marks were tagged: its notes kept, a key added
                entry.mark_key = ownmark.new_key()
                write_info(self.config.store, entry.id, {**stored, "mark_key": entry.mark_key.hex()})
        return entry.session

    def remember_summary(self, entry: Entry, key: str) -> None:
        entry.summaries.add(key)
        write_info(self.config.store, entry.id, entry.info())

    def open_count(self) -> int:
        return sum(1 for e in self._entries.values() if e.session is not None)

    async def evict(self) -> None:
        """Close the least recently used idle sessions beyond the limit (their data stays stored)."""
        excess = self.open_count() - self.config.max_open_sessions
        for entry in list(self._entries.values()):
            if excess <= 0:
                break
            if entry.session is not None and not entry.lock.locked():
                session, entry.session = entry.session, None
                entry.reuse, entry.memo, entry.encoder = Reuse(), Memo(), BodyEncoder()   # its next request is read whole, like a first one
                await self._close(entry, session)
                excess -= 1

    async def close(self) -> None:
        for entry in self._entries.values():
            if entry.session is not None:
                session, entry.session = entry.session, None
                await self._close(entry, session)

    async def _close(self, entry: Entry, session: Session) -> None:
        """Close a session (a hot one's writes stored first); one that cannot be stored is logged, and
        the store keeps its last stored commit."""
        try:
            await self.workers.run(session.close)
        except SessionError as exc:
            event(logging.WARNING, "session not stored at close: the store keeps its last stored call",
                  session=entry.id, error=str(exc)[:300])

    # --- the /sessions endpoints -----------------------------------------------------------------

    def list(self) -> list[dict[str, Any]]:
        ids = set(list_gateway_sessions(self.config.store)) | set(self._entries)
        return [self._summary(i) for i in sorted(ids)]

    def _summary(self, session_id: str) -> dict[str, Any]:
        entry = self._entries.get(session_id)
        info = read_info(self.config.store, session_id) if entry is None else entry.info()
        out: dict[str, Any] = {"id": session_id, "api": info.get("api"), "source": info.get("source"),
                               "created": info.get("created")}
        if entry is not None:
            out.update(calls=entry.calls, last_seen=entry.last_seen, open=entry.session is not None,
                       cached_share=round(entry.cached_tokens / entry.input_tokens, 4) if entry.input_tokens else None)
        return out

    async def describe(self, session_id: str) -> dict[str, Any] | None:
        """A session's status bar, ledger counts and last report (None: no such session)."""
        if session_id not in self._entries and session_id not in list_gateway_sessions(self.config.store):
            return None
        entry = self._entries.get(session_id) or self.entry(Recognized(session_id, "stored"), "unknown")
        async with entry.lock:
            session = await self.workers.run(self.open, entry)
            view = await self.workers.run(session.view)
        status = "\n".join(m.text for m in view if m.origin is Origin.STATUS)
        return {**self._summary(session_id), "status": status or None, "ledger": session.ledger.entry_counts(),
                "view_messages": len(view), "last_report": entry.last_report}

    async def delete(self, session_id: str) -> bool:
        entry = self._entries.get(session_id)
        if entry is not None:
            async with entry.lock:
                if entry.session is not None:
                    session, entry.session = entry.session, None
                    await self.workers.run(session.close)
                self._entries.pop(session_id, None)
        return await self.workers.run(delete_gateway_session, self.config.store, session_id)


def _mark_key(stored: Any) -> bytes:
    """The stored mark key (NO_KEY when there is none or it is not one: a new one is made)."""
    try:
        key = bytes.fromhex(stored) if isinstance(stored, str) else ownmark.NO_KEY
    except ValueError:
        return ownmark.NO_KEY
    return key if len(key) >= 16 else ownmark.NO_KEY
