"""Session: the append-only log of a harness's transcript and the sticky surface built on it.

`prepare` is what a harness calls before every model call. It syncs the transcript into the log
(detecting new, edited or rewound history), rebuilds the view from the log and the stored edits
(incrementally when only new messages arrived), runs the staged graph, and commits the log, the new
edits and the metadata in one transaction, so a crash leaves the previous consistent state.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .config import Config
from .edits import Edit, Insert, ReplaceMessages, apply_edits
from .errors import ArtifactNotFoundError, ContextOverflowError, SessionError, WorksurfaceError
from .formats.base import Transcript
from .graph import STAGE_NAMES, build_graph
from .model import Message, Origin, orphans
from .state import StageContext, StageReport
from .status import PublisherState, StatusReducer, event_from_json, event_to_json, publish
from .status.derive import EventDeriver
from .status.events import Event
from .store import MemoryStore, SessionStore
from .tokens import TokenCounter
from .view import check_no_duplicates, check_pairing, close_interrupted, live_slice, protected_ids


# Epoch numbers match the status bar's: the session before any compaction is epoch 1.
FIRST_EPOCH = 1


class InvariantError(WorksurfaceError):
    """A view broke one of DESIGN.md section 9's invariants: a bug in worksurface, never the input."""


@dataclass
class PrepareReport:
    """What one `prepare` did: token figures, one report per stage and reinjector, the boundary."""

    tokens_before: int
    view_tokens_before: int
    tokens_after: int
    stages: list[StageReport]
    reinjected: list[StageReport] = field(default_factory=list)
    boundary: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    ms: float = 0.0
    rewound: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens_before": self.tokens_before,
            "view_tokens_before": self.view_tokens_before,
            "tokens_after": self.tokens_after,
            "stages": [{"name": s.name, "tokens_before": s.tokens_before, "tokens_after": s.tokens_after,
                        "items": s.items, "ms": round(s.ms, 3), "skipped": s.skipped} for s in self.stages],
            "reinjected": [r.to_json() for r in self.reinjected],
            "boundary": self.boundary,
            "status": self.status,
            "ms": round(self.ms, 3),
            "rewound": self.rewound,
        }


@dataclass
class Prepared:
    """The view to send, the report, and the cleared call ids for providers that delete server-side."""

    messages: list[Message]
    report: PrepareReport
    cache_edits: list[str]


def _as_messages(transcript: Transcript | Sequence[Message]) -> list[Message]:
    if isinstance(transcript, Transcript):
        return transcript.messages
    return list(transcript)


class Session:
    """A harness's session. Open with `Session.open(directory)` (or `None` for memory only)."""

    def __init__(self, store: SessionStore | MemoryStore, config: Config, summarizer: Any = None,
                 reinjectors: Sequence[Any] | None = None, counter: TokenCounter | None = None) -> None:
        self.store = store
        self.config = config
        self.summarizer = summarizer or self._configured_summarizer(config)
        self.counter = counter or TokenCounter()
        self.reinjectors = tuple(reinjectors) if reinjectors is not None else _default_reinjectors()
        self._graph = build_graph()
        self.counter.load_message_counts(store.token_cache())
        self._log: list[Message] = store.log_messages()
        self._digests: list[str] = [m.digest for m in self._log]
        self._edits: list[Edit] = store.edits()
        self._cached: tuple[int, int, list[Message]] | None = None  # (log length, edit count, view)
        self._verify_reopened()
        self._deriver: EventDeriver | None = None  # status events derived from the live transcript
        self._deriver_seen = 0
        self._reducer = StatusReducer()
        self._status_reset = False  # a rewind dropped the status edits; the store follows at commit

    def _verify_reopened(self) -> None:
        """A reopened session must rebuild exactly the view it last returned (DESIGN.md section 7)."""
        stored = self.store.get_meta("view_digest")
        if stored is None:
            return
        view = self.view()
        if view_digest(view) != stored:
            raise SessionError(f"{getattr(self.store, 'path', 'session')}: the stored log and edits do not rebuild "
                               "the last view (damaged directory, or written by another worksurface version)")
        self._cached = (len(self._log), len(self._edits), view)

    @staticmethod
    def _configured_summarizer(config: Config) -> Any:
        """The summarizer the config names; None means the built-in structured one."""
        if config.autocompact.summarizer == "structured" and not config.autocompact.summarizer_options:
            return None
        from .summarizers import get_summarizer
        return get_summarizer(config.autocompact.summarizer, **config.autocompact.summarizer_options)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, config: Config | None = None,
             summarizer: Any = None, **overrides: Any) -> "Session":
        """Open or create the session at `path`; config from `config`, else defaults, then overrides."""
        cfg = (config or Config()).with_overrides(**overrides)
        counter = TokenCounter()
        store = MemoryStore(counter) if path is None else SessionStore.open(Path(path), counter)
        return cls(store, cfg, summarizer, counter=counter)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the main call --------------------------------------------------------------------------

    def prepare(self, transcript: Transcript | Sequence[Message], usage: int | tuple[str, int] | None = None,
                now: float | None = None, *, force: bool = False, instructions: str | None = None) -> Prepared:
        """Build the view for the next model call. `usage` is the provider's reported input tokens for
        the previous call (an int, anchored at the last message sent, or `(message_id, tokens)`)."""
        started = time.perf_counter()
        now = time.time() if now is None else now
        with self.store.lock():
            live = close_interrupted(live_slice(_as_messages(transcript)))
            keep = self._sync_point(live)
            rewound = len(self._log) - keep
            if rewound:
                self._reset_status()
                removed = {m.id for m in self._log[keep:]}
                removed |= {c.id for m in self._log[keep:] for c in m.tool_calls}
                removed |= {r.call_id for m in self._log[keep:] for r in m.tool_results}
                self._edits = [e for e in self._edits if not removed.intersection(e.refs)]
                self._cached = None
            view = self._current_view(live, keep)
            raw_tokens = self.counter.messages(live)
            counted = self.counter.messages(view)
            offset = self._usage_offset(view, counted, usage)
            ctx = self._context(now, force, instructions)
            ctx.protected = protected_ids(view)
            ctx.extras["transcript"] = live
            if isinstance(transcript, Transcript):
                ctx.extras["queued_inputs"] = transcript.queued_inputs
            snapshot = self._status_snapshot(live, keep)
            status_state = self._publisher_state(live, snapshot)
            ctx.extras.update(status_snapshot=snapshot, status_state=status_state)
            # The status published after the graph counts against every trigger, so a view that the
            # stages leave under the threshold is still under it with its status.
            planned = publish(status_state, snapshot, strategy=status_state.strategy, now=now)
            offset += self.counter.messages(planned[1].messages)
            start_state = {"view": view, "tokens": counted + offset, "edits": [], "reports": [],
                           "cache_edits": [], "compacted": False}
            ctx.extras["token_offset"] = offset
            final = self._graph.invoke(start_state, config={"configurable": {"ctx": ctx}})
            new_edits: list[Edit] = list(final.get("edits", []))
            out_view = final["view"]
            ctx.extras["graph_edits"] = new_edits
            status_edits, new_status_state, status_report = self._publish_status(ctx, out_view, status_state, planned)
            if status_edits:
                out_view = apply_edits(out_view, status_edits)
                new_edits += status_edits
            if new_edits or rewound:
                self._check(live, out_view)  # an unedited view is the previous one plus the transcript's
            report = self._report(final, raw_tokens, counted + offset, started, rewound)
            report.status = status_report
            self._commit(live, keep, new_edits, out_view, now, report, new_status_state)
            if self._overflowed(report):
                raise ContextOverflowError("compaction could not bring the view under the threshold",
                                           tokens=report.tokens_after, threshold=self.config.threshold)
            return Prepared(out_view, report, list(final.get("cache_edits", [])))

    def compact(self, transcript: Transcript | Sequence[Message], instructions: str | None = None,
                now: float | None = None) -> Prepared:
        """A manual compaction (what `/compact` does): summarize now, whatever the size."""
        return self.prepare(transcript, now=now, force=True, instructions=instructions)

    def snip(self, ids: Iterable[str], reason: str) -> None:
        """Ask the next `prepare` to remove these messages (with their tool pairs) and leave a marker."""
        with self.store.lock(), self.store.transaction():
            pending = self.store.get_meta("pending_snips", [])
            pending.append([list(ids), reason])
            self.store.set_meta("pending_snips", pending)

    def emit(self, event: Event) -> None:
        """Record a harness-supplied status fact (cwd, test result, budget, ...) for the status bar."""
        event_to_json(event)  # validate before storing
        with self.store.lock(), self.store.transaction():
            events = self.store.get_meta("status_events", [])
            events.append(event_to_json(event))
            self.store.set_meta("status_events", events)

    # --- status bar -----------------------------------------------------------------------------

    def _status_snapshot(self, live: list[Message], keep: int):
        """The status snapshot: events derived from the transcript (incrementally: a deriver is fed
        only messages it has not seen) followed by the harness's own events."""
        if self._deriver is None or keep < self._deriver_seen:
            self._deriver, self._deriver_seen = EventDeriver(self.config.window), 0
            self._reducer = StatusReducer()
        for m in live[self._deriver_seen:]:
            for event in self._deriver.derive(m):
                self._reducer.apply(event)
        self._deriver_seen = len(live)
        emitted = self.store.get_meta("status_events", [])
        if not emitted:
            return self._reducer.snapshot()
        # Harness events come after the derived ones; apply them to a copy so the derived state stays
        # incremental.
        reducer = copy.deepcopy(self._reducer)
        for data in emitted:
            reducer.apply(event_from_json(data))
        return reducer.snapshot()

    def _publisher_state(self, live: list[Message], snapshot) -> PublisherState:
        data = None if self._status_reset else self.store.get_meta("status_publisher")
        if data is not None and data.get("strategy") == self.config.status_strategy:
            return PublisherState.from_json(data)
        fed_back = [m for m in live if m.origin is Origin.STATUS]
        if fed_back:
            # The harness sent back a view with our status in it: that status is what the model has,
            # so continue after it instead of publishing a second copy.
            last = fed_back[-1].meta
            return PublisherState(self.config.status_strategy, int(last.get("epoch", FIRST_EPOCH)),
                                  int(last.get("seq", 0)), snapshot, tuple(m.id for m in fed_back))
        return PublisherState(strategy=self.config.status_strategy)

    def _reset_status(self) -> None:
        """After a rewind, status publications may sit after removed messages: drop them all and
        publish a fresh baseline in the current epoch."""
        self._edits = [e for e in self._edits if e.stage != "status"]
        self._cached = None
        self._status_reset = True

    def _publish_status(self, ctx: StageContext, view: list[Message], state: PublisherState,
                        planned: tuple[PublisherState, Any]) -> tuple[list[Edit], PublisherState, dict[str, Any]]:
        """Status edits for this call: after a compaction the status reinjector already made the new
        epoch's baseline; otherwise the planned publication (nothing when nothing changed)."""
        if "status_result" in ctx.extras:
            new_state, remove_ids = ctx.extras["status_result"]
            edits: list[Edit] = [ReplaceMessages("status", tuple(remove_ids), ())] if remove_ids else []
            return edits, new_state, {"epoch": new_state.epoch, "seq": new_state.seq, "published": "baseline"}
        new_state, publication = planned
        if self._should_fold(ctx, new_state):
            # One fresh baseline replaces the epoch's accumulated status messages (instead of the
            # planned publication, which is never made).
            folded, publication = publish(dataclasses.replace(state, last=None), ctx.extras["status_snapshot"],
                                          strategy="replace", now=ctx.now)
            new_state = dataclasses.replace(folded, strategy=state.strategy)
        edits = []
        if publication.remove_ids:
            edits.append(ReplaceMessages("status", publication.remove_ids, ()))
        if publication.messages:
            anchor = view[-1].id if view else None
            ref = next((m.id for m in reversed(view) if m.origin is Origin.CONVERSATION), None)
            edits.append(Insert("status", anchor, publication.messages, ref))
        kind = publication.messages[0].meta.get("kind") if publication.messages else None
        return edits, new_state, {"epoch": new_state.epoch, "seq": new_state.seq, "published": kind,
                                  "bytes": publication.bytes}

    def _should_fold(self, ctx: StageContext, state: PublisherState) -> bool:
        if state.strategy == "replace":
            return False
        in_view = len(state.published_ids)
        cache_breaks = bool(ctx.extras.get("graph_edits"))
        return in_view >= self.config.status_fold_max or (cache_breaks and in_view >= self.config.status_fold_min)

    # --- fetching back what was removed (invariant 6) ------------------------------------------

    def original(self, message_id: str) -> Message:
        """The message as the harness sent it, whatever the view now shows."""
        for m in self._log:
            if m.id == message_id:
                return m
        raise ArtifactNotFoundError(f"no message {message_id!r} in this session's log")

    def artifact(self, artifact_id: str) -> str:
        return self.store.get_artifact(artifact_id)

    @property
    def edits(self) -> list[Edit]:
        return list(self._edits)

    # --- internals ------------------------------------------------------------------------------

    def _sync_point(self, live: Sequence[Message]) -> int:
        """Length of the common prefix of the log and the live transcript."""
        n = min(len(self._log), len(live))
        i = 0
        while i < n and self._digests[i] == live[i].digest:
            i += 1
        return i

    def _current_view(self, live: list[Message], keep: int) -> list[Message]:
        """Stored edits applied to the live transcript; incremental when only messages were appended
        (edits only ever refer to messages that existed when they were made)."""
        cached = self._cached
        if cached is not None and cached[0] == keep and cached[1] == len(self._edits) and keep == len(self._log):
            return cached[2] + live[keep:]
        return apply_edits(live, self._edits)

    def _usage_offset(self, view: list[Message], counted: int, usage: int | tuple[str, int] | None) -> int:
        if usage is None:
            return 0
        anchor = usage if isinstance(usage, tuple) else self.store.get_meta("last_view_tail")
        if isinstance(usage, int):
            anchor = (anchor, usage) if anchor else None
        if not anchor:
            return 0
        return self.counter.estimate(view, tuple(anchor)) - counted

    def _context(self, now: float, force: bool, instructions: str | None) -> StageContext:
        last = self.store.get_meta("last_prepare_at")
        snips = [(tuple(ids), reason) for ids, reason in self.store.get_meta("pending_snips", [])]
        return StageContext(
            config=self.config, counter=self.counter, artifacts=self.store, now=now,
            idle_seconds=None if last is None else max(0.0, now - last), forced=force,
            instructions=instructions, epoch=self.store.get_meta("epoch", FIRST_EPOCH), explicit_snips=snips,
            summarizer=self.summarizer, consecutive_failures=self.store.get_meta("consecutive_failures", 0),
            extras={"reinjectors": self.reinjectors})

    def _check(self, live: list[Message], view: list[Message]) -> None:
        before_calls, before_results = orphans(live)
        after_calls, after_results = orphans(view)
        problems = []
        if not after_calls <= before_calls or not after_results <= before_results:
            problems += check_pairing(view)
        problems += check_no_duplicates(view)
        if problems:
            raise InvariantError("worksurface produced an invalid view: " + "; ".join(problems[:5]))

    def _overflowed(self, report: PrepareReport) -> bool:
        """Over the threshold after autocompact had its chance (not when its breaker is open: then the
        report says it stopped trying, and the harness decides)."""
        auto = next(s for s in report.stages if s.name == "autocompact")
        breaker_open = bool(auto.skipped and auto.skipped.startswith("stopped after"))
        return report.tokens_after > self.config.threshold and not breaker_open

    def _report(self, final: dict, raw: int, before: int, started: float, rewound: int) -> PrepareReport:
        by_name = {r.name: r for r in final.get("reports", [])}
        stages, reinjected = [], []
        for r in final.get("reports", []):
            if r.name not in STAGE_NAMES:
                reinjected.append(r)
        tokens_after = self.counter.messages(final["view"])
        running = before
        for name in STAGE_NAMES:
            r = by_name.get(name) or StageReport(name, running, running, skipped="under target")
            running = r.tokens_after
            stages.append(r)
        boundary = by_name["autocompact"].details if "autocompact" in by_name and not by_name["autocompact"].skipped else None
        return PrepareReport(raw, before, tokens_after, stages, reinjected, boundary,
                             ms=(time.perf_counter() - started) * 1000, rewound=rewound)

    def _commit(self, live: list[Message], keep: int, new_edits: list[Edit], view: list[Message],
                now: float, report: PrepareReport, status_state: PublisherState) -> None:
        """Everything this call decided, in one transaction: a crash leaves the previous state."""
        store = self.store
        with store.transaction():
            store.set_meta("status_publisher", status_state.to_json())
            if keep < len(self._log):
                store.truncate_log(keep)
            if self._status_reset:
                store.drop_edits("status")
                self._status_reset = False
            if keep < len(live):
                store.append_messages(live[keep:])
            if new_edits:
                store.add_edits(new_edits)
            store.set_meta("last_prepare_at", now)
            store.set_meta("pending_snips", [])
            if report.boundary:
                store.set_meta("epoch", report.boundary["epoch"])
            if self._overflowed(report):
                store.set_meta("consecutive_failures", store.get_meta("consecutive_failures", 0) + 1)
            elif report.tokens_after <= self.config.threshold:
                store.set_meta("consecutive_failures", 0)
            store.set_meta("last_view_tail", view[-1].id if view else None)
            store.set_meta("view_digest", view_digest(view))
            store.update_token_cache(self.counter.take_unsaved())
        self._log = self._log[:keep] + list(live[keep:])
        self._digests = self._digests[:keep] + [m.digest for m in live[keep:]]
        self._edits = self._edits + list(new_edits)
        self._cached = (len(self._log), len(self._edits), view)

    def view(self) -> list[Message]:
        """The view as of the last `prepare`, rebuilt from the log and the edits (no new decisions)."""
        return apply_edits(live_slice(self._log), self._edits)


def view_digest(view: Sequence[Message]) -> str:
    """A digest of a whole view, from the per-message digests (cheap: those are cached)."""
    h = hashlib.blake2b(digest_size=16)
    for m in view:
        h.update(m.digest.encode())
    return h.hexdigest()


def _default_reinjectors() -> tuple[Any, ...]:
    from worksurface.reinjectors import DEFAULT_REINJECTORS
    return tuple(DEFAULT_REINJECTORS)


def compact(messages: Transcript | Sequence[Message], *, force: bool = False, instructions: str | None = None,
            now: float | None = None, config: Config | None = None, summarizer: Any = None,
            **overrides: Any) -> Prepared:
    """One-shot, stateless form: prepare `messages` once in a memory-only session."""
    with Session.open(None, config=config, summarizer=summarizer, **overrides) as session:
        return session.prepare(messages, now=now, force=force, instructions=instructions)
