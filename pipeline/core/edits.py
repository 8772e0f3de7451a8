"""Sticky decisions: the edits stages make to a view, stored once and re-applied identically.

A stage never rewrites the view directly. It returns edits; the core stores them in the session
and applies them. Because every later call applies the same stored edits to the same messages, the
view's prefix stays byte-stable between calls and the provider's prompt cache keeps hitting.
Edits refer to transcript message ids only, so a rewound transcript drops exactly the edits about
the messages it removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, Union

from .model import Message, Origin, ToolResult
from .serial import message_from_json, message_to_json


@dataclass(frozen=True)
class ReplaceResult:
    """Replace the content of the tool result for `call_id` (budget, snip, microcompact)."""

    stage: str
    call_id: str
    content: str
    artifact: str | None = None
    tokens_freed: int = 0

    @property
    def refs(self) -> tuple[str, ...]:
        return (self.call_id,)


@dataclass(frozen=True)
class ReplaceMessages:
    """Remove the messages `ids` and put `replacement` where the first of them stood (snip, collapse)."""

    stage: str
    ids: tuple[str, ...]
    replacement: tuple[Message, ...] = ()
    tokens_freed: int = 0

    @property
    def refs(self) -> tuple[str, ...]:
        return self.ids


@dataclass(frozen=True)
class Compact:
    """Replace everything before `tail_start` (the system prefix excepted) by `head`: the boundary
    and the summary. Reinjections are separate `Insert` edits placed after the tail."""

    stage: str
    tail_start: str | None
    head: tuple[Message, ...]
    covered: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def refs(self) -> tuple[str, ...]:
        return (self.tail_start,) if self.tail_start is not None else ()


@dataclass(frozen=True)
class Insert:
    """Insert `messages` right after the message `after` (reinjections, status publications).
    `after` may be a message worksurface made; `ref` is then the newest transcript message at that
    time, so a rewind past it drops this edit too."""

    stage: str
    after: str | None
    messages: tuple[Message, ...]
    ref: str | None = None

    @property
    def refs(self) -> tuple[str, ...]:
        return tuple(x for x in (self.after, self.ref) if x is not None)


Edit = Union[ReplaceResult, ReplaceMessages, Compact, Insert]


def removed_refs(messages: Iterable[Message]) -> set[str]:
    """Every id an edit may refer to among `messages`: message ids and the tool-call ids they call
    or answer (what a rewind that removes these messages invalidates)."""
    refs: set[str] = set()
    for m in messages:
        refs.add(m.id)
        refs.update(c.id for c in m.tool_calls)
        refs.update(r.call_id for r in m.tool_results)
    return refs


def refers_to(edit_refs: Iterable[str], removed: set[str]) -> bool:
    """The rewind rule: an edit that refers to any removed message or call is dropped with it."""
    return not removed.isdisjoint(edit_refs)


def apply_edits(messages: Sequence[Message], edits: Iterable[Edit]) -> list[Message]:
    """Apply edits in order. Runs of `ReplaceResult` (microcompact clears many results at once) and
    runs of independent `ReplaceMessages` (collapse folds many spans) are each applied in one pass,
    which gives the same view as applying them one by one."""
    view = list(messages)
    results: dict[str, ReplaceResult] = {}
    replacements: list[ReplaceMessages] = []
    touched: set[str] = set()  # ids the pending replacements remove or introduce

    def flush() -> None:
        nonlocal view, results, replacements, touched
        if results:
            view = _replace_results(view, results)
        if replacements:
            view = _replace_messages(view, replacements)
        results, replacements, touched = {}, [], set()

    for edit in edits:
        if isinstance(edit, ReplaceResult):
            if replacements:
                flush()
            results[edit.call_id] = edit
            continue
        if isinstance(edit, ReplaceMessages):
            if results or touched.intersection(edit.ids):
                flush()
            replacements.append(edit)
            touched.update(edit.ids)
            touched.update(m.id for m in edit.replacement)
            continue
        flush()
        if isinstance(edit, Compact):
            view = _compact(view, edit)
        elif isinstance(edit, Insert):
            view = _insert(view, edit)
    flush()
    return view


def _replace_results(view: list[Message], by_call: dict[str, ReplaceResult]) -> list[Message]:
    out = []
    for m in view:
        results = m.tool_results
        if results and any(r.call_id in by_call for r in results):
            blocks = tuple(
                ToolResult(b.call_id, by_call[b.call_id].content, b.is_error)
                if isinstance(b, ToolResult) and b.call_id in by_call else b
                for b in m.blocks)
            edited = dict(m.meta.get("edited_calls", {}))
            edited.update({r.call_id: by_call[r.call_id].stage for r in results if r.call_id in by_call})
            m = m.with_blocks(blocks, edited_calls=edited)
        out.append(m)
    return out


def _replace_messages(view: list[Message], edits: list[ReplaceMessages]) -> list[Message]:
    """Edits with disjoint ids: each edit's messages go, its replacement stands where the first was."""
    owner = {i: k for k, e in enumerate(edits) for i in e.ids}
    placed: set[int] = set()
    out: list[Message] = []
    for m in view:
        k = owner.get(m.id)
        if k is None:
            out.append(m)
        elif k not in placed:
            out.extend(edits[k].replacement)
            placed.add(k)
    return out


def _compact(view: list[Message], edit: Compact) -> list[Message]:
    prefix = _leading_system(view)
    start = len(prefix)
    tail_at = len(view)
    if edit.tail_start is not None:
        for i in range(start, len(view)):
            if view[i].id == edit.tail_start:
                tail_at = i
                break
    return prefix + list(edit.head) + view[tail_at:]


def _insert(view: list[Message], edit: Insert) -> list[Message]:
    if edit.after is None:
        return view + list(edit.messages)
    for i in range(len(view) - 1, -1, -1):
        if view[i].id == edit.after:
            return view[:i + 1] + list(edit.messages) + view[i + 1:]
    return view + list(edit.messages)


def _leading_system(view: Sequence[Message]) -> list[Message]:
    """The stable prefix: system messages of the conversation before anything else."""
    out = []
    for m in view:
        if m.role != "system" or m.origin is not Origin.CONVERSATION or m.meta.get("compact_boundary"):
            break
        out.append(m)
    return out


def edited_stage(message: Message, call_id: str) -> str | None:
    """The stage whose edit replaced this call's result in the view, if any."""
    return message.meta.get("edited_calls", {}).get(call_id)


def breaks_sent_prefix(edits: Sequence[Edit], new: Sequence[Message]) -> bool:
    """Whether `edits` change what was already sent (so the provider's cached prefix is lost anyway):
    an edit of a message new on this call (`new`: budget on a fresh tool result) does not."""
    if not edits:
        return False
    unsent = removed_refs(new)
    return any(isinstance(e, Compact) or not unsent.issuperset(e.refs) for e in edits)


def stable_prefix_length(view: Sequence[Message]) -> int:
    return len(_leading_system(view))


# --- persistence -------------------------------------------------------------------------------

def edit_to_json(edit: Edit) -> dict[str, Any]:
    if isinstance(edit, ReplaceResult):
        return {"kind": "replace_result", "stage": edit.stage, "call_id": edit.call_id,
                "content": edit.content, "artifact": edit.artifact, "tokens_freed": edit.tokens_freed}
    if isinstance(edit, ReplaceMessages):
        return {"kind": "replace_messages", "stage": edit.stage, "ids": list(edit.ids),
                "replacement": [message_to_json(m) for m in edit.replacement],
                "tokens_freed": edit.tokens_freed}
    if isinstance(edit, Compact):
        return {"kind": "compact", "stage": edit.stage, "tail_start": edit.tail_start,
                "head": [message_to_json(m) for m in edit.head],
                "covered": list(edit.covered), "info": edit.info}
    if isinstance(edit, Insert):
        return {"kind": "insert", "stage": edit.stage, "after": edit.after,
                "messages": [message_to_json(m) for m in edit.messages], "ref": edit.ref}
    raise TypeError(f"not an edit: {edit!r}")


def edit_from_json(data: dict[str, Any]) -> Edit:
    kind = data["kind"]
    if kind == "replace_result":
        return ReplaceResult(data["stage"], data["call_id"], data["content"], data.get("artifact"),
                             data.get("tokens_freed", 0))
    if kind == "replace_messages":
        return ReplaceMessages(data["stage"], tuple(data["ids"]),
                               tuple(message_from_json(m) for m in data["replacement"]),
                               data.get("tokens_freed", 0))
    if kind == "compact":
        return Compact(data["stage"], data["tail_start"],
                       tuple(message_from_json(m) for m in data["head"]),
                       tuple(data["covered"]), data.get("info", {}))
    if kind == "insert":
        return Insert(data["stage"], data["after"], tuple(message_from_json(m) for m in data["messages"]),
                      data.get("ref"))
    raise ValueError(f"unknown edit kind {kind!r}")
