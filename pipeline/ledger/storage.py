"""How the ledger is kept in a session store: a small head written at every save, and each larger part
(a record kind, the todo list, the identifiers ...) and each tracked file under its own key, written only
when it changed, so a save follows what changed and not the size of the session. A stored ledger of
another version loads empty and is folded again from the transcript."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Self

from ..core import jsontext
from ..core.jsontext import EncodedJSON
from ..facts import Identifiers, PlanMode, TodoState
from ..facts.filetracker import FileTracker
from . import codec
from .kinds import KINDS
from .records import Records, file_records

# Records whose JSON is remembered between saves; past this the memo starts over (a long session's
# ledger holds a few thousand records).
MAX_JSON_MEMO = 20_000
# Bumped when the extractors read a message differently: a stored ledger of another version is
# folded again from the transcript (2: slash commands, rejection words, answers, todo details; 3: runtime versions).
LEDGER_VERSION = 3
# Session meta keys: the head of the ledger, each larger part, each tracked file.
LEDGER_KEY = "ledger"
PART_PREFIX = "ledger."
FILE_PREFIX = "ledger.file:"


class LedgerStorage:
    """The ledger's persistence (`Ledger` is one): `to_json`/`from_json` whole, `save`/`write`/`saved`
    and `load` in parts. Reads the state the fold keeps, declared here."""

    _records: Records
    folded: int
    last_digest: str | None
    carry_from: int
    files: FileTracker
    errors_from: int
    extras_seen: int
    dirty: bool
    _saved: tuple[dict[str, Any], dict[str, tuple[Any, ...]]]
    _files_rendered: dict[str, tuple[Any, ...]] | None
    _json_memo: dict[int, tuple[Any, str]]

    def settle(self) -> None:
        """Fold what was read and not folded yet (the ledger's own)."""

    def to_json(self) -> dict[str, Any]:
        self.settle()
        data = self._small_json()
        data.update({name: _plain(make()) for name, (_, make) in self._part_sources().items()})
        data["file_tracker"] = self.files.to_json()
        return data

    def _small_json(self) -> dict[str, Any]:
        """The fields that change on most calls and stay small: written at every save."""
        r = self._records
        return {"version": LEDGER_VERSION, "count": self.folded, "last_digest": self.last_digest,
                "carry_from": self.carry_from, "errors_from": self.errors_from, "extras_seen": self.extras_seen,
                "mcp": dict(r.mcp),
                "tools": dict(r.tools), "cwds": dict(r.cwds), "plan_index": r.plan_index,
                "conversation_seen": r.conversation_seen}

    def _part_sources(self) -> dict[str, tuple[Any, Callable[[], Any]]]:
        """The larger parts, each saved under its own key: name -> (a mark equal to the previous one
        exactly when the part did not change, its JSON). A record kind's mark is its stamp (what the
        fold changed, not a scan of its records); a singleton is its own mark (records are frozen)."""
        r = self._records

        def kind(name: str) -> tuple[Any, Callable[[], Any]]:
            d = r.kind(name)
            return r.versions[name], lambda: EncodedJSON.of_object((k, self._record_text(v)) for k, v in d.items())

        parts = {k.name: kind(k.name) for k in KINDS if k.stored}
        parts.update(todo=(r.todo, lambda: codec.to_json(r.todo)), plan=(r.plan, lambda: codec.to_json(r.plan)),
                     identifiers=(r.identifiers, lambda: codec.to_json(r.identifiers)),
                     earlier=(dict(r.earlier), lambda: dict(r.earlier)),
                     own_summaries=(dict(r.own_summaries), lambda: dict(r.own_summaries)))
        return parts

    def _record_text(self, record: Any) -> str:
        """The store's JSON text of `codec.to_json(record)`, remembered per record object: records are
        frozen, and a part that changed by one entry would otherwise re-encode all of its entries."""
        known = self._json_memo.get(id(record))
        if known is not None and known[0] is record:
            return known[1]
        if len(self._json_memo) > MAX_JSON_MEMO:
            self._json_memo.clear()
        text = jsontext.encode(codec.to_json(record))
        self._json_memo[id(record)] = (record, text)  # the record is held, so its id is not reused
        return text

    def save(self) -> "LedgerSave":
        """What to write so the store holds this ledger: the small head always, and only the parts and
        tracked files that changed since the last `saved` (a call's work follows what is new, not the
        size of the session). Call `saved(result)` once the store committed it."""
        self.settle()
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
        """Write what the folds changed since the last save through `set_meta` (a store's, inside the
        caller's transaction); None when nothing changed (what is read and not folded yet waits for
        its fold). Call `saved(result)` once the transaction committed."""
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
    def load(cls, get: Callable[[str], Any]) -> Self:
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
    def from_json(cls, data: dict[str, Any] | None) -> Self:
        ledger = cls()
        if not data or data.get("version") != LEDGER_VERSION:
            return ledger  # a new session, or an older format: folded again from the transcript
        ledger.folded, ledger.last_digest = int(data["count"]), data.get("last_digest")
        ledger.carry_from = int(data.get("carry_from", ledger.folded))
        ledger.files = FileTracker.from_json(data.get("file_tracker"))
        r = ledger._records
        for kind in KINDS:
            if kind.stored:
                r.kinds[kind.name] = {k: codec.from_json(kind.type, v) for k, v in data.get(kind.name, {}).items()}
        ledger.errors_from = int(data.get("errors_from", ledger.folded))
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
        r.kinds["files"] = file_records(ledger.files.facts())  # derived, not stored (kinds: stored=False)
        ledger._files_rendered = ledger.files.file_marks()
        return ledger


@dataclasses.dataclass(frozen=True)
class LedgerSave:
    """The meta values a commit writes for the ledger: `head` under LEDGER_KEY, `parts` by key (a record
    kind's part as its encoded text, `EncodedJSON`)."""

    head: dict[str, Any]
    parts: dict[str, Any]
    marks: tuple[dict[str, Any], dict[str, tuple[Any, ...]]]


def _plain(value: Any) -> Any:
    """A part's value as JSON values (a record kind's part comes as its encoded text)."""
    return value.value() if isinstance(value, EncodedJSON) else value
