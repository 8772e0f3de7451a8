"""What is known of one file as the transcript shows it: the record the ledger and the summary read
(`FileFact`), and the state a replay of the calls builds (`FileState`: the lines seen, partial reads
merged by line number, edits replayed onto them, whether the content went stale)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

READ, EDITED, CREATED, DELETED, MOVED, COPIED = "read", "edited", "created", "deleted", "moved", "copied"
At = tuple[int, str]  # where an effect shows: (message index, message id)
# Shown between runs of a partially read file, so a reader knows lines are missing.
GAP_MARKER = "[… lines {start}-{end} not seen …]"
GAP_MARKER_OPEN = "[… lines from {start} not seen …]"
# Lines remembered per file of what edits added and removed: the newest few carry the facts.
MAX_CHANGE_LINES = 12


@dataclass(frozen=True)
class FileFact:
    """What the transcript shows about one file; `content` is the last content seen, if any."""

    path: str
    actions: frozenset[str]
    first_index: int
    last_index: int
    last_message_id: str
    content: str | None = None
    content_message_id: str | None = None
    partial: bool = False
    stale: bool = False
    edits: int = 0
    gone: bool = False  # deleted or moved away since last touched: nothing at this path to restore
    moved_to: str | None = None
    moved_from: str | None = None
    added: tuple[str, ...] = ()  # lines the latest edits added (facts that live only in edit bodies)
    removed: tuple[str, ...] = ()  # lines the latest edits removed


@dataclass
class FileState:
    """One file as the calls replayed so far left it (FileTracker persists it field by field)."""

    path: str
    first_index: int
    last_index: int = 0
    last_message_id: str = ""
    actions: set[str] = field(default_factory=set)
    lines: dict[int, str] | None = None
    total: int | None = None
    complete: bool = False
    stale: bool = False
    content_message_id: str | None = None
    content_index: int = -1
    edits: int = 0
    gone: bool = False
    moved_to: str | None = None
    moved_from: str | None = None
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def touch(self, action: str, at: At) -> None:
        self.actions.add(action)
        if action in (DELETED, MOVED):
            self.gone = True
        elif action != READ:
            self.gone, self.moved_to = False, None
        if at[0] >= self.last_index:
            self.last_index, self.last_message_id = at

    def note_change(self, old: str, new: str) -> None:
        """Remember what an edit took out and put in (line level, newest last, capped)."""
        before = {ln.strip() for ln in old.splitlines()}
        after = {ln.strip() for ln in new.splitlines()}
        self.added = (self.added + [ln.strip() for ln in new.splitlines()
                                    if ln.strip() and ln.strip() not in before])[-MAX_CHANGE_LINES:]
        self.removed = (self.removed + [ln.strip() for ln in old.splitlines()
                                        if ln.strip() and ln.strip() not in after])[-MAX_CHANGE_LINES:]

    def see_text(self, text: str, at: At) -> None:
        """The whole file's content is now known (seen at message (index, id))."""
        body = text[:-1] if text.endswith("\n") else text
        self.lines = {n: line for n, line in enumerate(body.split("\n"), 1)} if text else {}
        self.total = len(self.lines)
        self.complete, self.stale = True, False
        self.content_index, self.content_message_id = at

    def see_lines(self, lines: dict[int, str], at: At, *, whole: bool,
                  total: int | None = None) -> None:
        """Some (or, with `whole`, all) of the file's lines are now known. `lines` is copied or only
        read, never kept: a caller may pass the shared dict `shared_numbered_lines` remembers."""
        if whole:
            self.lines, self.complete = dict(lines), True
        elif self.lines is not None and not self.stale:
            self.lines.update(lines)
        else:
            self.lines, self.complete = dict(lines), False
        if total is not None:
            self.total = total
            self.complete = self.complete or len(self.lines) >= total
        self.stale = False
        self.content_index, self.content_message_id = at

    def text(self) -> str | None:
        if self.lines is None:
            return None
        return "\n".join(self.lines[n] for n in sorted(self.lines))

    def apply(self, replacements: Iterable[tuple[str, str, bool]], at: At) -> None:
        """Replay an edit's (old, new, replace_all) steps; content that cannot take them goes stale."""
        self.edits += 1
        current = self.text() if self.complete and not self.stale else None
        if current is None:
            self.stale = self.lines is not None
            return
        for old, new, replace_all in replacements:
            if not old or old not in current:
                self.stale = True
                return
            current = current.replace(old, new) if replace_all else current.replace(old, new, 1)
        self.see_text(current, at)

    def changed_unseen(self) -> None:
        """The file changed in a way the transcript does not show."""
        self.edits += 1
        if self.lines is not None:
            self.stale = True

    def fact(self) -> FileFact:
        content, partial = None, False
        if self.lines is not None and not self.gone:
            content, partial = render_lines(self.lines, self.complete, self.total)
        return FileFact(self.path, frozenset(self.actions), self.first_index, self.last_index,
                        self.last_message_id, content, self.content_message_id if content is not None else None,
                        partial, self.stale and content is not None, self.edits, self.gone, self.moved_to,
                        self.moved_from, tuple(self.added), tuple(self.removed))


def render_lines(lines: dict[int, str], complete: bool, total: int | None) -> tuple[str, bool]:
    """Known lines in order, with a marker for each gap; (text, partial)."""
    if complete:
        return "\n".join(lines[n] for n in sorted(lines)), False
    out: list[str] = []
    expected = 1
    for n in sorted(lines):
        if n > expected:
            out.append(GAP_MARKER.format(start=expected, end=n - 1))
        out.append(lines[n])
        expected = n + 1
    if total is not None and expected <= total:
        out.append(GAP_MARKER.format(start=expected, end=total))
    elif total is None:
        out.append(GAP_MARKER_OPEN.format(start=expected))
    return "\n".join(out), True
