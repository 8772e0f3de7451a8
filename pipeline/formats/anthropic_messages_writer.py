"""Writing an Anthropic Messages request: the view exported as valid turns (see anthropic_messages for the
rules: system messages, merged roles, tool results moved after their calls, a user turn first), and
the prompt-cache breakpoints the gateway places on a view."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..core.errors import FormatError
from ..core.model import Block, Message, Text, Thinking, ToolCall, ToolResult, block_key
from . import ownmark
from .anthropic_messages_records import (CONTINUED, EXTRA, FORM, IN_MESSAGES, NAME, RAW, TURN, block_json,
                                        own_json, user_text_json)
from .rawkeep import Recall
from .reuse import Memo, made
from .validate import NO_RESULT


def with_cache_control(message: Message, cache_control: Any | None) -> Message:
    """`message` whose blocks carry no `cache_control`, except its last cacheable block (not a
    thinking block), which gets `cache_control` when it is given: how the gateway places a client's
    prompt-cache breakpoint on the view without leaving stale ones from earlier requests."""
    raws: dict[str, list[Any]] = {key: [_without_cache_control(r) for r in options]
                                  for key, options in (message.meta.get(RAW) or {}).items()}
    if cache_control is not None:
        last = next((b for b in reversed(message.blocks) if not isinstance(b, Thinking)), None)
        if last is not None:
            key = block_key(last)
            options = raws.get(key) or [text_maker(message, last)(last)]
            options[-1] = {**options[-1], "cache_control": cache_control}
            raws[key] = options
    meta = {k: v for k, v in message.meta.items() if k != RAW}
    return dataclasses.replace(message, meta={**meta, RAW: raws} if raws else meta)


def cache_controls(message: Message) -> list[Any]:
    """The `cache_control` values the message's blocks carry as the client sent them."""
    return [r["cache_control"] for options in (message.meta.get(RAW) or {}).values() for r in options
            if isinstance(r, dict) and r.get("cache_control") is not None]


def _without_cache_control(raw: Any) -> Any:
    return {k: v for k, v in raw.items() if k != "cache_control"} if isinstance(raw, dict) else raw


# ---- write -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Item:
    """One block of an exported turn: its API JSON, where it came from, the call it makes or answers."""

    api: Any
    src: tuple[int, int] | None = None     # (message index, block index); None if export made it up
    call: str | None = None                # tool_use id
    answers: str | None = None             # tool_result's tool_use id


_Turn = tuple[str, list[_Item]]


def export(msgs: list[Message], path: str | None, memo: Memo | None = None) -> tuple[Any, list[dict[str, Any]]]:
    k = 0
    while k < len(msgs) and msgs[k].role == "system" and not msgs[k].meta.get(IN_MESSAGES):
        k += 1
    system = _system_value(msgs[:k]) if k else None
    rest = msgs[k:]
    turns = _place_results(_merged(_items(rest, path, memo)))
    if turns and turns[0][0] == "assistant":
        turns.insert(0, ("user", [_Item({"type": "text", "text": CONTINUED})]))
    return system, [_turn_json(role, items, rest) for role, items in turns]


def _system_value(head: list[Message]) -> Any:
    only = head[0]
    if (len(head) == 1 and only.meta.get(FORM) != "list" and len(only.blocks) == 1
            and isinstance(only.blocks[0], Text)):
        return Recall(only, NAME).get(only.blocks[0], text_maker(only, only.blocks[0]))["text"]
    out = []
    for m in head:
        recall = Recall(m, NAME)
        out += [recall.get(b, text_maker(m, b)) for b in m.blocks]
    return out


def text_maker(m: Message, b: Block) -> Any:
    """How a block of a user turn or of `system` is written: text marked when worksurface made the
    message (its only block, under a tagged mark), conversation text as it is."""
    if not isinstance(b, Text) or m.role == "assistant":
        return block_json
    if m.is_worksurface and len(m.blocks) == 1:
        mark = ownmark.mark_of(m)
        return lambda block: own_json(block, mark)
    return user_text_json


def _blocks_json(m: Message) -> list[Any]:
    """The API JSON of each of the message's blocks (its own where it kept it)."""
    recall = Recall(m, NAME)
    return [recall.get(b, text_maker(m, b)) for b in m.blocks]


def _items(rest: list[Message], path: str | None, memo: Memo | None = None) -> list[tuple[str, _Item]]:
    """(role, item) for every block; results are the user's; pairing checked as we go."""
    out: list[tuple[str, _Item]] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for mi, m in enumerate(rest):
        role = _turn_role(m)
        written = made(memo, NAME, m, _blocks_json)
        for bi, b in enumerate(m.blocks):
            api = written[bi]
            if isinstance(b, ToolResult):
                if b.call_id not in calls or b.call_id in answered:
                    problem = "has no tool call before it" if b.call_id not in calls else "is given twice"
                    raise FormatError(f"tool result for call {b.call_id!r} {problem}", path=path,
                                      record=f"{m.id} (message {mi})")
                answered.add(b.call_id)
                out.append(("user", _Item(api, (mi, bi), answers=b.call_id)))
            elif isinstance(b, ToolCall):
                if role != "assistant":
                    raise FormatError(f"tool call in a {m.role} message cannot be written", path=path,
                                      record=f"{m.id} (message {mi})")
                calls.add(b.id)
                out.append((role, _Item(api, (mi, bi), call=b.id)))
            else:
                out.append((role, _Item(api, (mi, bi))))
    return out


def _turn_role(m: Message) -> str:
    """The API role a message is written with: a system message keeps its place in the list only
    when it was read from there (the API accepts it there; others become user text)."""
    if m.role == "assistant":
        return "assistant"
    return "system" if m.role == "system" and m.meta.get(IN_MESSAGES) else "user"


def _merged(items: list[tuple[str, _Item]]) -> list[_Turn]:
    turns: list[_Turn] = []
    for role, item in items:
        if turns and turns[-1][0] == role:
            turns[-1][1].append(item)
        else:
            turns.append((role, [item]))
    return turns


def _place_results(turns: list[_Turn]) -> list[_Turn]:
    """Move each result to the front of the user turn right after its call's turn.

    A user turn left empty is dropped and its neighbours merged; that assistant turn answered none
    of its calls there, so the merged turn's results still follow it.
    """
    owner = {item.call: ti for ti, (_, items) in enumerate(turns) for item in items if item.call}
    moved: dict[int, list[_Item]] = {}
    for _, items in turns:
        for item in items:
            if item.answers is not None:
                moved.setdefault(owner[item.answers], []).append(item)
    for ti, (_, items) in enumerate(turns[:-1]):    # a call in the last turn may still be run
        answered = {item.answers for item in moved.get(ti, ())}
        for call in [item.call for item in items if item.call and item.call not in answered]:
            placeholder = block_json(ToolResult(call, NO_RESULT, is_error=True))
            moved.setdefault(ti, []).append(_Item(placeholder, answers=call))
    placed: list[_Turn] = []
    for ti, (role, items) in enumerate(turns):
        kept = [item for item in items if item.answers is None]
        if role == "user":
            kept = moved.get(ti - 1, []) + kept
        placed.append((role, kept))
        if role == "assistant" and ti in moved and (ti + 1 == len(turns) or turns[ti + 1][0] != "user"):
            placed.append(("user", moved[ti]))
    return _merged([(role, item) for role, items in placed for item in items])


def _turn_json(role: str, items: list[_Item], rest: list[Message]) -> dict[str, Any]:
    blocks = [item.api for item in items]
    first = items[0].src
    if first is not None:
        m = rest[first[0]]
        if [item.src for item in items] == _source_turn(rest, first[0]):
            # The turn is exactly one source turn: give back its own form and extra keys.
            content: Any = blocks
            if m.meta.get(FORM) == "string" and len(blocks) == 1 and isinstance(blocks[0], dict) \
                    and blocks[0].get("type") == "text" and set(blocks[0]) == {"type", "text"}:
                content = blocks[0]["text"]
            return {"role": role, "content": content, **m.meta.get(EXTRA, {})}
    return {"role": role, "content": blocks}


def _source_turn(rest: list[Message], start: int) -> list[tuple[int, int] | None]:
    """The (message, block) positions of the API turn message `start` was read from: its own blocks,
    and those of the messages split from the same turn at worksurface's marks."""
    turn = rest[start].meta.get(TURN)
    end = start + 1
    while turn is not None and end < len(rest) and rest[end].meta.get(TURN) == turn:
        end += 1
    return [(k, j) for k in range(start, end) for j in range(len(rest[k].blocks))]
