"""`file_activity` fed incrementally, for the session's ledger: each call replayed once, when its result
has arrived, at its position in the whole transcript; persisted whole or a file at a time, and marked
per file so a save writes, and a renderer re-renders, only the files a call touched."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Sequence

from ..core.model import Message
from .calls import CallRecord, tool_calls
from .filestate import FileFact, FileState
from .files import CallReplay, merge_relative, running_cwds
from .meta import is_harness_output
from .provenance import aider_command_output


class FileTracker:
    """`file_activity` fed incrementally: each call is replayed once, when its result has arrived,
    at its position in the whole transcript. The session's ledger keeps one across calls (and in its
    store, via `to_json`), so file contents and edits applied on later calls stay exact."""

    def __init__(self) -> None:
        self._tracker = CallReplay()
        self.cwd: str | None = None
        self._fed: set[str] = set()  # calls already replayed among the messages a window may repeat
        # path -> (state key, record, whether read from the path's own state rather than a merged copy)
        self._facts: dict[str, tuple[tuple[Any, ...], FileFact, bool]] = {}
        self._marks: dict[str, tuple[Any, ...]] | None = None  # file_marks as of its last call

    def feed(self, messages: Sequence[Message], index: Sequence[int], new_from: int) -> None:
        """Replay `messages` (at transcript positions `index`); messages before position `new_from`
        were fed before and only their calls' late results are replayed now."""
        cwds = running_cwds(messages)
        seed = self.cwd
        records: dict[int, list[CallRecord]] = {}
        for rec in tool_calls(messages):
            records.setdefault(rec.index, []).append(rec)
        fed: set[str] = set()
        for i, m in enumerate(messages):
            cwd = cwds[i] or seed
            for rec in records.get(i, ()):
                if rec.result is None:
                    continue
                fed.add(rec.call.id)
                if rec.call.id in self._fed or rec.failed:
                    continue
                at_result = index[rec.result_index] if rec.result_index is not None else index[i]
                self._tracker.record(dataclasses.replace(rec, index=index[i], result_index=at_result), cwd)
            if index[i] >= new_from and is_harness_output(m) and not aider_command_output(messages, i):
                self._tracker.notices(messages, i, (index[i], m.id), cwd)
        self._fed = fed
        self.cwd = next((c for c in reversed(cwds) if c), seed)

    def facts(self) -> list[FileFact]:
        """The same records `file_activity` gives for everything fed so far. A file's record is
        rebuilt only when its state changed (joining a large file's lines is the costly part), so a
        call costs what it touched, not every file the session ever read. A file untouched since the
        last call whose record came from its own state (not merged with a relative path) keeps it
        without its state key being worked out again."""
        facts = []
        files, touched = self._tracker.files, self._tracker.touched_since_facts
        cache: dict[str, tuple[tuple[Any, ...], FileFact, bool]] = {}
        for path, st in merge_relative(files).items():
            if not st.actions:
                continue
            own = st is files.get(path)
            hit = self._facts.get(path)
            if hit is not None and own and hit[2] and path not in touched:
                key, fact = hit[0], hit[1]  # the same state object, unchanged since: the same record
            else:
                key = _state_key(st)
                fact = hit[1] if hit is not None and hit[0] == key else st.fact()
            cache[path] = (key, fact, own)
            facts.append(fact)
        touched.clear()
        self._facts = cache
        facts.sort(key=lambda f: (-f.last_index, f.path))
        return facts

    # --- persistence: whole (`to_json`), or a file at a time for a saver that writes only what changed

    def to_json(self) -> dict[str, Any]:
        return {"files": {path: self.file_json(path) for path in self._tracker.files}, **self.head_json()}

    def head_json(self) -> dict[str, Any]:
        """`to_json()` without its files (which a saver can write one by one, with `file_json`)."""
        return {"open_file": self._tracker.open_file, "cwd": self.cwd, "fed": sorted(self._fed)}

    def file_json(self, path: str) -> dict[str, Any]:
        """One tracked file of `to_json()["files"]`. Field by field rather than `dataclasses.asdict`,
        which deep-copies every held line of the file before it is serialized anyway."""
        st = self._tracker.files[path]
        data = {f.name: getattr(st, f.name) for f in dataclasses.fields(st)}
        data["actions"] = sorted(data["actions"])
        data["added"], data["removed"] = list(data["added"]), list(data["removed"])
        if data["lines"] is not None:
            data["lines"] = {str(k): v for k, v in data["lines"].items()}
        return data

    def file_marks(self) -> dict[str, tuple[Any, ...]]:
        """Per tracked file, a mark that changes whenever its state does (a saver writes, a renderer
        re-renders, only the files whose mark changed): every change touches the file at a newer
        message or counts an edit, replaces or grows its lines, or sets one of these flags.
        Only the files touched since the last call are marked again (a call costs what it touched,
        not every file the session read); the caller gets its own dict, in the tracker's file order."""
        files, touched = self._tracker.files, self._tracker.touched
        if self._marks is None:
            self._marks = {path: _mark(st) for path, st in files.items()}
        else:
            # Files are only ever added (at the end): the new ones first, in order, then the touched ones.
            for path in itertools.islice(files, len(self._marks), None):
                self._marks[path] = _mark(files[path])
            for path in touched:
                self._marks[path] = _mark(files[path])
        touched.clear()
        return dict(self._marks)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "FileTracker":
        tracker = cls()
        if not data:
            return tracker
        for path, raw in data.get("files", {}).items():
            st = dict(raw)
            st["actions"] = set(st["actions"])
            if st.get("lines") is not None:
                st["lines"] = {int(k): v for k, v in st["lines"].items()}
            names = {f.name for f in dataclasses.fields(FileState)}
            tracker._tracker.files[path] = FileState(**{k: v for k, v in st.items() if k in names})
        tracker._tracker.open_file = data.get("open_file")
        tracker.cwd = data.get("cwd")
        tracker._fed = set(data.get("fed", ()))
        return tracker


def _mark(st: FileState) -> tuple[Any, ...]:
    """A tracked file's mark (FileTracker.file_marks)."""
    return (st.first_index, st.last_index, st.last_message_id, len(st.actions), st.content_index,
            st.content_message_id, st.edits, st.stale, st.complete, st.total, st.gone, st.moved_to,
            st.moved_from, len(st.added), len(st.removed), id(st.lines), -1 if st.lines is None else len(st.lines))


def _state_key(st: FileState) -> tuple[Any, ...]:
    """What a file record depends on, cheaply: any touch, read or edit changes it."""
    return (st.first_index, st.last_index, st.last_message_id, st.content_index, tuple(sorted(st.actions)),
            st.edits, st.gone, st.stale, st.complete, st.total, len(st.lines or ()), st.moved_to,
            st.moved_from, tuple(st.added), tuple(st.removed))
