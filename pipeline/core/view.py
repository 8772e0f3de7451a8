"""Core helpers over a view: live slice, protected messages, rounds, tail choice, invariant checks.

Stages share these so that none of them needs to import another.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Iterable, Sequence

from .model import (Block, Message, Origin, Text, Thinking, ToolCall, ToolResult, block_key, is_user_turn, orphans,
                    result_index)
from .tokens import TokenCounter


def live_slice(messages: Sequence[Message]) -> list[Message]:
    """What the harness still sends: from the last harness compact boundary on (Claude Code keeps
    the pre-compaction history in its file, but the model no longer sees it)."""
    return list(messages[live_start(messages):])


def live_start(messages: Sequence[Message]) -> int:
    """Where `live_slice` starts: the last compact boundary's index, 0 without one."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].meta.get("compact_boundary") or messages[i].origin is Origin.BOUNDARY:
            return i
    return 0


def calls_by_id(view: Sequence[Message]) -> dict[str, ToolCall]:
    return {c.id: c for m in view for c in m.tool_calls}


def calls_for(view: Sequence[Message], call_ids: Iterable[str], end: int | None = None) -> dict[str, ToolCall]:
    """The tool calls with these ids, looked up walking back from `end` and stopping once all are found:
    results answer recent calls, so a call about new results reads only the end of the view."""
    wanted = set(call_ids)
    found: dict[str, ToolCall] = {}
    i = len(view) if end is None else end
    while wanted and i > 0:
        i -= 1
        for c in view[i].tool_calls:
            if c.id in wanted:
                found[c.id] = c
                wanted.discard(c.id)
    return found


def new_messages_start(view: Sequence[Message], unsent: frozenset[str] | None) -> int:
    """Where the messages no earlier call sent begin: they sit at the end of the view, after
    worksurface's own messages of the previous view. 0 when unknown (`unsent` None: a first call)."""
    if unsent is None:
        return 0
    i = len(view)
    while i > 0 and (view[i - 1].id in unsent or view[i - 1].origin is not Origin.CONVERSATION):
        i -= 1
    while i < len(view) and view[i].id not in unsent:
        i += 1  # worksurface's own messages before the first new one are not new
    return i


def turn_start(view: Sequence[Message], index: int) -> int:
    """The start of the assistant turn that messages from `index` on may still answer: the first
    message of the last run of assistant messages before `index` (0 when there is none)."""
    i = min(index, len(view))
    while i > 0 and view[i - 1].role != "assistant":
        i -= 1
    while i > 0 and view[i - 1].role == "assistant":
        i -= 1
    return i


def insertion_point(view: Sequence[Message]) -> int:
    """Where context worksurface adds at the end of the view goes: the end, or, when the last
    assistant turn has a tool call with no result yet (a cut made while a call ran, results still
    arriving), right before that turn, so nothing ever sits between a call and its result."""
    end = len(view)
    while end > 0 and view[end - 1].role != "assistant":
        end -= 1
    start = turn_start(view, end)
    answered = {r.call_id for m in view[start:] for r in m.tool_results}
    pending = any(c.id not in answered for m in view[start:end] for c in m.tool_calls)
    return start if pending and start > 0 else len(view)


def is_safe_cut(view: Sequence[Message], index: int) -> bool:
    """True when starting a slice at `index` splits no tool call from its result."""
    return index <= 0 or index >= len(view) or safe_cuts(view)[index]


def safe_cuts(view: Sequence[Message]) -> list[bool]:
    """`is_safe_cut(view, k)` for every k in 0..len(view), in one pass: a cut at k is unsafe exactly
    when a call made before k has a result at k or after (a search for a cut asks many k of one view)."""
    first_call: dict[str, int] = {}
    for i, m in enumerate(view):
        for c in m.tool_calls:
            first_call.setdefault(c.id, i)
    n = len(view)
    opened = [0] * (n + 2)  # +1 where a call's unsafe span (first call, last result] opens, -1 past it
    for call_id, last in result_index(view).items():  # each id's last result
        first = first_call.get(call_id)
        if first is not None and first < last:
            opened[first + 1] += 1
            opened[last + 1] -= 1
    safe, spans = [], 0
    for k in range(n + 1):
        spans += opened[k]
        safe.append(k <= 0 or k >= n or spans == 0)
    return safe


@dataclass(frozen=True)
class Round:
    """A step: an assistant message (or the consecutive records of one) and the results of its calls."""

    start: int
    end: int  # exclusive

    def messages(self, view: Sequence[Message]) -> Sequence[Message]:
        return view[self.start:self.end]


def rounds(view: Sequence[Message], start: int = 0) -> list[Round]:
    """Split view[start:] into steps that never separate a call from its result. A step begins at
    an assistant message that follows a non-assistant message (or at any user turn)."""
    out: list[Round] = []
    i, n = start, len(view)
    while i < n:
        j = i + 1
        pending = {c.id for c in view[i].tool_calls}
        while j < n:
            m = view[j]
            if m.role == "assistant" and view[j - 1].role != "assistant" and not pending:
                break
            if is_user_turn(m) and not pending:
                break
            pending |= {c.id for c in m.tool_calls}
            pending -= {r.call_id for r in m.tool_results}
            j += 1
        out.append(Round(i, j))
        i = j
    return out


def tail_start(view: Sequence[Message], counter: TokenCounter, budget: int, floor: int) -> int:
    """Index where the kept tail starts: the newest messages within `budget` tokens, but always the
    last assistant turn and what follows it (they are never reduced), never splitting a call from its result,
    starting on a transcript message (edits refer to it by id), and moved back to a user turn when
    one is close (within half the budget again), never inside one model response. Never earlier
    than `floor` (the stable prefix)."""
    n = len(view)
    total, idx = 0, n
    while idx > floor:
        t = counter.message(view[idx - 1])
        if total + t > budget:
            break
        total += t
        idx -= 1
    last_turn = next((i for i in range(n - 1, floor - 1, -1) if view[i].role == "assistant"), n)
    while last_turn > floor and view[last_turn - 1].role == "assistant":
        last_turn -= 1  # Claude Code splits one turn into several assistant records
    idx = min(idx, last_turn)
    safe = safe_cuts(view)
    while idx > floor and not (safe[idx] and not splits_response(view, idx)
                               and (idx == n or view[idx].origin is Origin.CONVERSATION)):
        idx -= 1
    extra, j = 0, idx
    while j > floor and extra <= budget // 2:
        j -= 1
        extra += counter.message(view[j])
        if is_user_turn(view[j]) and extra <= budget // 2 and safe[j]:
            return j
    return idx


# Meta of a message the format knows to be the harness's standing instructions for the session
# (Codex's developer and permissions messages, AGENTS.md, environment context), not one event.
STANDING = "standing"
# How a routine repair of the view (empty text, orphan thinking removed) starts in a report's notices:
# logged at INFO, since the view is valid again and nothing needs the user.
RECOVERY_PREFIX = "recovery: "


def standing_context(messages: Sequence[Message]) -> list[Message]:
    """The harness's standing instructions among `messages` (meta STANDING): a compaction carries
    them verbatim instead of summarizing them; of identical copies only the newest, in order."""
    standing = [m for m in messages if m.meta.get(STANDING) and m.origin is Origin.CONVERSATION
                and not m.meta.get("compact_boundary")]
    # Copies are alike in role and blocks; their ids differ (Codex restates its collaboration mode as a
    # new record on each turn that changes it), so the digest, which covers the id, cannot tell them.
    newest = {_content_key(m): m.id for m in standing}
    return [m for m in standing if newest[_content_key(m)] == m.id]


def _content_key(message: Message) -> tuple[str, tuple[str, ...]]:
    return message.role, tuple(block_key(b) for b in message.blocks)


def splits_response(view: Sequence[Message], index: int) -> bool:
    """True when `index` falls inside one model response: between two assistant messages (Claude
    Code's records of one API message, a Codex response's reasoning and the calls it led to), which
    a kept tail must hold together (a provider refuses a call turn whose reasoning was cut away)."""
    return 0 < index < len(view) and view[index - 1].role == "assistant" and view[index].role == "assistant"


def pairing_problems(view: Sequence[Message]) -> list[str]:
    """Invariant 1 problems of a view the session made, as readable strings (empty when the view is
    valid): every call answered, every result after its call. (Reading a file, `formats.validate.check_pairing`
    raises on a result before its call instead, naming the file.)"""
    missing_results, missing_calls = orphans(view)
    problems = [f"tool call {c} has no result" for c in sorted(missing_results)]
    problems += [f"tool result {r} has no earlier call" for r in sorted(missing_calls)]
    return problems


def check_no_duplicates(view: Sequence[Message]) -> list[str]:
    seen: set[str] = set()
    dups = []
    for m in view:
        if m.id in seen:
            dups.append(f"message {m.id} appears twice")
        seen.add(m.id)
    return dups


INTERRUPTED_RESULT = ("[interrupted: no result was recorded for this call; the harness stopped before it "
                      "finished. Check the state it may have left before repeating it.]")


def close_interrupted(messages: Sequence[Message]) -> list[Message]:
    """Answer each tool call that has no result although the conversation went on (a harness that
    crashed mid-call) with an explicit interrupted result, placed right after the call's turn, so the
    view is a valid request. A call in the final turn is left alone: its result may still come."""
    answered = {r.call_id for m in messages for r in m.tool_results}
    out: list[Message] = []
    n = len(messages)
    i = 0
    while i < n:
        j = i
        while j < n and messages[j].role == "assistant":
            j += 1
        if j == i:
            out.append(messages[i])
            i += 1
            continue
        turn = messages[i:j]
        out.extend(turn)
        if j < n:  # the conversation went on after this turn
            missing = [c for m in turn for c in m.tool_calls if c.id not in answered]
            if missing:
                out.append(Message(f"interrupted-{missing[0].id}", "user",
                                   tuple(ToolResult(c.id, INTERRUPTED_RESULT, is_error=True) for c in missing),
                                   Origin.RECOVERY, {"interrupted": [c.id for c in missing]}))
        i = j
    return out


@dataclass(frozen=True)
class Recovered:
    """A transcript made legal again after a crash: the messages, and what was removed (one line each,
    by message id) for the report."""

    messages: list[Message]
    removed: tuple[tuple[str, str], ...] = ()
    gone: frozenset[str] = frozenset()  # ids of the removed messages left with no block (removed whole)

    def notes(self, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """One report line per cleaned message not in `skip` (the ones already reported)."""
        return [f"{RECOVERY_PREFIX}{what} in message {mid} removed from the view" for mid, what in self.removed
                if mid not in skip]


def _assistant_groups(messages: Sequence[Message]) -> list[list[int]]:
    """Indices of the assistant messages of one model response: Claude Code writes one record per
    block sharing `api_message_id`; other formats keep a response in one message, so a run of
    consecutive assistant messages without that id is one group each."""
    groups: list[list[int]] = []
    by_api: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        if m.role != "assistant" or m.origin is not Origin.CONVERSATION:
            continue
        api = m.meta.get("api_message_id")
        if isinstance(api, str) and api:
            if api not in by_api:
                by_api[api] = []
                groups.append(by_api[api])
            by_api[api].append(i)
        else:
            groups.append([i])
    return groups


def _is_content(block: Block) -> bool:
    """A block that says or does something (whitespace-only text and thinking do not)."""
    if isinstance(block, Thinking):
        return False
    return not (isinstance(block, Text) and not block.text.strip())


def clean_recovered(messages: Sequence[Message]) -> Recovered:
    """Remove what a provider refuses and a crash leaves behind (seed 003): thinking with no content
    after it in its response (a thinking-only response, or trailing thinking), and empty or
    whitespace-only assistant text. A message left with no block goes. Depends only on each
    response's own records, so the same transcript always cleans the same way and the log stays
    append-only as records arrive."""
    drop: dict[int, set[int]] = {}  # message index -> block positions to remove
    for group in _assistant_groups(messages):
        blocks = [(i, k, b) for i in group for k, b in enumerate(messages[i].blocks)]
        last = max((n for n, (_, _, b) in enumerate(blocks) if _is_content(b)), default=-1)
        for n, (i, k, b) in enumerate(blocks):
            if (isinstance(b, Thinking) and n > last) or (isinstance(b, Text) and not b.text.strip()):
                drop.setdefault(i, set()).add(k)
    if not drop:
        return Recovered(list(messages))
    out: list[Message] = []
    removed: list[tuple[str, str]] = []
    gone_whole: set[str] = set()
    for i, m in enumerate(messages):
        gone = drop.get(i)
        if not gone:
            out.append(m)
            continue
        kinds = sorted({"orphan thinking" if isinstance(m.blocks[k], Thinking) else "empty text" for k in gone})
        removed.append((m.id, " and ".join(kinds)))
        kept = [b for k, b in enumerate(m.blocks) if k not in gone]
        if kept:
            out.append(m.with_blocks(kept))
        else:
            gone_whole.add(m.id)
    return Recovered(out, tuple(removed), frozenset(gone_whole))


def _api_ids(messages: Sequence[Message]) -> set[str]:
    """The provider response ids of these records (Claude Code writes one record per block)."""
    return {a for m in messages if isinstance(a := m.meta.get("api_message_id"), str)}


def _is_boundary(m: Message) -> bool:
    return bool(m.meta.get("compact_boundary")) or m.origin is Origin.BOUNDARY


class IncrementalRecovery:
    """`clean_recovered(close_interrupted(live_slice(full)))` for a transcript that grows by appends
    between calls: only the messages from the last assistant turn of the previous call on are read
    again, and the result is the one the whole transcript gives. Anything else (a rewind, a new
    boundary, a late result or response record about an earlier turn) recomputes from the start."""

    def __init__(self) -> None:
        self._full: list[Message] = []  # the previous call's transcript (its message objects)
        # The previous call's output list, and how many leading messages this call's output shares
        # with it as the very same objects: a caller that kept what it was given last (the session's
        # log) knows that much of the new output without comparing it again.
        self.previous: list[Message] | None = None
        self.unchanged = 0
        self._last: list[Message] | None = None
        # Likewise for the transcripts: the copy this call kept of it (`transcript_mark`, never changed
        # after), the previous call's copy, and how many leading messages of this transcript are the
        # very objects of that one (what a reader that saw the previous transcript need not compare).
        self.transcript_previous: list[Message] | None = None
        self.transcript_same = 0
        self._reset(0)

    def _reset(self, start: int) -> None:
        self.start = start  # where the live slice begins in the transcript
        self._stable = 0  # live messages before this index have their final recovered form in _out
        self._out: list[Message] = []
        self._removed: list[tuple[str, str]] = []
        self._gone: frozenset[str] = frozenset()
        self._open: set[str] = set()  # calls before _stable with no result before _stable
        self._api: set[str] = set()  # response ids of the records before _stable
        self.recomputed = 0  # messages read by the last call (tests and benchmarks)

    def __call__(self, full: Sequence[Message]) -> Recovered:
        previous = self._full
        grows = len(full) >= len(previous) > 0
        identical = grows and all(map(operator.is_, previous, full))  # the same objects: C speed
        extends = identical or (grows and all(a.digest == b.digest for a, b in zip(previous, full)))  # parsed again
        start = self.start if extends else 0
        for i in range(len(full) - 1, len(previous) - 1 if extends else -1, -1):
            if _is_boundary(full[i]):
                start = i
                break
        if not extends or start != self.start:
            self._reset(start)
        self._full = list(full)
        self.transcript_previous, self.transcript_same = previous, len(previous) if identical else 0
        live = full[self.start:]
        window = live[self._stable:]
        results = {r.call_id for m in window for r in m.tool_results}
        apis = _api_ids(window)
        if not self._open.isdisjoint(results) or not self._api.isdisjoint(apis):
            self._reset(self.start)
        # The fixed output of earlier calls stays as it is (it only grows), so the previous output's
        # first len(_out) messages are this one's too; after a reset nothing is known to be shared.
        unchanged = len(self._out)
        # What can no longer change is fixed first, so only the part after it is recovered here: each
        # message is recovered once, not once in the window and again when it is fixed.
        fixed = self._advance(live)
        window = live[self._stable:]
        done = clean_recovered(close_interrupted(window))
        self.recomputed = fixed + len(window)
        out = self._out + done.messages
        self.previous, self.unchanged, self._last = self._last, unchanged, out
        return Recovered(out, tuple(self._removed) + done.removed, self._gone | done.gone)

    @property
    def transcript_mark(self) -> list[Message]:
        """This call's copy of the transcript (the next call's `transcript_previous`)."""
        return self._full

    def _advance(self, live: Sequence[Message]) -> int:
        """Fix the output up to the start of the last assistant turn, when nothing after it can change
        it; returns how many messages that read."""
        stable = turn_start(live, len(live))
        if stable <= self._stable:
            return 0
        segment = live[self._stable:stable]
        later = live[stable:]
        calls = {c.id for m in segment for c in m.tool_calls}
        answered = {r.call_id for m in segment for r in m.tool_results}
        apis = _api_ids(segment)
        if not (calls - answered).isdisjoint(r.call_id for m in later for r in m.tool_results):
            return 0
        if not apis.isdisjoint(_api_ids(later)):
            return 0
        fixed = clean_recovered(close_interrupted(segment))
        self._out += fixed.messages
        self._removed += fixed.removed
        self._gone |= fixed.gone
        self._open = (self._open | calls) - answered
        self._api |= apis
        self._stable = stable
        return len(segment)
