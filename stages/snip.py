"""Snip: remove content that later content made redundant.

Superseded status snapshots, earlier reads of a file that was read again in full, exact and
near-duplicate tool outputs, and explicit `session.snip(ids, reason)` requests. Snipping edits the
middle of the view, which invalidates the provider's cache from that point on, so automatic snips
wait until they are worth `min_gain_tokens` (or the cache is cold anyway).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from rapidfuzz import fuzz

from worksurface.core.config import SnipConfig
from worksurface.core.edits import Edit, ReplaceMessages, ReplaceResult, edited_stage
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult, shared_length
from worksurface.engine.pricing import FIRING_RULE_READS, decide_edit
from worksurface.engine.state import PipelineState, SkipKind, Skipped, Stage, StageContext, StageReport, StageResult
from worksurface.core.tokens import TokenCounter
from worksurface.core.toolkinds import call_path, call_target, effective_kind
from worksurface.core.view import calls_by_id

NAME = "snip"
# (undecided results by call id, redundant ones -> (marker, view index), stale status messages)
_Reading = tuple[dict[str, tuple[int, ToolResult]], dict[str, tuple[str, int]], list[Message]]
# Comparing two long outputs character by character is costly; only results whose lengths are
# this close can reach the near-duplicate ratio anyway.
LENGTH_RATIO_FOR_NEAR_DUPLICATE = 0.9
# Partial reads (offset/limit) show part of a file; only a full re-read supersedes a read.
_PARTIAL_READ_KEYS = ("offset", "limit", "view_range", "start_line", "end_line")


@dataclass(frozen=True)
class SnipRequests:
    """Snip's input on a call: the harness's explicit requests (`Session.snip(ids, reason)`) not yet
    carried out, as (message ids, reason)."""

    explicit: Sequence[tuple[tuple[str, ...], str]] = ()


NO_REQUESTS = SnipRequests()


class SnipMemory:
    """What snip keeps of a session between calls (the session holds one per session, in
    `StageContext.inputs`): its index of the view read so far, and the token counts of the markers it
    last wrote. Without it snip reads the whole view."""

    __slots__ = ("index", "marker_tokens")

    def __init__(self) -> None:
        self.index: _Index | None = None
        # A redundant result waits, marker and all, until its batch is worth it: every call until then
        # would otherwise encode the same markers again (the last call's only, so it stays bounded).
        self.marker_tokens: dict[str, int] = {}


def run(state: PipelineState, config: SnipConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    view, tokens = state["view"], state["tokens"]
    counter = ctx.counter
    found = _read_incrementally(view, config, ctx)
    if found is None:
        results, replacements, stale = _read_whole_view(view, config, ctx)
    else:
        results, replacements, stale = found

    # (call id, marker, tokens freed): made into edits only when the batch goes, since a batch that
    # waits is read again on every call until it is worth it.
    markers: list[tuple[str, str, int]] = []
    freed = 0
    memory = ctx.inputs.get(SnipMemory)
    known, marker_tokens = memory.marker_tokens if memory is not None else {}, {}
    for call_id, (text, _) in replacements.items():
        result = results[call_id][1]
        size = counter.block(result)
        text = f"{text[:-1]}; {size} tokens freed]"
        marker = marker_tokens[text] = known.get(text) or counter.text(text)
        gain = max(0, size - marker)
        if gain <= 0:
            continue
        freed += gain
        markers.append((call_id, text, gain))
    if memory is not None:
        memory.marker_tokens = marker_tokens
    stale_ids = tuple(m.id for m in stale)
    stale_gain = sum(counter.message(m) for m in stale)
    freed += stale_gain

    cold = ctx.idle_seconds is not None and ctx.idle_seconds >= ctx.config.microcompact.cache_ttl_seconds
    # Snipping edits the sent prefix: only when the saving outweighs the re-billing
    # (`pricing.decide_edit`: saving over the expected remaining calls).
    redundant = bool(markers or stale_ids)
    batch = redundant and (freed >= config.min_gain_tokens or cold)
    decision = decide_edit(state, ctx, first_index=_first_index(view, {c for c, _, _ in markers}, set(stale_ids), results),
                           saved_tokens=freed) if batch else None
    edits: list[Edit] = []
    if redundant and not batch:
        report = StageReport(NAME, tokens, tokens, ms=_ms(started),
                             outcome=Skipped(SkipKind.BELOW_MINIMUM,
                                             f"{freed} tokens redundant, below the batch minimum of {config.min_gain_tokens}"))
    elif decision is not None and not cold and not decision.fire:
        report = StageReport(NAME, tokens, tokens, ms=_ms(started),
                             outcome=Skipped(SkipKind.NOT_WORTH_IT, f"not worth it: {decision.reason}"))
    else:
        edits = [ReplaceResult(NAME, call_id, text, tokens_freed=gain) for call_id, text, gain in markers]
        if stale_ids:
            edits.append(ReplaceMessages(NAME, stale_ids, (), tokens_freed=stale_gain))
        report = StageReport(NAME, tokens, tokens - freed, items=len(edits), ms=_ms(started),
                             outcome=None if edits else Skipped(SkipKind.NOTHING_TO_DO, "nothing redundant"),
                             details={"snipped": sorted(c for c in replacements)} if edits else {})

    explicit = _explicit(view, ctx, counter)
    if explicit:
        edits.append(explicit)
        report.tokens_after -= explicit.tokens_freed
        report.items += 1
        report.edited()
        report.details["explicit"] = list(explicit.ids)
    return StageResult(edits, report)


def _read_whole_view(view: Sequence[Message], config: SnipConfig, ctx: StageContext) -> _Reading:
    """(undecided results, call id -> (marker, view index) of the redundant ones, stale status messages)."""
    calls = calls_by_id(view)
    results = _undecided_results(view, ctx.protected)
    replacements: dict[str, tuple[str, int]] = {}
    for call_id, marker in _superseded_reads(results, calls).items():
        replacements[call_id] = marker
    for call_id, marker in _duplicates(results, calls, config).items():
        replacements.setdefault(call_id, marker)
    return results, replacements, _superseded_status(view)


@dataclass
class _Index:
    """What snip has read of the view up to its last assistant message (the part no longer protected),
    kept in the session's scratch so a call reads only the messages new since the previous one.
    Results relate only within groups (reads of one path, copies of one content, outputs of one call
    target), so a new result re-decides only the groups it joins."""

    config: SnipConfig | None = None  # the configuration the groups were formed under
    prefix: list[Message] = field(default_factory=list)
    results: dict[str, tuple[int, ToolResult]] = field(default_factory=dict)
    ordinal: dict[str, int] = field(default_factory=dict)  # call id -> its place among the results
    calls: dict[str, ToolCall] = field(default_factory=dict)
    status: list[Message] = field(default_factory=list)
    groups: dict[tuple[str, ...], list[str]] = field(default_factory=dict)
    member_of: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    reads: dict[str, tuple[str, int]] = field(default_factory=dict)  # superseded reads
    copies: dict[str, tuple[str, int]] = field(default_factory=dict)  # exact and near duplicates
    call_at: dict[str, int] = field(default_factory=dict)  # call id -> view index of its message
    status_at: list[int] = field(default_factory=list)  # view index of each status message
    reused_id: bool = False  # a call or result id seen twice: the reading cannot be taken back to a point

    def rewind(self, n: int, config: SnipConfig) -> bool:
        """Forget what was read from view index `n` on, as if only `prefix[:n]` had been read (after an
        edit there, a call reads from `n`, not from the start): the results from there leave their
        groups, and the results left in those groups are decided again. False when that cannot be
        undone."""
        if self.reused_id:
            return False
        gone = [c for c, (i, _) in self.results.items() if i >= n]
        touched: set[tuple[str, ...]] = set()
        for call_id in gone:
            del self.results[call_id], self.ordinal[call_id]
            self.reads.pop(call_id, None)
            self.copies.pop(call_id, None)
            for key in self.member_of.pop(call_id, ()):
                self.groups[key].remove(call_id)
                touched.add(key)
        left = [c for key in touched for c in self.groups[key]]
        for key in touched:
            if not self.groups[key]:
                del self.groups[key]
        for call_id in [c for c, i in self.call_at.items() if i >= n]:
            del self.calls[call_id], self.call_at[call_id]
        keep = sum(1 for i in self.status_at if i < n)
        del self.status[keep:], self.status_at[keep:]
        del self.prefix[n:]
        _redecide(self, left, config)
        return True


def _read_incrementally(view: Sequence[Message], config: SnipConfig, ctx: StageContext) -> _Reading | None:
    """`_read_whole_view`'s answer, reading only what is new since the previous call (None: no memory,
    or a view this index cannot follow, such as a protected message that carries results)."""
    memory = ctx.inputs.get(SnipMemory)
    if memory is None:
        return None
    frontier = next((i + 1 for i in range(len(view) - 1, -1, -1) if view[i].role == "assistant"), 0)
    index = memory.index
    if not isinstance(index, _Index) or index.config is not config:
        index = _Index(config)
    elif (kept := min(frontier, shared_length(view, index.prefix))) < len(index.prefix):
        if not index.rewind(kept, config):
            index = _Index(config)
    new: list[str] = []
    for i in range(len(index.prefix), frontier):
        m = view[i]
        for c in m.tool_calls:
            index.reused_id |= c.id in index.calls
            index.calls[c.id] = c
            index.call_at[c.id] = i
        if m.origin is Origin.STATUS:
            index.status.append(m)
            index.status_at.append(i)
        if m.origin is not Origin.CONVERSATION or not m.tool_results:
            continue
        if m.id in ctx.protected:
            memory.index = None
            return None
        for r in m.tool_results:
            if edited_stage(m, r.call_id) is None and not r.is_error:
                index.reused_id |= r.call_id in index.results
                index.results[r.call_id] = (i, r)
                index.ordinal[r.call_id] = len(index.ordinal)
                new.append(r.call_id)
    index.prefix = list(view[:frontier])
    for call_id in new:
        _join_groups(index, call_id, config)
    _redecide(index, new, config)
    memory.index = index
    replacements = dict(_newest_first(index, index.reads))
    for call_id, marker in _newest_first(index, index.copies):
        replacements.setdefault(call_id, marker)
    status = index.status + [m for m in view[frontier:] if m.origin is Origin.STATUS]
    return index.results, replacements, _superseded_status(status)


def _join_groups(index: _Index, call_id: str, config: SnipConfig) -> None:
    result = index.results[call_id][1]
    call = index.calls.get(call_id)
    keys: list[tuple[str, ...]] = []
    path = call_path(call) if call is not None and effective_kind(call) == "read" else None
    if path:
        keys.append(("path", path))
    if len(result.content) >= config.min_result_tokens * 2:  # what `_duplicates` looks at
        keys.append(("digest", _content_digest(result.content)))
        keys.append(("target", call.name if call else "", call_target(call) if call else ""))
    index.member_of[call_id] = keys
    for key in keys:
        index.groups.setdefault(key, []).append(call_id)


def _redecide(index: _Index, new: list[str], config: SnipConfig) -> None:
    """Decide again every result related to a new one (closed over all three groupings), with the same
    functions the whole-view reading uses, on just those results."""
    affected: set[str] = set(new)
    todo = list(affected)
    # Each group is walked once: a command re-run many times forms one large group, and walking it
    # again for every member would make each call quadratic in the group's size.
    walked: set[tuple[str, ...]] = set()
    while todo:
        for key in index.member_of.get(todo.pop(), ()):
            if key not in walked:
                walked.add(key)
                joined = [c for c in index.groups[key] if c not in affected]
                affected.update(joined)
                todo.extend(joined)
    if not affected:
        return
    subset = {c: index.results[c] for c in sorted(affected, key=index.ordinal.__getitem__)}
    for call_id in affected:
        index.reads.pop(call_id, None)
        index.copies.pop(call_id, None)
    index.reads.update(_superseded_reads(subset, index.calls))
    index.copies.update(_duplicates(subset, index.calls, config))


def _newest_first(index: _Index, verdicts: dict[str, tuple[str, int]]) -> list[tuple[str, tuple[str, int]]]:
    """In the order the whole-view reading finds them: newest message first, then view order."""
    return sorted(verdicts.items(), key=lambda kv: (-kv[1][1], index.ordinal[kv[0]]))


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _first_index(view: Sequence[Message], calls: set[str], ids: set[str],
                 results: dict[str, tuple[int, ToolResult]]) -> int:
    """The earliest view position that replacing the results of `calls` and removing the messages
    `ids` changes (where the cache would break): for results, the positions the reading found them
    at; a scan of the view only when whole messages go."""
    if not ids:
        return min((results[c][0] for c in calls if c in results), default=0)
    for i, m in enumerate(view):
        if m.id in ids or any(r.call_id in calls for r in m.tool_results):
            return i
    return 0


def _undecided_results(view: Sequence[Message], protected: frozenset[str]) -> dict[str, tuple[int, ToolResult]]:
    out = {}
    for i, m in enumerate(view):
        if m.origin is not Origin.CONVERSATION or m.id in protected:
            continue
        for r in m.tool_results:
            if edited_stage(m, r.call_id) is None and not r.is_error:
                out[r.call_id] = (i, r)
    return out


def _superseded_reads(results: dict[str, tuple[int, ToolResult]], calls: dict[str, ToolCall]) -> dict[str, tuple[str, int]]:
    last_full_read: dict[str, tuple[int, str]] = {}
    out: dict[str, tuple[str, int]] = {}
    ordered = sorted(results.items(), key=lambda kv: kv[1][0], reverse=True)
    for call_id, (index, _) in ordered:
        call = calls.get(call_id)
        if call is None or effective_kind(call) != "read":
            continue
        path = call_path(call)
        if not path:
            continue
        partial = any(k in call.input for k in _PARTIAL_READ_KEYS)
        newer = last_full_read.get(path)
        if newer is not None:
            out[call_id] = (f"[snipped: superseded by a later full read of {path} (call {newer[1]})]", index)
        elif not partial:
            last_full_read[path] = (index, call_id)
    return out


def _duplicates(results: dict[str, tuple[int, ToolResult]], calls: dict[str, ToolCall],
                config: SnipConfig) -> dict[str, tuple[str, int]]:
    """Earlier copies of an output that appears again later (the latest copy stays)."""
    out: dict[str, tuple[str, int]] = {}
    latest_by_hash: dict[str, str] = {}
    seen_by_target: dict[tuple[str, str], list[tuple[str, str]]] = {}
    ordered = sorted(results.items(), key=lambda kv: kv[1][0], reverse=True)
    for call_id, (index, result) in ordered:
        if len(result.content) < config.min_result_tokens * 2:
            continue
        call = calls.get(call_id)
        key = (call.name, call_target(call)) if call else ("", "")
        label = f"{key[0]} {key[1]}".strip() if call else "tool"
        digest = _content_digest(result.content)
        if digest in latest_by_hash:
            out[call_id] = (f"[snipped: identical to the later output of call {latest_by_hash[digest]} ({label})]", index)
            continue
        latest_by_hash[digest] = call_id
        for other_id, other_content in seen_by_target.get(key, ()):
            shorter, longer = sorted((len(result.content), len(other_content)))
            if shorter < LENGTH_RATIO_FOR_NEAR_DUPLICATE * longer:
                continue
            if _near_duplicate(result.content, other_content, config.near_duplicate_ratio):
                out[call_id] = (f"[snipped: near-duplicate of the later output of call {other_id} ({label})]", index)
                break
        else:
            seen_by_target.setdefault(key, []).append((call_id, result.content))
    return out


@lru_cache(maxsize=65_536)
def _content_digest(content: str) -> str:
    # Snip looks at every result on every call; a session reuses the same strings, so hash once.
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@lru_cache(maxsize=65_536)
def _near_duplicate(a: str, b: str, cutoff: float) -> bool:
    # A replay asks about the same pairs on every call; the verdict for two strings never changes.
    return fuzz.ratio(a, b, score_cutoff=cutoff) > 0


def _superseded_status(view: Sequence[Message]) -> list[Message]:
    """Status publications of earlier epochs: the latest baseline replaces them."""
    epochs = [m.meta.get("epoch", 0) for m in view if m.origin is Origin.STATUS]
    if not epochs:
        return []
    current = max(epochs)
    return [m for m in view if m.origin is Origin.STATUS and m.meta.get("epoch", 0) < current]


def _explicit(view: Sequence[Message], ctx: StageContext, counter: TokenCounter) -> ReplaceMessages | None:
    """`session.snip(ids, reason)`: remove whole messages, with their calls' results (or the calls
    of removed results) so no pair is split, and leave one marker listing what went."""
    explicit = ctx.inputs.get(SnipRequests, NO_REQUESTS).explicit
    if not explicit:
        return None
    wanted: set[str] = set()
    reasons = []
    for ids, reason in explicit:
        wanted.update(ids)
        reasons.append(reason)
    present = {m.id for m in view}
    wanted = {i for i in wanted if i in present and i not in ctx.protected}
    if not wanted:
        return None
    # Close over pairs until stable.
    while True:
        call_ids = {c.id for m in view if m.id in wanted for c in m.tool_calls}
        call_ids |= {r.call_id for m in view if m.id in wanted for r in m.tool_results}
        grown = {m.id for m in view if any(c.id in call_ids for c in m.tool_calls)
                 or any(r.call_id in call_ids for r in m.tool_results)} | wanted
        if grown == wanted:
            break
        wanted = grown
    removed = [m for m in view if m.id in wanted]
    gain = sum(counter.message(m) for m in removed)
    ids = tuple(m.id for m in removed)
    marker = Message(f"snip-{removed[0].id}", "user",
                     (Text(f"[snipped {len(ids)} messages ({gain} tokens freed): {', '.join(ids)}. "
                           f"Reason: {'; '.join(sorted(set(reasons)))}]"),),
                     Origin.SNIP_MARKER, {"stage": NAME, "removed": list(ids), "tokens_freed": gain})
    return ReplaceMessages(NAME, ids, (marker,), tokens_freed=gain)


# Runs on every call (trigger 0): it batches by gain instead (`min_gain_tokens`, or a cold cache).
STAGE = Stage(NAME, SnipConfig, run, needs=(SnipRequests,), memory=SnipMemory,
              reads=frozenset({"config", "counter", "idle_seconds", "protected", "inputs"}) | FIRING_RULE_READS)
