"""The surface ledger: the working state as typed records, kept in the session store beside the log and
the edits, so a compaction is a state migration instead of a summary of the previous summary.

Each message is folded in once, when it first reaches a `prepare`: the fact extractors run over the
new messages plus the few earlier ones whose tool calls still wait for a result (so a call and its
result, which arrive on different calls, are read together), and their records merge into the
ledger by key. A record leaves only when a newer one supersedes it (a file's later state, a todo
list's new version, an error a later success resolved), never because a compaction happened. The
summary, the reinjectors and the status baseline render from it; none of them re-reads worksurface's
own earlier output, which the fold skips.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol, Sequence

from .. import facts
from ..facts import FileFact, Identifiers, PlanMode, TodoState
from ..facts.errors import RESOLUTION_WINDOW, ErrorReader
from ..facts.files import FileTracker
from ..facts.plans import is_plan_document
from ..facts.tools import attachment_announcements
from ..facts.meta import message_cwd
from ..facts import subagents as subagent_facts
from ..core.model import Message, Origin
from . import codec
from .kinds import BY_NAME, KINDS, Window
from .records import LedgerView, Records, entry_source, entry_text

# A call still waiting for its result keeps its message in the fold window; past this many messages
# the call is taken as abandoned (a harness that never answers it), so the window stays bounded.
MAX_CARRY_MESSAGES = 24
# Identifier lists keep the newest values; enough for a long session's branches, commits and the
# verification commands, without growing with every command ever run.
IDENTIFIER_CAPS = {"branches": 12, "worktrees": 12, "commits": 40, "issues": 40, "paths": 120,
                   "commands": 60, "test_counts": 12, "urls": 40}
DEFAULT_IDENTIFIER_CAP = 60
# File contents the ledger keeps for reinjection: the newest files only (older ones are re-read from
# the workspace, or named without content); a content is capped at this many characters.
MAX_FILES_WITH_CONTENT = 16
# Plan documents keep their content however old (the newest this many), beside those 16.
MAX_PLAN_DOCUMENTS_WITH_CONTENT = 8
MAX_CONTENT_CHARS = 40_000
# An unresolved error keeps the errors window open back to it, up to this many messages (a retry
# or fix is looked for RESOLUTION_WINDOW calls ahead, two messages a call).
MAX_ERROR_WINDOW_MESSAGES = 2 * RESOLUTION_WINDOW + 2
# Records whose JSON is remembered between saves; past this the memo starts over (a long session's
# ledger holds a few thousand records).
MAX_JSON_MEMO = 20_000
# Bumped when the extractors read a message differently: a stored ledger of another version is
# folded again from the transcript (2: slash commands, rejection words, answers, todo details).
LEDGER_VERSION = 2
# Session meta keys: the head of the ledger, each larger part, each tracked file.
LEDGER_KEY = "ledger"
PART_PREFIX = "ledger."
FILE_PREFIX = "ledger.file:"


class Follower(Protocol):
    """A fold kept above the ledger's floor (the status bar's) that reads the messages the ledger reads,
    each once and in order, on the ledger's walk: the transcript is walked once per call, by the ledger.
    `seen` is how many transcript messages it has read; the ledger resets it when history diverges."""

    seen: int

    def reset(self) -> None: ...
    def observe(self, message: Message, index: int) -> None: ...


class Ledger:
    """The session's working state. `update(transcript)` before each graph run; `upto(index)` for the
    state as of a cut (what a summary of the messages before it should say)."""

    def __init__(self) -> None:
        self.records = Records()
        self.count = 0            # messages of the transcript folded so far
        self.last_digest: str | None = None
        self.carry_from = 0       # where the next fold window starts (open calls)
        self.files = FileTracker()
        self.errors_from = 0      # where the errors window starts: the oldest error still unresolved
        self.extras_seen = 0      # the transcript's non-message records folded so far
        self.dirty = False        # changed since the store last saved it
        self.saved_count = 0      # `count` when the store last saved it
        self._positions: dict[str, int] = {}  # message id -> index in the transcript (not persisted)
        # Marks of what the store holds (see `save`), and of the tracked files when the file records
        # was last rendered from them.
        self._saved: tuple[dict[str, Any], dict[str, tuple[Any, ...]]] = ({}, {})
        self._files_rendered: dict[str, tuple[Any, ...]] | None = None
        self.last_window = 0  # messages the last `update` read (new ones and the carry window)
        self._json_memo: dict[int, tuple[Any, Any]] = {}  # id(record) -> (record, its JSON)
        # The errors window's searches, carried between calls so each later call is read once (not persisted).
        self._error_reader = ErrorReader()
        self._followers: list[Follower] = []
        self._requests_read: tuple[int, tuple[str, ...]] = (-1, ())  # (requests version, their texts)

    @classmethod
    def over(cls, messages: Sequence[Message], queued: Sequence[tuple[str | None, str]] = ()) -> "Ledger":
        """A ledger folded once over `messages`: the facts of a list of messages when there is no
        session (the one-shot path reads the same records a session's ledger holds)."""
        ledger = cls()
        ledger.update(messages, queued=queued)
        return ledger

    # --- folding ----------------------------------------------------------------------------------

    def update(self, transcript: Sequence[Message], *, rebuild: bool = False,
               queued: Sequence[tuple[str | None, str]] = (),
               extras: Sequence[tuple[str | None, Any]] = ()) -> None:
        """Fold the messages not seen yet. A transcript that no longer extends what was folded
        (rewound or edited history) is folded again from the start. `extras` are the transcript's
        non-message records (`Transcript.extras`): the harness's attachment records among them
        announce tools, MCP servers and agent types."""
        n = len(transcript)
        diverged = self.count > n or (self.count and transcript[self.count - 1].digest != self.last_digest)
        if rebuild or diverged:
            followers = self._followers
            self.__init__()  # type: ignore[misc]
            self._followers = followers
            for f in followers:
                f.reset()
        self._feed(transcript)
        if len(self._positions) < min(self.count, n):
            self._positions = {m.id: i for i, m in enumerate(transcript[: self.count])}
        self.last_window = 0
        if self.count >= n:
            self._fold_extras(extras)
            return
        for i in range(self.count, n):
            self._positions.setdefault(transcript[i].id, i)
        self._fold_extras(extras)
        start = min(self.carry_from, self.count)
        self.last_window = n - start
        self._fold(transcript[start:], start, queued, self.count)
        # Every new message is read; of the older ones, only back to the oldest error still open
        # (bounded), so a first fold of a whole transcript misses no error.
        reread_from = max(min(self.errors_from, start), n - MAX_ERROR_WINDOW_MESSAGES)
        self._fold_errors(transcript, min(start, reread_from), n)
        self.count, self.last_digest = n, transcript[-1].digest
        self.carry_from = _open_call_start(transcript, start, n)
        self.dirty = True

    def follow(self, follower: Follower) -> None:
        """Have `follower` read every message this ledger reads, from the first (it catches up on the
        next `update` with what was folded before, e.g. by another process)."""
        self._followers.append(follower)

    def _feed(self, transcript: Sequence[Message]) -> None:
        for f in self._followers:
            if f.seen > len(transcript):
                f.reset()
            for i in range(f.seen, len(transcript)):
                f.observe(transcript[i], i)
            f.seen = len(transcript)

    def _fold_extras(self, extras: Sequence[tuple[str | None, Any]]) -> None:
        """Announcements in the harness's attachment records, each record once (they only grow)."""
        if len(extras) <= self.extras_seen:
            return
        new = [(self._positions.get(anchor, 0) if anchor else 0, record)
               for anchor, record in extras[self.extras_seen:]]
        announcements = BY_NAME["announcements"]
        for a in attachment_announcements(new):
            if announcements.put(self.records.kind("announcements"), a):
                self.records.changed("announcements")
        self.extras_seen = len(extras)
        self.dirty = True

    def _fold_errors(self, transcript: Sequence[Message], start: int, end: int) -> None:
        """Errors and their resolutions over the window from the oldest unresolved error: a fix or a
        retry that comes many calls later resolves it exactly as a one-shot reading would."""
        window = [(i, m) for i, m in enumerate(transcript[start:end], start) if m.origin is Origin.CONVERSATION]
        index = [i for i, _ in window]
        messages = [m for _, m in window]
        called_at = {rec.call.id: index[rec.index] for rec in facts.tool_calls(messages)}
        errors = self.records.kind("errors")
        for e in self._error_reader.read(messages):
            e = dataclasses.replace(e, index=index[e.index])
            if errors.get(e.call_id) != e:  # re-read every call while open: store only what changed
                errors[e.call_id] = e
                self.records.changed("errors")
        # Only the window's calls can hold the window open: read those, not every error ever seen.
        unresolved = [at for call_id, at in called_at.items()
                      if (err := errors.get(call_id)) is not None and not err.resolved]
        self.errors_from = min(unresolved, default=end)

    def _fold(self, window: Sequence[Message], base: int, queued: Sequence[tuple[str | None, str]],
              new_from: int) -> None:
        r = self.records
        self._fold_summaries(window, base)
        keep = [(base + i, m) for i, m in enumerate(window) if m.origin is Origin.CONVERSATION]
        if not keep:
            return
        index = [g for g, _ in keep]
        messages = [m for _, m in keep]

        def at(i: int) -> int:
            return index[i] if 0 <= i < len(index) else i

        # What the user said in earlier windows (searched only when a call's source must be one the user named).
        read = Window(messages, queued, self._request_texts(), facts.tool_calls(messages))
        for kind in KINDS:
            if kind.extract is not None:
                r.replace(kind.name, *kind.fold(r.kind(kind.name), read, at))
        self.files.feed(messages, index, new_from)
        # Rendering every file's facts reads every line held; only when a tracked file changed.
        marks = self.files.file_marks()
        if marks != self._files_rendered:
            r.replace("files", _with_newest_contents(self.files.facts()))
            self._files_rendered = marks
        tasks = subagent_facts.fold(r.kind("subagents"), messages, at, queued)
        r.replace("subagents", tasks, tasks != r.kind("subagents"))
        self._count(messages, index, new_from)
        self._fold_singletons(messages, index, at)
        self._merge_identifiers(facts.identifiers(messages))

    def _fold_summaries(self, window: Sequence[Message], base: int) -> None:
        """Earlier summaries the window holds: worksurface's own standing for history this transcript
        does not have, and another harness's (Claude Code's compaction summary)."""
        r = self.records
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
        r = self.records
        for g_index, m in zip(index, messages):
            if g_index >= new_from:
                where = message_cwd(m)
                if where:
                    r.cwds[where] = r.cwds.get(where, 0) + 1
                for call in m.tool_calls:
                    r.tools[call.name] = r.tools.get(call.name, 0) + 1

    def _fold_singletons(self, messages: Sequence[Message], index: Sequence[int], at: Callable[[int], int]) -> None:
        """The MCP servers seen, the newest todo list, the plan mode."""
        r = self.records
        for name in facts.mcp_servers(messages):
            r.mcp[name] = max(r.mcp.get(name, -1), index[-1])
        todo = facts.todo_state(messages)
        if todo is not None and (r.todo is None or at(todo.index) >= r.todo.index):
            r.todo = dataclasses.replace(todo, index=at(todo.index))
        plan = facts.plan_mode(messages)
        if plan.message_id is not None or plan.active or plan.plan:
            plan_at = self._positions.get(plan.message_id) if plan.message_id else None
            r.plan, r.plan_index = plan, plan_at if plan_at is not None else index[-1]

    def _request_texts(self) -> tuple[str, ...]:
        """What the user said so far, remembered until the requests change (read by every window)."""
        version = self.records.versions["requests"]
        if self._requests_read[0] != version:
            self._requests_read = (version, tuple(u.text for u in self.records.kind("requests").values()))
        return self._requests_read[1]

    def _merge_identifiers(self, new: Identifiers) -> None:
        """Every list field keeps the newest values first (the extractor's order), capped."""
        old = self.records.identifiers
        if old is None:
            self.records.identifiers = new
            return
        merged: dict[str, Any] = {}
        for f in dataclasses.fields(Identifiers):
            ours, theirs = getattr(old, f.name), getattr(new, f.name)
            if not isinstance(theirs, tuple):
                merged[f.name] = theirs or ours  # cwd: the newest known
                continue
            values = list(theirs) + [v for v in ours if v not in theirs]
            merged[f.name] = tuple(values[: IDENTIFIER_CAPS.get(f.name, DEFAULT_IDENTIFIER_CAP)])
        self.records.identifiers = Identifiers(**merged)

    # --- reading --------------------------------------------------------------------------------------

    def position(self, message_id: str) -> int | None:
        """Where a message stands in the transcript (None: not folded, or worksurface's own)."""
        return self._positions.get(message_id)

    def upto(self, cut: int | None = None) -> "LedgerView":
        """The state as of the messages before `cut` (everything when None)."""
        return LedgerView(self.records, self.count if cut is None else cut)

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

    # --- persistence --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        data = self._small_json()
        data.update({name: make() for name, (_, make) in self._part_sources().items()})
        data["file_tracker"] = self.files.to_json()
        return data

    def _small_json(self) -> dict[str, Any]:
        """The fields that change on most calls and stay small: written at every save."""
        r = self.records
        return {"version": LEDGER_VERSION, "count": self.count, "last_digest": self.last_digest,
                "carry_from": self.carry_from, "errors_from": self.errors_from, "extras_seen": self.extras_seen,
                "mcp": dict(r.mcp),
                "tools": dict(r.tools), "cwds": dict(r.cwds), "plan_index": r.plan_index,
                "conversation_seen": r.conversation_seen}

    def _part_sources(self) -> dict[str, tuple[Any, Callable[[], Any]]]:
        """The larger parts, each saved under its own key: name -> (a mark equal to the previous one
        exactly when the part did not change, its JSON). A record kind's mark is its stamp (what the
        fold changed, not a scan of its records); a singleton is its own mark (records are frozen)."""
        r = self.records

        def kind(name: str) -> tuple[Any, Callable[[], Any]]:
            d = r.kind(name)
            return r.versions[name], lambda: {k: self._record_json(v) for k, v in d.items()}

        parts = {k.name: kind(k.name) for k in KINDS if k.stored}
        parts.update(todo=(r.todo, lambda: codec.to_json(r.todo)), plan=(r.plan, lambda: codec.to_json(r.plan)),
                     identifiers=(r.identifiers, lambda: codec.to_json(r.identifiers)),
                     earlier=(dict(r.earlier), lambda: dict(r.earlier)),
                     own_summaries=(dict(r.own_summaries), lambda: dict(r.own_summaries)))
        return parts

    def _record_json(self, record: Any) -> Any:
        """`codec.to_json(record)`, remembered per record object: records are frozen, and a part that
        changed by one entry would otherwise re-encode all of its entries."""
        known = self._json_memo.get(id(record))
        if known is not None and known[0] is record:
            return known[1]
        if len(self._json_memo) > MAX_JSON_MEMO:
            self._json_memo.clear()
        data = codec.to_json(record)
        self._json_memo[id(record)] = (record, data)  # the record is held, so its id is not reused
        return data

    def save(self) -> "LedgerSave":
        """What to write so the store holds this ledger: the small head always, and only the parts and
        tracked files that changed since the last `saved` (a call's work follows what is new, not the
        size of the session). Call `saved(result)` once the store committed it."""
        sources = self._part_sources()
        marks = {name: mark for name, (mark, _) in sources.items()}
        # The fold keeps the tracked files' marks as of its last feed: no second scan of every file.
        files = self._files_rendered if self._files_rendered is not None else self.files.file_marks()
        old, old_files = self._saved
        parts = {PART_PREFIX + name: make() for name, (mark, make) in sources.items()
                 if name not in old or old[name] != mark}
        if files is not old_files:
            parts.update({FILE_PREFIX + path: self.files.file_json(path) for path, mark in files.items()
                          if old_files.get(path) != mark})
        head = self._small_json()
        head.update(parts=list(sources), file_tracker={**self.files.head_json(), "paths": list(files)})
        return LedgerSave(head, parts, (marks, files))

    def write(self, set_meta: Callable[[str, Any], None]) -> "LedgerSave | None":
        """Write what changed since the last save through `set_meta` (a store's, inside the caller's
        transaction); None when nothing changed. Call `saved(result)` once the transaction committed."""
        if not self.dirty:
            return None
        save = self.save()
        for key, value in save.parts.items():
            set_meta(key, value)
        set_meta(LEDGER_KEY, save.head)
        return save

    def saved(self, save: "LedgerSave") -> None:
        """The store committed `save`: later saves write only what changes after it."""
        self._saved = save.marks
        self.dirty = False

    @classmethod
    def load(cls, get: Callable[[str], Any]) -> "Ledger":
        """The ledger a store holds (`get` reads a session meta key): written in parts by `save`, or
        whole by an earlier version."""
        head = get(LEDGER_KEY)
        if not head or "parts" not in head:
            return cls.from_json(head)
        data = dict(head)
        for name in head["parts"]:
            part = get(PART_PREFIX + name)
            if part is not None:  # a part missing from the store loads as empty, like from_json's
                data[name] = part
        tracker = dict(head["file_tracker"])
        tracker["files"] = {path: get(FILE_PREFIX + path) for path in tracker.pop("paths")}
        data["file_tracker"] = tracker
        ledger = cls.from_json(data)
        ledger._saved = ({name: mark for name, (mark, _) in ledger._part_sources().items()},
                         ledger._files_rendered or {})
        return ledger

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Ledger":
        ledger = cls()
        if not data or data.get("version") != LEDGER_VERSION:
            return ledger  # a new session, or an older format: folded again from the transcript
        ledger.count, ledger.last_digest = int(data["count"]), data.get("last_digest")
        ledger.carry_from = int(data.get("carry_from", ledger.count))
        ledger.files = FileTracker.from_json(data.get("file_tracker"))
        ledger.saved_count = ledger.count
        r = ledger.records
        for kind in KINDS:
            if kind.stored:
                r.kinds[kind.name] = {k: codec.from_json(kind.type, v) for k, v in data.get(kind.name, {}).items()}
        ledger.errors_from = int(data.get("errors_from", ledger.count))
        ledger.extras_seen = int(data.get("extras_seen", 0))
        r.mcp = {k: int(v) for k, v in data.get("mcp", {}).items()}
        r.tools = {k: int(v) for k, v in data.get("tools", {}).items()}
        r.cwds = {k: int(v) for k, v in data.get("cwds", {}).items()}
        r.todo = codec.from_json(TodoState, data["todo"]) if data.get("todo") else None
        r.plan = codec.from_json(PlanMode, data["plan"]) if data.get("plan") else None
        r.plan_index = int(data.get("plan_index", -1))
        r.identifiers = codec.from_json(Identifiers, data["identifiers"]) if data.get("identifiers") else None
        r.earlier = dict(data.get("earlier", {}))
        r.own_summaries = dict(data.get("own_summaries", {}))
        r.conversation_seen = int(data.get("conversation_seen", 0))
        r.kinds["files"] = _with_newest_contents(ledger.files.facts())  # derived, not stored (kinds: stored=False)
        ledger._files_rendered = ledger.files.file_marks()
        return ledger


@dataclasses.dataclass(frozen=True)
class LedgerSave:
    """The meta values a commit writes for the ledger: `head` under LEDGER_KEY, `parts` by key."""

    head: dict[str, Any]
    parts: dict[str, Any]
    marks: tuple[dict[str, Any], dict[str, tuple[Any, ...]]]


def _with_newest_contents(files: Sequence[FileFact]) -> dict[str, FileFact]:
    """The file records by path; only the newest files and the plan documents (the plan the work goes
    through, however long ago it was read) keep their content (capped), the others are re-read from
    the workspace or named without content."""
    out: dict[str, FileFact] = {}
    with_content = plans = 0
    for f in sorted(files, key=lambda f: -f.last_index):
        content = f.content
        if content is not None:
            plan = is_plan_document(f.path) and plans < MAX_PLAN_DOCUMENTS_WITH_CONTENT
            plans += plan
            with_content += not plan
            if with_content > MAX_FILES_WITH_CONTENT and not plan:
                f = dataclasses.replace(f, content=None, content_message_id=None)
            elif len(content) > MAX_CONTENT_CHARS:
                f = dataclasses.replace(f, content=content[:MAX_CONTENT_CHARS], partial=True)
        out[f.path] = f
    return out


def _open_call_start(transcript: Sequence[Message], start: int, end: int) -> int:
    """The earliest index (within the last MAX_CARRY_MESSAGES) whose tool call has no result yet."""
    lo = max(start, end - MAX_CARRY_MESSAGES)
    answered = {r.call_id for m in transcript[lo:end] for r in m.tool_results}
    for i in range(lo, end):
        if any(c.id not in answered for c in transcript[i].tool_calls):
            return i
    return end
