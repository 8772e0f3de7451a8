"""Session: the append-only log of a harness's transcript and the sticky surface built on it.

`prepare` is what a harness calls before every model call. It reads as its steps: sync the
transcript into the log (new, edited or rewound history), have the ledger read the new messages (the
status bar derives from them; the ledger folds them when something reads it), rebuild the view from the
log and the stored edits, plan the status bar, run the staged graph, publish the status, check the
invariants (session/outputcheck.py), and commit the log, the new edits, what the ledger folded and the
metadata in one transaction, so a crash leaves the previous consistent state.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import operator
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from ..core.clearing import HARNESS_STAGE, clearing_edits
from ..core.config import Config
from ..core.edits import Edit, Insert, apply_edits, breaks_sent_prefix, refers_to, removed_refs
from ..core.errors import (ArtifactNotFoundError, CommitConflictError, ContextOverflowError, SessionError,
                           StoreDamagedError)
from ..formats.base import Transcript
from ..graph.compose import StagedGraph
from ..graph.registry import check_plugin_options, reinjectors_for, stages_for
from ..ledger import Ledger
from ..core.model import Message, begins_with
from ..engine.pricing import CallStats, PromptCache, is_call_start, price_model
from ..engine.state import (PipelineState, Reinjector, SkipKind, Skipped, StageContext, StageInputs, StageReport,
                            StatusInputs, measured_size)
from ..status import PublisherState, event_to_json
from ..status.events import Event
from .statusbar import FIRST_EPOCH, StatusBar
from .locations import Location, open_store
from .metawrite import MetaWriter, held_value
from .epochs import EpochReader
from .outputcheck import InvariantError, OutputChecks, view_digest
from .integrity import reading_stored
from .report import Prepared, PrepareReport, add_notices, build_report, overflowed
from .sizing import usage_offset as usage_offset_of, view_sizes
from .memstore import MemoryStore
from .store import Store
from ..summarizers import resolve_summarizer
from ..summarizers.base import Summarizer
from ..core.tokens import TokenCounter
from ..core.calibration import Calibration, MeasurementLog, fit_points
from ..core.view import IncrementalRecovery, live_slice
from ..engine.protection import ProtectedIds
from worksurface.stages.autocompact import CompactionInputs
from worksurface.stages.snip import SnipRequests

if TYPE_CHECKING:
    from ..subagents.brief import Brief

log = logging.getLogger("worksurface")

NOTHING_NEW = "nothing new since the previous call"
# How long closing waits for the session's lock to save the ledger's last fold (a process holding the
# lock longer is using the session, and leaves the newer ledger itself).
CLOSE_LOCK_SECONDS = 2.0
# The generation a session object holds when it does not know the store's (a commit of its own failed,
# and may or may not have landed): never stored, so its next call reads the stored session first.
UNKNOWN_GENERATION = -1
# The metadata key of the usage a provider reported for the last view (`Session.record_usage`).
REPORTED_USAGE = "reported_usage"


def _as_messages(transcript: Transcript | Sequence[Message]) -> list[Message]:
    if isinstance(transcript, Transcript):
        return transcript.messages
    return list(transcript)


class Session:
    """A harness's session. Open with `Session.open(directory)` (or `None` for memory only)."""

    def __init__(self, store: Store, config: Config, summarizer: Summarizer | Any = None,
                 reinjectors: Sequence[Reinjector] | None = None, counter: TokenCounter | None = None) -> None:
        self.store = store
        self.config = config
        self.summarizer = resolve_summarizer(summarizer) or self._configured_summarizer(config)
        self.counter = counter if counter is not None else TokenCounter()
        # The shipped stages and reinjectors with the third-party ones the config brings (plugins).
        self.reinjectors = tuple(reinjectors) if reinjectors is not None else reinjectors_for(config)
        self._graph = StagedGraph.shared(stages_for(config), self.reinjectors)
        check_plugin_options(config, self._graph.stages, self.reinjectors)
        self._noted: set[str] = set()  # messages whose recovery cleaning the report already named
        self._measurements = MeasurementLog(self.counter)  # the transcript's usage, read once per message
        self.status_bar = StatusBar(config)
        with store.lock():
            self._load()

    def _load(self) -> None:
        """(Re)read the log, edits and ledger from the store: at open, and when another process
        committed since (its generation number moved on)."""
        store = self.store
        store.check()
        with reading_stored(store, "token cache"):
            self.counter.load_message_counts(store.token_cache())
        self._log: list[Message] = store.log_messages()
        self._log_source: list[Message] | None = None  # the recovered live list the log was last committed from
        # The view the last committed call started from, when the view it sent began with it (that
        # call's stages edited nothing and its status only appended): the next view begins with it too.
        self._view_base: list[Message] | None = None
        self._digests: list[str] = [m.digest for m in self._log]
        # Running token totals, so a call counts only its new messages: _log_tokens[i] is the tokens of
        # the log's first i messages; _view_tokens is (the cached view object, its tokens).
        self._log_tokens: list[int] = list(itertools.accumulate(map(self.counter.message, self._log), initial=0))
        self._view_tokens: tuple[list[Message], int] | None = None
        self._counted: tuple[list[Message], int] = ([], 0)  # the view counted last in this call, and its tokens
        self._checks = OutputChecks()  # the output views' invariants and digest
        self._edits: list[Edit] = store.edits()
        self._recovery = IncrementalRecovery()
        self._epochs = EpochReader()
        self._calls_seen: tuple[int, int] = (0, 0)  # (live messages read, model calls among them)
        self._protected = ProtectedIds()  # invariant 3's ids, searched only in what each call appended
        # The stages' memory between calls, one object per stage that declares one (Stage.memory).
        self._memories = tuple(s.memory() for s in self._graph.stages if s.memory is not None)
        self._cached: tuple[int, int, list[Message]] | None = None  # (log length, edit count, view)
        self._generation = store.get_meta("generation", 0)
        self._meta_held: tuple[int, dict[str, Any]] = (-1, {})  # see MetaWriter
        with reading_stored(store, "ledger"):
            self.ledger = Ledger.load(store.get_meta)
        self.status_bar = StatusBar(self.config)
        self.status_bar.tokens_override = store.get_meta("status_tokens_override")
        self.ledger.follow(self.status_bar.derived)  # one walk of the transcript: the bar reads it with the ledger
        with reading_stored(store, "log and edits"):
            self._verify_reopened()
        self._billing = PromptCache(price_model(self.config.pricing), self.counter)
        with reading_stored(store, "billing state"):
            self._billing.restore(store.get_meta("billing"), self._cached[2] if self._cached else None)

    def _verify_reopened(self) -> None:
        """A reopened session must rebuild exactly the view it last returned."""
        stored = self.store.get_meta("view_digest")
        if stored is None:
            return
        view = self.view()
        if view_digest(view) != stored:
            raise StoreDamagedError("the stored log and edits do not rebuild the last view (damaged, or written "
                                    "by another worksurface version)", store=self.store.location)
        self._cached = (len(self._log), len(self._edits), view)

    @staticmethod
    def _configured_summarizer(config: Config) -> Summarizer | None:
        """The summarizer the config names; None means the built-in structured one."""
        if config.autocompact.summarizer == "structured" and not config.autocompact.summarizer_options:
            return None
        from ..summarizers import get_summarizer
        summarizer: Summarizer = get_summarizer(config.autocompact.summarizer, **config.autocompact.summarizer_options)
        return summarizer

    @classmethod
    def open(cls, location: Location | Store | None = None, *, session_id: str | None = None,
             config: Config | None = None, summarizer: Summarizer | Any = None, agent: str | None = None,
             **overrides: Any) -> "Session":
        """Open or create the session at `location`: a directory (the session itself, or with
        `session_id` its subdirectory of that name), a `postgresql://` URL (`session_id` required: it
        names the session in the database), an open `Store`, or None for memory only. Config from
        `config`, else defaults, then `overrides`. `summarizer`: a Summarizer, a LangChain chat model, a
        "provider:model" string for LangChain's init_chat_model, or None for the configured one (the
        structured summarizer by default). `agent`: which agent the session serves ("main" when None,
        "subagent", or a sub-agent's type): the config's `agents` settings for it apply."""
        cfg = (config or Config()).with_overrides(**overrides).for_agent(agent)
        if isinstance(location, Store):
            store, counter = location, location.counter
        else:
            counter = TokenCounter()
            store = (MemoryStore(counter) if location is None
                     else open_store(location, session_id, counter, limits=cfg.store))
        try:
            return cls(store, cfg, summarizer, counter=counter)
        except BaseException:
            store.close()
            raise

    def fork(self, location: Location | None = None, *, session_id: str | None = None) -> "Session":
        """An independent child session from a snapshot of this one (log, edits, artifacts, ledger,
        status state), at a new `location` (as `open` takes it) or in memory. Its view at the fork point
        is this session's, byte for byte (a provider's prompt cache is shared); later changes on either
        side never reach the other (seed 003: a fork copies the decisions, not the mutable container)."""
        counter = TokenCounter()
        child: Store = (MemoryStore(counter) if location is None
                        else open_store(location, session_id, counter, limits=self.config.store))
        try:
            self._save_ledger()  # the child starts from the store: it holds the ledger of what was read
            self.store.copy_to(child)
            return Session(child, self.config, self.summarizer, self.reinjectors, counter)
        except BaseException:
            child.close()
            raise

    def brief(self, task: str, budget_tokens: int = 3000) -> "Brief":
        """A briefing for a fresh sub-agent on `task`, selected from this session's ledger and packed
        into `budget_tokens` (see worksurface.subagents.brief)."""
        from ..subagents.brief import build_brief
        return build_brief(self.ledger.upto(), task, budget_tokens, self.counter)

    def close(self) -> None:
        """Save what the ledger read and has not folded yet (a stored session is then current for the
        next process and the reports), then release the store."""
        try:
            if self.store.persistent:
                # Another process holding the session is writing it: its ledger will be the newer one.
                self._save_ledger(lock_timeout=CLOSE_LOCK_SECONDS)
        except SessionError as exc:
            # Nothing is lost: the store keeps the ledger of its last save, and the next process folds
            # the rest from the transcript again.
            log.warning("%s: the ledger was not brought up to date at close (%s); the next call folds it again",
                        self.store.location, exc)
        finally:
            self.store.close()

    def _save_ledger(self, lock_timeout: float = 30.0) -> None:
        """Fold what the ledger read and write it, so the store's ledger is this session's (at close,
        and before a fork copies the store). Only the ledger's keys and the generation are written."""
        if not (self.ledger.pending or self.ledger.dirty):
            return
        with self.store.lock(timeout=lock_timeout):
            # Another process committed since: its ledger is the store's, and ours would overwrite it.
            if self.store.get_meta("generation", 0) != self._generation:
                return
            self.ledger.settle()
            held = self._meta_held
            with self._committing(), self.store.transaction():
                save = self.ledger.write(self.store.set_meta)
                self._bump_generation()
            if held[0] == self._generation - 1:
                self._meta_held = (self._generation, held[1])  # only ledger keys were written
            if save is not None:
                self.ledger.saved(save)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the main call --------------------------------------------------------------------------

    def prepare(self, transcript: Transcript | Sequence[Message], usage: int | tuple[str, int] | None = None,
                now: float | None = None, *, force: bool = False, instructions: str | None = None) -> Prepared:
        """Build the view for the next model call. `usage` is the provider's reported input tokens for
        the previous call (an int, anchored at the last message sent, or `(message_id, tokens)`; None:
        the figure `record_usage` kept for the last view, if any)."""
        started = time.perf_counter()
        now = time.time() if now is None else now
        with self.store.lock():
            if self.store.get_meta("generation", 0) != self._generation:
                self._load()  # another process (or Session object) committed since we last looked
            if usage is None:
                usage = self._reported_usage()
            full = _as_messages(transcript)
            recovered = self._recovery(full)  # incremental live_slice, close_interrupted, clean_recovered
            live = recovered.messages
            keep, rewound = self._sync(live)
            self.status_bar.exclude_recovered(recovered, self._recovery.start)
            # The ledger sees for itself where the transcript changed: a rewind of the log that only
            # recovery's repairs made (the transcript itself extended) keeps what it folded. Read before
            # a repeated call returns: a reopened session's ledger may be behind its log.
            self.ledger.update(full, queued=_queued(transcript),
                               extras=transcript.extras if isinstance(transcript, Transcript) else (),
                               mark=self._recovery.transcript_mark,
                               same=(self._recovery.transcript_previous, self._recovery.transcript_same))
            repeat = self._repeat(live, keep, usage, force)
            if repeat is not None:
                return repeat
            view, base = self._current_view(live, keep)
            raw_tokens = self._log_tokens[keep] + self.counter.messages(live[keep:])
            # The harness's own clearings (core/clearing.py) in the new messages: sticky edits, so the
            # view, its size and the stages follow what the harness sends; the log keeps the originals.
            harness = clearing_edits(live, keep if self._log and not rewound else 0)
            if harness:
                view, base = apply_edits(view, harness), None
                counted = self.counter.messages(view)
                self._counted = (view, counted)
            else:
                counted = self._count_view(view, keep, live)
            usage_offset, usage_notices = usage_offset_of(view, counted, usage, self.store.get_meta("last_view_tail")
                                                          if isinstance(usage, int) else None, self.counter)
            anchored = usage is not None and not usage_notices
            offset = usage_offset
            # The calibration reads every measured usage in the transcript (its earliest requests show
            # the fixed part best); it only sizes a compaction, and none can happen on a call that is
            # not forced and is under the threshold.
            may_compact = force or counted + offset > self.config.compaction_floor
            calibration = self._calibration(full, usage_offset) if anchored and may_compact else None
            # The publisher state this object committed last is what the store holds (no decoding).
            publisher = held_value(self._meta_held, self._generation, "status_publisher")
            status_inputs, planned = self.status_bar.begin(
                live, keep, self.store.get_meta("status_events", []),
                publisher if publisher is not None else self.store.get_meta("status_publisher"), now,
                history=full[:self._recovery.start])
            # The status published after the graph counts against every trigger, so a view that the
            # stages leave under the threshold is still under it with its status.
            offset += self.counter.messages(planned[1].messages)
            ctx = self._context(now, force, instructions, view, live, keep, transcript, status_inputs, offset,
                                raw_tokens, self._view_base if base is not None else None)
            ctx = dataclasses.replace(ctx, calibration=calibration, usage_offset=usage_offset)
            final = self._run_graph(view, counted, offset, ctx)
            new_edits: list[Edit] = [*harness, *final["edits"]]
            out_view = final["view"]
            status_edits, new_status, status_report = self.status_bar.finish(
                status_inputs, planned, final.get("status_update"), breaks_sent_prefix(new_edits, live[keep:]), out_view, now)
            if status_edits:
                out_view = apply_edits(out_view, status_edits)
                new_edits += status_edits
            # Whether the view sent begins with the one committed last (no stage edited, and the status
            # only appended): then what remembers that view (the bill, the digest, the checks) reads only
            # what follows it. One identity pass here instead of one in each of them.
            grown = final["view"] is view and (_appends_only(status_edits, view) or begins_with(out_view, view))
            sent_base = base if grown else None
            if new_edits or rewound:
                # an unedited view: the previous one plus new
                self._checks.check(live, out_view, new_edits, bool(rewound), base=sent_base)
            report = build_report(final, self._graph.names, self._known_tokens(final["view"]), raw_tokens,
                                  counted + offset, started, rewound)
            report.sizes = view_sizes(ctx, counted, report.tokens_after, report.boundary is not None, anchored)
            report.notices += usage_notices
            report.status = status_report
            billed = self._billing.send(out_view, now, tokens=self._known_tokens(out_view, extends=grown),
                                        extends=sent_base)
            report.cost, report.cost_total = billed.cost, billed.total
            recovery = recovered.notes(self._noted)
            report.notices += recovery
            self._noted.update(mid for mid, _ in recovered.removed)
            for note in recovery:      # routine repairs (empty text, orphan thinking): the report has them
                log.info("%s", note)
            add_notices(report, ctx, self.config, self.store.get_meta, counted)
            size = measured_size(ctx, report.tokens_after, bool(report.boundary), counted)
            over = overflowed(report, size, self.config)
            self._commit(live, keep, new_edits, out_view, now, report, new_status, usage, over, size, sent_base)
            self._view_base = view if grown else None
            # The caller's own list: a harness that appends to the view it got must not change the one
            # the session goes on from (the next call would show the appended messages twice).
            prepared = Prepared(list(out_view), report, list(final["cache_edits"]))
            if over:
                raise ContextOverflowError("compaction could not bring the view under the threshold",
                                           tokens=size, threshold=self.config.threshold, prepared=prepared)
            return prepared

    def compact(self, transcript: Transcript | Sequence[Message], instructions: str | None = None,
                now: float | None = None) -> Prepared:
        """A manual compaction (what `/compact` does): summarize now, whatever the size."""
        return self.prepare(transcript, now=now, force=True, instructions=instructions)

    def snip(self, ids: Iterable[str], reason: str) -> None:
        """Ask the next `prepare` to remove these messages (with their tool pairs) and leave a marker."""
        with self.store.lock(), self._committing(), self.store.transaction():
            pending = self.store.get_meta("pending_snips", [])
            pending.append([list(ids), reason])
            self.store.set_meta("pending_snips", pending)
            self._bump_generation()

    def emit(self, event: Event) -> None:
        """Record a harness-supplied status fact (cwd, test result, budget, ...) for the status bar."""
        event_to_json(event)  # validate before storing
        with self.store.lock(), self._committing(), self.store.transaction():
            events = self.store.get_meta("status_events", [])
            events.append(event_to_json(event))
            self.store.set_meta("status_events", events)
            self.store.set_meta("inputs_changed", True)
            self._bump_generation()

    # --- fetching back what was removed ---------------------------------------------------------

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

    def view(self) -> list[Message]:
        """The view as of the last `prepare`, rebuilt from the log and the edits (no new decisions)."""
        return apply_edits(live_slice(self._log), self._edits)

    # --- the steps of prepare -------------------------------------------------------------------

    def _sync(self, live: Sequence[Message]) -> tuple[int, int]:
        """(messages of the log still valid, messages rewound). A rewind drops the edits about the
        removed messages and restarts the status bar."""
        n = min(len(self._log), len(live))
        # The log holds the output recovery gave the call committed last: the messages recovery says it
        # gave again, as the same objects, need no comparing (a long session's log is most of it).
        recovery = self._recovery
        keep = min(n, recovery.unchanged) if recovery.previous is self._log_source is not None else 0
        if all(map(operator.is_, self._log[keep:n], live[keep:n])):
            keep = n  # the same message objects as the previous call (C speed, no digest compared)
        while keep < n and self._digests[keep] == live[keep].digest:
            keep += 1
        rewound = len(self._log) - keep
        if rewound:
            removed = removed_refs(self._log[keep:])
            # The status restarts, and the harness's clearings are derived again from what is left.
            self._edits = [e for e in self._edits if not refers_to(e.refs, removed)
                           and e.stage not in ("status", HARNESS_STAGE)]
            self._cached = None
            self._epochs.forget_boundaries()
            self.status_bar.reset()
        return keep, rewound

    def _repeat(self, live: Sequence[Message], keep: int, usage: int | tuple[str, int] | None,
                force: bool) -> Prepared | None:
        """The previous view again when nothing changed since the previous call (a harness retrying
        the same request): idempotent, and no stage fires twice on the same input."""
        cached = self._cached
        if (force or cached is None or keep != len(self._log) or keep != len(live)
                or self.store.get_meta("pending_snips") or self.store.get_meta("inputs_changed")
                or self.store.get_meta("last_usage") != _usage_json(usage)
                or cached[1] != len(self._edits)):
            return None
        view = cached[2]
        tokens = self.counter.messages(view)
        stages = [StageReport(name, tokens, tokens, outcome=Skipped(SkipKind.NOTHING_NEW, NOTHING_NEW))
                  for name in self._graph.names]
        return Prepared(list(view), PrepareReport(tokens, tokens, tokens, stages), [])

    def _count_view(self, view: list[Message], keep: int, live: list[Message]) -> int:
        """Tokens of `view`: the previous view's running total plus the new messages when `view`
        extends it (see `_current_view`), else a count of every message (memoized per message)."""
        cached, known = self._cached, self._view_tokens
        if (cached is not None and known is not None and known[0] is cached[2] and cached[0] == keep
                and cached[1] == len(self._edits) and keep == len(self._log)):
            tokens = known[1] + self.counter.messages(live[keep:])
        else:
            tokens = self.counter.messages(view)
        self._counted = (view, tokens)
        return tokens

    def _current_view(self, live: list[Message], keep: int) -> tuple[list[Message], list[Message] | None]:
        """Stored edits applied to the live transcript, and the view committed last when the result
        begins with it (None: rebuilt); incremental when only messages were appended (edits only ever
        refer to messages that existed when they were made)."""
        cached = self._cached
        if cached is not None and cached[0] == keep and cached[1] == len(self._edits) and keep == len(self._log):
            return cached[2] + live[keep:], cached[2]
        return apply_edits(live, self._edits), None

    def _calibration(self, full: Sequence[Message], usage_offset: int) -> Calibration:
        """The calibration of the transcript's usage (read incrementally), or without any recorded
        usage the constant offset the harness's figure shows (ratio 1)."""
        fitted = fit_points(self._measurements.update(full))
        return fitted.calibration if fitted is not None else Calibration(max(0, usage_offset), 1.0, 1)

    def _context(self, now: float, force: bool, instructions: str | None, view: list[Message],
                 live: list[Message], keep: int, transcript: Transcript | Sequence[Message],
                 status: StatusInputs, offset: int, raw_tokens: int,
                 view_base: list[Message] | None = None) -> StageContext:
        store = self.store
        last = store.get_meta("last_prepare_at")
        snips = [(tuple(ids), reason) for ids, reason in store.get_meta("pending_snips", [])]
        failures = store.get_meta("consecutive_failures", 0)
        if failures >= self.config.autocompact.max_consecutive_failures:
            # The breaker half-opens once the view has grown enough for another attempt to differ.
            if self.counter.messages(view) + offset >= store.get_meta("breaker_retry_tokens", 0):
                failures = 0
        epoch = max(store.get_meta("epoch", FIRST_EPOCH), self._epochs.live_epoch(live, keep),
                    self._epochs.boundary_epoch(_as_messages(transcript)))
        inputs = StageInputs(CompactionInputs(instructions, self.summarizer, failures), SnipRequests(snips),
                             status, *self._memories)
        return StageContext(
            config=self.config, counter=self.counter, artifacts=store, now=now,
            idle_seconds=None if last is None else max(0.0, now - last), forced=force, epoch=epoch,
            protected=self._protected(view, extends=view_base), token_offset=offset, transcript=live,
            queued_inputs=_queued(transcript), ledger=self.ledger,
            # New since the previous call, so never sent; on a session's first call the transcript's
            # own history was sent by the harness already (the stage then judges from its shape).
            unsent_ids=frozenset(m.id for m in live[keep:]) if self._log else None,
            call_stats=self._call_stats(live, keep, raw_tokens), inputs=inputs)

    def _call_stats(self, live: list[Message], keep: int, tokens: int) -> CallStats:
        """`pricing.stats_from_transcript(live)` (whose size is `tokens`), counting call starts only in
        the new messages."""
        seen, calls = self._calls_seen if self._calls_seen[0] <= keep else (0, 0)
        calls += sum(1 for i in range(seen, len(live)) if is_call_start(live, i))
        self._calls_seen = (len(live), calls)
        return CallStats(calls, tokens / calls if calls else float(tokens))

    def _run_graph(self, view: list[Message], counted: int, offset: int, ctx: StageContext) -> PipelineState:
        start: PipelineState = {"view": view, "tokens": counted + offset, "edits": [], "reports": [], "cache_edits": [],
                                "compacted": False, "measured_over": counted}
        # Most calls edit nothing: the graph's path is walked directly, compile-run only when a stage acts.
        return self._graph.run(start, ctx)

    def _known_tokens(self, view: list[Message], extends: bool = False) -> int:
        """Tokens of a view: from the running total when it starts with the view counted last in this
        call (the same message objects: nothing fired, or only messages were added at its end). The
        view becomes the one counted last: the graph's output, the view sent with its status and the
        view committed are mostly one another's extensions, each checked once. `extends`: the caller
        knows `view` begins with the view counted last."""
        base, tokens = self._counted
        if extends or begins_with(view, base):
            tokens += self.counter.messages(view[len(base):])
        else:
            tokens = self.counter.messages(view)
        self._counted = (view, tokens)
        return tokens

    def _commit(self, live: list[Message], keep: int, new_edits: list[Edit], view: list[Message],
                now: float, report: PrepareReport, status: PublisherState,
                usage: int | tuple[str, int] | None, overflowed: bool, size: int,
                base: list[Message] | None = None) -> None:
        """Everything this call decided, in one transaction: a crash leaves the previous state.
        `base`: the view committed before, when `view` begins with it."""
        store = self.store
        meta = MetaWriter(store, self._meta_held, self._generation)
        expected = self._generation
        with self._committing(), store.transaction():
            meta.set("status_publisher", status, PublisherState.to_json)
            meta.set("status_tokens_override", self.status_bar.tokens_override)
            if keep < len(self._log):
                store.truncate_log(keep)
                store.drop_edits(HARNESS_STAGE)  # derived again from the transcript (see _sync)
            if self.status_bar.reset_pending:  # cleared once committed: a failed commit is retried whole
                store.drop_edits("status")
            if keep < len(live):
                store.append_messages(live[keep:])
            if new_edits:
                store.add_edits(new_edits)
            store.set_meta("last_prepare_at", now)
            meta.set("last_usage", _usage_json(usage))
            meta.set("pending_snips", [])
            meta.set("inputs_changed", False)
            if report.boundary:
                store.set_meta("epoch", report.boundary["epoch"])
            if overflowed or (report.boundary or {}).get("fallback"):
                failures = store.get_meta("consecutive_failures", 0) + 1
                store.set_meta("consecutive_failures", failures)
                # Another attempt is worth it once the view has grown by a tenth of the window.
                store.set_meta("breaker_retry_tokens", size + self.config.window // 10)
            elif size <= self.config.threshold:
                meta.set("consecutive_failures", 0)
            # Only the parts of the ledger this call changed: per-call work follows what is new.
            ledger_save = self.ledger.write(store.set_meta)
            store.set_meta("last_view_tail", view[-1].id if view else None)
            store.set_meta("view_digest", self._checks.digest(view, extends=base))
            store.update_token_cache(self.counter.take_unsaved())
            store.set_meta("billing", self._billing.state_json())
            self._bump_generation(expected)
        self._meta_held = meta.committed(self._generation)
        self.status_bar.reset_pending = False
        if ledger_save is not None:
            self.ledger.saved(ledger_save)
        # In place: the log is this object's own list (the store's is written above), and a copy of
        # the whole log on every call would cost what the session holds, not what is new.
        del self._log[keep:], self._digests[keep:]
        self._log += live[keep:]
        self._digests += [m.digest for m in live[keep:]]
        self._log_source = live
        del self._log_tokens[keep + 1:]
        self._log_tokens.extend(itertools.accumulate(map(self.counter.message, live[keep:]),
                                                     initial=self._log_tokens[keep]))
        del self._log_tokens[keep + 1]  # accumulate repeated the starting total
        self._edits = self._edits + list(new_edits)
        self._cached = (len(self._log), len(self._edits), view)
        self._view_tokens = (view, self._known_tokens(view))

    def _bump_generation(self, expected: int | None = None) -> None:
        """The next generation, inside the commit's transaction; with `expected`, only on that one
        (the version this object's decisions were made on), else `CommitConflictError`."""
        stored = self.store.get_meta("generation", 0)
        if expected is not None and stored != expected:
            raise CommitConflictError(f"{self.store.location}: the session moved on to generation {stored} while "
                                      f"this call decided on generation {expected}; nothing of it was written")
        self._generation = stored + 1
        self.store.set_meta("generation", self._generation)

    @contextmanager
    def _committing(self) -> Iterator[None]:
        """Around a commit of this object's: when it fails, whether it landed is not known here (its
        answer may have been lost), so the next call reads the stored session again before anything
        else, and either finds this commit there or decides it again."""
        try:
            yield
        except BaseException:
            self._generation = UNKNOWN_GENERATION
            raise

    def record_usage(self, input_tokens: int | None) -> None:
        """Keep in the store the input tokens the provider reported for the call the last view was sent
        on: the next `prepare` of any Session object on this store that is passed no usage anchors its
        size on it, so gateway replicas taking alternate calls size a conversation as one would. A
        later view (another call's commit) makes it stale; None forgets it."""
        if input_tokens is not None and (not isinstance(input_tokens, int) or input_tokens < 0):
            raise ValueError(f"record_usage: input_tokens must be a non-negative int or None, not {input_tokens!r}")
        with self.store.lock(), self.store.transaction():
            self.store.set_meta(REPORTED_USAGE, {"view": self.store.get_meta("view_digest"), "tokens": input_tokens})

    def _reported_usage(self) -> int | None:
        """The usage recorded for the view the store holds (`record_usage`), if any."""
        kept = self.store.get_meta(REPORTED_USAGE)
        if not isinstance(kept, dict) or kept.get("view") != self.store.get_meta("view_digest"):
            return None
        tokens = kept.get("tokens")
        return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def _appends_only(edits: Sequence[Edit], view: Sequence[Message]) -> bool:
    """Whether applying `edits` to `view` keeps all of `view` at its start: inserts after its last
    message (found first, searching from the end, whatever the inserts before added after it) or at the
    end. Decided from the edits, without a pass over the view."""
    last = view[-1].id if view else None
    return all(isinstance(e, Insert) and e.after in (None, last) for e in edits)


def _queued(transcript: Transcript | Sequence[Message]) -> tuple[tuple[str | None, str], ...]:
    return tuple(transcript.queued_inputs) if isinstance(transcript, Transcript) else ()


def _usage_json(usage: int | tuple[str, int] | None) -> Any:
    return list(usage) if isinstance(usage, tuple) else usage


def compact(messages: Transcript | Sequence[Message], *, force: bool = False, instructions: str | None = None,
            now: float | None = None, config: Config | None = None, summarizer: Summarizer | Any = None,
            **overrides: Any) -> Prepared:
    """One-shot, stateless form: prepare `messages` once in a memory-only session."""
    with Session.open(None, config=config, summarizer=summarizer, **overrides) as session:
        return session.prepare(messages, now=now, force=force, instructions=instructions)


__all__ = ["FIRST_EPOCH", "InvariantError", "Prepared", "PrepareReport", "Session", "compact", "view_digest"]
