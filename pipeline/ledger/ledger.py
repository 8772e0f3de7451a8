"""The surface ledger: the working state as typed records, kept in the session store beside the log and
the edits, so a compaction is a state migration instead of a summary of the previous summary.

Each message is folded in once, the first time something reads the ledger after the message reached a
`prepare` (a compaction, the reinjectors, a report, closing a stored session): a call on which no stage
fires does not pay for facts nobody reads. The fact extractors run over the messages new since the
last fold plus the few earlier ones whose tool calls still wait for a result (so a call and its result
are read together), and their records merge into the ledger by key; how the messages were batched
does not change the result. A record leaves only when a newer one supersedes it (a file's later state, a todo
list's new version, an error a later success resolved), never because a compaction happened. The
summary, the reinjectors and the status baseline render from it; none of them re-reads worksurface's
own earlier output, which the fold skips.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Protocol, Sequence

from .. import facts
from ..facts import Identifiers
from ..facts.errors import RESOLUTION_WINDOW, ErrorReader
from ..facts.filetracker import FileTracker
from ..facts.reading import MessageProgress, ProgressReader, ResultFacts
from ..facts.tools import attachment_announcements
from ..facts.constraints import attachment_constraints
from ..facts.meta import message_cwd
from ..facts import subagents as subagent_facts
from ..core.model import Message, Origin
from .kinds import BY_NAME, KINDS, Window
from .records import LedgerView, Records, entry_source, entry_text, file_records
from .storage import LedgerStorage

# A call still waiting for its result keeps its message in the fold window; past this many messages
# the call is taken as abandoned (a harness that never answers it), so the window stays bounded.
MAX_CARRY_MESSAGES = 24
# Identifier lists keep the newest values; enough for a long session's branches, commits and the
# verification commands, without growing with every command ever run.
IDENTIFIER_CAPS = {"branches": 12, "worktrees": 12, "commits": 40, "issues": 40, "paths": 120,
                   "commands": 60, "test_counts": 12, "urls": 40}
DEFAULT_IDENTIFIER_CAP = 60
# An unresolved error keeps the errors window open back to it, up to this many messages (a retry
# or fix is looked for RESOLUTION_WINDOW calls ahead, two messages a call).
MAX_ERROR_WINDOW_MESSAGES = 2 * RESOLUTION_WINDOW + 2


# A transcript read and not folded yet: its messages, queued user input and non-message records.
_Unfolded = tuple[Sequence[Message], Sequence[tuple[str | None, str]], Sequence[tuple[str | None, Any]]]


class Follower(Protocol):
    """A fold kept above the ledger's floor (the status bar's) that reads the messages the ledger reads,
    each once and in order, on the ledger's walk: the transcript is walked once per call, by the ledger.
    With each message it gets what the ledger's progress reader read of it (test runs, todo lists,
    tracker changes, git state, tasks), so it never parses them itself. `seen` is how many transcript
    messages it has read; the ledger resets it when history diverges."""

    seen: int

    def reset(self) -> None: ...
    def observe(self, message: Message, index: int, progress: MessageProgress) -> None: ...


class Ledger(LedgerStorage):
    """The session's working state. `update(transcript)` before each graph run; `upto(index)` for the
    state as of a cut (what a summary of the messages before it should say)."""

    def __init__(self) -> None:
        self._records = Records()
        self.folded = 0           # messages of the transcript folded so far
        self.last_digest: str | None = None
        self.carry_from = 0       # where the next fold window starts (open calls)
        self.files = FileTracker()
        self.errors_from = 0      # where the errors window starts: the oldest error still unresolved
        self.extras_seen = 0      # the transcript's non-message records folded so far
        self.dirty = False        # changed since the store last saved it
        self._positions: dict[str, int] = {}  # message id -> index in the transcript (not persisted)
        # Marks of what the store holds (see `save`), and of the tracked files when the file records
        # was last rendered from them.
        self._saved: tuple[dict[str, Any], dict[str, tuple[Any, ...]]] = ({}, {})
        self._files_rendered: dict[str, tuple[Any, ...]] | None = None
        self._json_memo: dict[int, tuple[Any, str]] = {}  # id(record) -> (record, its JSON text)
        # The errors window's searches, carried between calls so each later call is read once (not persisted).
        self._error_reader = ErrorReader()
        # Each message's results read once, when the message arrives (not persisted: a loaded ledger
        # reads the transcript again): the followers get its facts, and the fold merges them.
        self.progress = ProgressReader()
        self._followers: list[Follower] = []
        self._requests_read: tuple[int, tuple[str, ...]] = (-1, ())  # (requests version, their texts)
        # The newest transcript read and not folded yet, with its queued input and extras (see `settle`),
        # and the messages of the newest transcript read (where the followers are).
        self._pending: _Unfolded | None = None
        self._read: list[Message] = []
        self._read_mark: object = None  # what the caller named the update that read `_read` by

    @classmethod
    def over(cls, messages: Sequence[Message], queued: Sequence[tuple[str | None, str]] = ()) -> "Ledger":
        """A ledger folded once over `messages`: the facts of a list of messages when there is no
        session (the one-shot path reads the same records a session's ledger holds)."""
        ledger = cls()
        ledger.update(messages, queued=queued)
        ledger.settle()
        return ledger

    # --- folding ----------------------------------------------------------------------------------

    def update(self, transcript: Sequence[Message], *, queued: Sequence[tuple[str | None, str]] = (),
               extras: Sequence[tuple[str | None, Any]] = (), mark: object = None,
               same: tuple[object, int] | None = None) -> None:
        """Read the messages not seen yet: the followers (the status bar) read them now, the fold waits
        until something reads the ledger (`settle`). A transcript that no longer extends what was read
        (rewound or edited history) starts over. `extras` are the transcript's non-message records
        (`Transcript.extras`): the harness's attachment records among them announce tools, MCP servers
        and agent types. `mark`: what the caller names this update by; `same`: (the mark of an
        earlier update, how many leading messages of `transcript` are the very objects it was given):
        when that update is the last one, those messages are not compared again (a long session's
        transcript is mostly them)."""
        n = len(transcript)
        known = same[1] if same is not None and same[0] is not None and same[0] is self._read_mark else 0
        changed = self._first_change(transcript, known)
        # What this object read shows any change; a ledger loaded from a store has read nothing yet, and
        # its fold's last message is checked instead.
        if changed < min(self.folded, len(self._read)) or _diverged(transcript, self.folded, self.last_digest):
            followers = self._followers
            self.__init__()  # type: ignore[misc]
            self._followers = followers
            for f in followers:
                f.reset()
        elif changed < len(self._read):
            self.progress.reset()  # only messages not folded yet changed: the fold is still valid
            for f in self._followers:
                f.reset()
        self._feed(transcript, queued)
        self._read = list(transcript)  # a copy: the caller may append to its list before the fold
        self._read_mark = mark
        if n > self.folded or len(extras) > self.extras_seen:
            self._pending = (self._read, tuple(queued), tuple(extras))

    def _first_change(self, transcript: Sequence[Message], known: int = 0) -> int:
        """Where `transcript` first differs from the messages read before (the shorter one's length when
        one extends the other): the same objects are checked at C speed, other objects by digest. A
        history edited anywhere is seen, not only at its end. `known`: leading messages the caller
        knows are the very objects read."""
        read = self._read
        n = min(len(read), len(transcript))
        i = min(known, n)
        if all(map(operator.is_, read[i:n], transcript[i:n])):
            return n
        while i < n and (read[i] is transcript[i] or read[i].digest == transcript[i].digest):
            i += 1
        return i

    def settle(self) -> None:
        """Fold what `update` read since the last fold, in one window. Every reader of the ledger's
        records calls this first: the records are only needed when something reads them (a compaction,
        the reinjectors, a report), and the fold does not depend on how the messages were batched, so a
        call that only reads (no stage fires) does not pay for it."""
        if self._pending is None:
            return
        transcript, queued, extras = self._pending
        self._pending = None
        n = len(transcript)
        if len(self._positions) < min(self.folded, n):
            self._positions = {m.id: i for i, m in enumerate(transcript[: self.folded])}
        if self.folded >= n:
            self._fold_extras(extras)
            return
        for i in range(self.folded, n):
            self._positions.setdefault(transcript[i].id, i)
        self._fold_extras(extras)
        start = min(self.carry_from, self.folded)
        folded = self._fold(transcript[start:], start, queued, self.folded)
        # Every new message is read; of the older ones, only back to the oldest error still open
        # (bounded), so a first fold of a whole transcript misses no error.
        reread_from = max(min(self.errors_from, start), n - MAX_ERROR_WINDOW_MESSAGES)
        self._fold_errors(transcript, min(start, reread_from), n, folded if reread_from >= start else None)
        self.folded, self.last_digest = n, transcript[-1].digest
        self.carry_from = _open_call_start(transcript, start, n)
        self.dirty = True

    @property
    def records(self) -> Records:
        """Every record folded, once what was read is folded."""
        self.settle()
        return self._records

    @property
    def count(self) -> int:
        """Messages of the transcript folded, once what was read is folded."""
        self.settle()
        return self.folded

    @property
    def pending(self) -> bool:
        """Messages (or extras) read and not folded yet."""
        return self._pending is not None

    def follow(self, follower: Follower) -> None:
        """Have `follower` read every message this ledger reads, from the first (it catches up on the
        next `update` with what was folded before, e.g. by another process)."""
        self._followers.append(follower)

    def _feed(self, transcript: Sequence[Message], queued: Sequence[tuple[str | None, str]]) -> None:
        progress = self.progress
        if progress.seen > len(transcript):
            progress.reset()
        # Queued input matters to the reader only as task notifications (most sessions queue none).
        notices = [q for q in queued if subagent_facts.NOTIFICATION_TAG in q[1]]
        placeless = [q for q in notices if q[0] is None]
        for i in range(progress.seen, len(transcript)):
            m = transcript[i]
            progress.read(m, i, [q for q in notices if q[0] == m.id] + placeless if notices else ())
        for f in self._followers:
            if f.seen > len(transcript):
                f.reset()
            for i in range(f.seen, len(transcript)):
                f.observe(transcript[i], i, progress.at(i))
            f.seen = len(transcript)

    def _fold_extras(self, extras: Sequence[tuple[str | None, Any]]) -> None:
        """Announcements and hook-context rules in the harness's attachment records, each record once (they
        only grow)."""
        if len(extras) <= self.extras_seen:
            return
        new = [(self._positions.get(anchor, 0) if anchor else 0, record)
               for anchor, record in extras[self.extras_seen:]]
        announcements = BY_NAME["announcements"]
        for a in attachment_announcements(new):
            if announcements.put(self._records.kind("announcements"), a):
                self._records.changed("announcements")
        constraints = BY_NAME["constraints"]  # a hook's context, attached by the harness (Claude Code 2.1.2xx)
        for c in attachment_constraints(new):
            if constraints.put(self._records.kind("constraints"), c):
                self._records.changed("constraints")
        self.extras_seen = len(extras)
        self.dirty = True

    def _fold_errors(self, transcript: Sequence[Message], start: int, end: int,
                     window: tuple[list[int], list[Message]] | None = None) -> None:
        """Errors and their resolutions over the window from the oldest unresolved error: a fix or a
        retry that comes many calls later resolves it exactly as a one-shot reading would. `window`:
        the fold's conversation messages and their indices, when the window is the fold's (its calls
        are then read once)."""
        if window is None:
            kept = [(i, m) for i, m in enumerate(transcript[start:end], start) if m.origin is Origin.CONVERSATION]
            window = [i for i, _ in kept], [m for _, m in kept]
        index, messages = window
        called_at = {rec.call.id: index[rec.index] for rec in facts.tool_calls(messages)}
        errors = self._records.kind("errors")
        for e in self._error_reader.read(messages):
            e = dataclasses.replace(e, index=index[e.index])
            if errors.get(e.call_id) != e:  # re-read every call while open: store only what changed
                errors[e.call_id] = e
                self._records.changed("errors")
        # Only the window's calls can hold the window open: read those, not every error ever seen.
        unresolved = [at for call_id, at in called_at.items()
                      if (err := errors.get(call_id)) is not None and not err.resolved]
        self.errors_from = min(unresolved, default=end)

    def _fold(self, window: Sequence[Message], base: int, queued: Sequence[tuple[str | None, str]],
              new_from: int) -> tuple[list[int], list[Message]]:
        """Merge the records of `window` (from transcript index `base`); returns its conversation
        messages and their indices."""
        r = self._records
        self._fold_summaries(window, base)
        keep = [(base + i, m) for i, m in enumerate(window) if m.origin is Origin.CONVERSATION]
        index = [g for g, _ in keep]
        messages = [m for _, m in keep]
        if not keep:
            return index, messages

        def at(i: int) -> int:
            return index[i] if 0 <= i < len(index) else i

        # What the user said in earlier windows (searched only when a call's source must be one the user named).
        read = Window(messages, queued, self._request_texts(), facts.tool_calls(messages))
        progress = self.progress.between(base, base + len(window))
        for kind in KINDS:
            if kind.extract is not None:
                r.replace(kind.name, *kind.fold(r.kind(kind.name), read, at))
            elif kind.from_result is not None:
                records = r.kind(kind.name)
                if sum(kind.put(records, x) for f in progress for x in kind.from_result(f)):
                    r.changed(kind.name)
        self.files.feed(messages, index, new_from)
        # Rendering every file's facts reads every line held; only when a tracked file changed.
        marks = self.files.file_marks()
        if marks != self._files_rendered:
            r.replace("files", file_records(self.files.facts()))
            self._files_rendered = marks
        tasks = self.progress.tasks  # folded as each message arrived
        if tasks != r.kind("subagents"):
            r.replace("subagents", dict(tasks))
        self._count(messages, index, new_from)
        self._fold_singletons(messages, index, progress)
        self._merge_identifiers(facts.identifiers(messages, runs=[f.test for f in progress if f.test is not None]))
        return index, messages

    def _fold_summaries(self, window: Sequence[Message], base: int) -> None:
        """Earlier summaries the window holds: worksurface's own standing for history this transcript
        does not have, and another harness's (Claude Code's compaction summary)."""
        r = self._records
        for i, m in enumerate(window):
            if m.origin is Origin.CONVERSATION:
                r.conversation_seen = max(r.conversation_seen, base + i + 1)
                if m.meta.get("is_compact_summary"):
                    r.earlier[m.id] = m.text.strip()
            elif m.origin is Origin.SUMMARY and not any(
                    w.origin is Origin.CONVERSATION for w in window[:i]) and r.conversation_seen <= base:
                r.own_summaries[m.id] = m.text  # its history is not in this transcript: carry what it says

    def _count(self, messages: Sequence[Message], index: Sequence[int], new_from: int) -> None:
        """Messages per working directory and calls per tool, each new message counted once."""
        r = self._records
        for g_index, m in zip(index, messages):
            if g_index >= new_from:
                where = message_cwd(m)
                if where:
                    r.cwds[where] = r.cwds.get(where, 0) + 1
                for call in m.tool_calls:
                    r.tools[call.name] = r.tools.get(call.name, 0) + 1

    def _fold_singletons(self, messages: Sequence[Message], index: Sequence[int],
                         progress: Sequence[ResultFacts]) -> None:
        """The MCP servers seen, the newest todo list, the plan mode."""
        r = self._records
        for name in facts.mcp_servers(messages):
            r.mcp[name] = max(r.mcp.get(name, -1), index[-1])
        todo = next((f.todo for f in reversed(progress) if f.todo is not None), None)
        if todo is not None and (r.todo is None or todo.index >= r.todo.index):
            r.todo = todo
        plan = facts.plan_mode(messages)
        if plan.message_id is not None or plan.active or plan.plan:
            plan_at = self._positions.get(plan.message_id) if plan.message_id else None
            r.plan, r.plan_index = plan, plan_at if plan_at is not None else index[-1]

    def _request_texts(self) -> tuple[str, ...]:
        """What the user said so far, remembered until the requests change (read by every window)."""
        version = self._records.versions["requests"]
        if self._requests_read[0] != version:
            self._requests_read = (version, tuple(u.text for u in self._records.kind("requests").values()))
        return self._requests_read[1]

    def _merge_identifiers(self, new: Identifiers) -> None:
        """Every list field keeps the newest values first (the extractor's order), capped: the first
        window's too, so a ledger folded at once holds what one folded call by call holds."""
        old = self._records.identifiers
        merged: dict[str, Any] = {}
        for f in dataclasses.fields(Identifiers):
            theirs = getattr(new, f.name)
            ours = getattr(old, f.name) if old is not None else None
            if not isinstance(theirs, tuple):
                merged[f.name] = theirs or ours  # cwd: the newest known
                continue
            values = list(theirs) + [v for v in ours or () if v not in theirs]
            merged[f.name] = tuple(values[: IDENTIFIER_CAPS.get(f.name, DEFAULT_IDENTIFIER_CAP)])
        result = Identifiers(**merged)
        if result != old:  # the same object when nothing moved: the save's mark, so it is not re-encoded
            self._records.identifiers = result

    # --- reading --------------------------------------------------------------------------------------

    def position(self, message_id: str) -> int | None:
        """Where a message stands in the transcript (None: not folded, or worksurface's own)."""
        self.settle()
        return self._positions.get(message_id)

    def upto(self, cut: int | None = None) -> "LedgerView":
        """The state as of the messages before `cut` (everything when None)."""
        return LedgerView(self.records, self.folded if cut is None else cut)

    def entry_counts(self) -> dict[str, int]:
        """How many records of each kind the ledger holds (reports, the HTML page)."""
        r = self.records
        counts = {k.name: len(r.kind(k.name)) for k in KINDS}
        counts.update(mcp=len(r.mcp), todo=int(r.todo is not None), plan=int(r.plan is not None),
                      earlier=len(r.earlier), own_summaries=len(r.own_summaries))
        return counts

    def entries(self) -> list[dict[str, Any]]:
        """Every record as `{kind, text, source_id}` (kind is the record type), in record order: what
        the HTML report's Ledger section lists."""
        out: list[dict[str, Any]] = []
        for kind in KINDS:
            for record in self.records.kind(kind.name).values():
                out.append({"kind": kind.name, "text": entry_text(record), "source_id": entry_source(record)})
        return out

def _open_call_start(transcript: Sequence[Message], start: int, end: int) -> int:
    """The earliest index (within the last MAX_CARRY_MESSAGES) whose tool call has no result yet."""
    lo = max(start, end - MAX_CARRY_MESSAGES)
    answered = {r.call_id for m in transcript[lo:end] for r in m.tool_results}
    for i in range(lo, end):
        if any(c.id not in answered for c in transcript[i].tool_calls):
            return i
    return end


def _diverged(transcript: Sequence[Message], length: int, digest: str | None) -> bool:
    """`transcript` does not extend the one of `length` messages whose last digest was `digest`."""
    return length > len(transcript) or bool(length and transcript[length - 1].digest != digest)
