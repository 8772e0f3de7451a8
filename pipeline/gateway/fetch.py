"""fetch_artifact on the OpenAI APIs (Chat Completions and Responses): the model's calls to it are
answered by the gateway, which asks the upstream again with the artifact's content and hands the
client the answer; the client never sees the call or its result. As on Anthropic Messages
(relay.py): a fetch made beside the client's own tool calls is dropped instead (its result would have
to travel in the client's next turn, which knows nothing of it), and a model that keeps fetching is
answered MAX_FETCH_ROUNDS times in one call. Words the model streamed in a round it spent fetching
have reached the client already; in a whole (non-streamed) response only the last round is given.

A round: `Round(turn, calls)`, the model's output to send back to it (the assistant message, or the
Responses output items) and its fetch calls; `follow_up` is the forwarded request again with every
round answered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from . import sse
from .apis import FETCH_TOOL, Api, Usage, dumps
from .upstream import UpstreamResponse

MAX_FETCH_ROUNDS = 4
# Responses output items that are calls of a client's own tool.
CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "computer_call", "mcp_call"})


@dataclass(frozen=True)
class FetchCall:
    call_id: str
    input: dict[str, Any]


@dataclass
class Round:
    turn: Any
    calls: list[FetchCall]


Answered = list[tuple[Round, list[str]]]        # each round with its results' texts, in call order
FollowUp = Callable[[Round], Awaitable[UpstreamResponse]]
OnUsage = Callable[[Usage], None]


def arguments(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# --- Chat Completions ------------------------------------------------------------------------------

def _is_fetch_call(call: Any) -> bool:
    return isinstance(call, dict) and (call.get("function") or {}).get("name") == FETCH_TOOL


def chat_round(doc: Any) -> Round | None:
    """The round to answer in a whole response: its model called fetch_artifact and nothing else."""
    choice = (doc.get("choices") or [None])[0] if isinstance(doc, dict) else None
    message = choice.get("message") if isinstance(choice, dict) else None
    calls = (message or {}).get("tool_calls") or []
    if not calls or not all(_is_fetch_call(c) for c in calls):
        return None
    return Round(message, [FetchCall(str(c.get("id")), arguments(c["function"].get("arguments"))) for c in calls])


def chat_body(doc: Any) -> Any:
    """A whole response without fetch calls (a finish on them alone becomes a plain stop)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        return doc
    choices = []
    for choice in doc["choices"]:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(calls, list) and any(_is_fetch_call(c) for c in calls):
            kept = [c for c in calls if not _is_fetch_call(c)]
            message = {k: v for k, v in message.items() if k != "tool_calls"} | ({"tool_calls": kept} if kept else {})
            choice = {**choice, "message": message, **({} if kept else {"finish_reason": "stop"})}
        choices.append(choice)
    return {**doc, "choices": choices}


def chat_follow_up(doc: dict[str, Any], answered: Answered) -> bytes:
    messages = list(doc.get("messages") or [])
    for done, results in answered:
        messages.append(done.turn)
        messages += [{"role": "tool", "tool_call_id": c.call_id, "content": r} for c, r in zip(done.calls, results)]
    return dumps({**doc, "messages": messages})


async def chat_stream(api: Api, response: UpstreamResponse, fetch: FollowUp, on_usage: OnUsage) -> AsyncIterator[bytes]:
    """A Chat Completions stream with fetch calls hidden and answered (the client's own calls keep
    their order, numbered from 0)."""
    for round_number in range(MAX_FETCH_ROUNDS + 1):
        calls: dict[int, dict[str, str]] = {}
        hidden: set[int] = set()
        shown: dict[int, int] = {}
        text: list[str] = []
        follow = False
        try:
            async for event in sse.events(response.chunks()):
                data = event.data()
                choices = data.get("choices") if isinstance(data, dict) else None
                usage = api.usage_of_event(event)
                if usage is not None:
                    on_usage(usage)
                if follow or not choices:
                    if not follow:
                        yield event.raw
                    continue
                choice = choices[0]
                delta = choice.get("delta") or {}
                text.append(delta.get("content") or "")
                out = None
                if delta.get("tool_calls"):
                    out = []
                    for part in delta["tool_calls"]:
                        i = part.get("index", 0)
                        call = calls.setdefault(i, {"id": "", "name": "", "arguments": ""})
                        function = part.get("function") or {}
                        call["id"] = part.get("id") or call["id"]
                        call["name"] += function.get("name") or ""
                        call["arguments"] += function.get("arguments") or ""
                        if i not in hidden and i not in shown:
                            if call["name"] == FETCH_TOOL:
                                hidden.add(i)
                            else:
                                shown[i] = len(shown)
                        if i in shown:
                            out.append({**part, "index": shown[i]})
                finish = choice.get("finish_reason")
                if finish == "tool_calls" and hidden and not shown and round_number < MAX_FETCH_ROUNDS:
                    follow = True           # the rest (usage, [DONE]) belongs to a round the client never sees
                    continue
                if finish == "tool_calls" and not shown:
                    choice = {**choice, "finish_reason": "stop"}
                if out is None and choice is choices[0]:
                    yield event.raw
                    continue
                delta = {k: v for k, v in delta.items() if k != "tool_calls"} | ({"tool_calls": out} if out else {})
                if not delta and choice.get("finish_reason") is None and len(choices) == 1:
                    continue                # a piece of a hidden call: nothing for the client
                yield sse.encode(None, {**data, "choices": [{**choice, "delta": delta}, *choices[1:]]})
        finally:
            await response.close()
        if not follow:
            return
        turn = {"role": "assistant", "content": "".join(text) or None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())]}
        response = await fetch(Round(turn, [FetchCall(calls[i]["id"], arguments(calls[i]["arguments"]))
                                            for i in sorted(hidden)]))
        if response.status >= 400:
            await response.close()
            return


# --- Responses --------------------------------------------------------------------------------------

def _is_fetch_item(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") == FETCH_TOOL


def responses_round(doc: Any) -> Round | None:
    output = doc.get("output") if isinstance(doc, dict) else None
    if not isinstance(output, list):
        return None
    fetches = [i for i in output if _is_fetch_item(i)]
    if not fetches or any(isinstance(i, dict) and i.get("type") in CALL_ITEMS and not _is_fetch_item(i) for i in output):
        return None
    return Round(output, [FetchCall(str(i.get("call_id")), arguments(i.get("arguments"))) for i in fetches])


def responses_body(doc: Any) -> Any:
    if not isinstance(doc, dict) or not isinstance(doc.get("output"), list):
        return doc
    return {**doc, "output": [i for i in doc["output"] if not _is_fetch_item(i)]}


def responses_follow_up(doc: dict[str, Any], answered: Answered) -> bytes:
    items = list(doc.get("input") or [])
    for done, results in answered:
        items += list(done.turn)
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": r} for c, r in zip(done.calls, results)]
    return dumps({**doc, "input": items})


@dataclass
class _ResponsesRound:
    hidden: set[int] = field(default_factory=set)
    items: dict[int, Any] = field(default_factory=dict)     # output index -> the item, when done
    client_calls: bool = False


async def responses_stream(api: Api, response: UpstreamResponse, fetch: FollowUp, on_usage: OnUsage) -> AsyncIterator[bytes]:
    """A Responses stream with fetch calls hidden and answered: the follow-up's items continue the
    client's output numbering, and `response.completed` lists the items the client was given."""
    next_index = 0
    given: list[Any] = []
    first_id: Any = None        # the response the client is told of: every round's is named after it
    for round_number in range(MAX_FETCH_ROUNDS + 1):
        state = _ResponsesRound()
        mapping: dict[int, int] = {}
        follow = False
        try:
            async for event in sse.events(response.chunks()):
                data = event.data()
                kind = data.get("type") if isinstance(data, dict) else None
                if kind in ("response.created", "response.in_progress") and round_number:
                    continue                    # the client's response began with the first round
                if kind == "response.created":
                    first_id = (data.get("response") or {}).get("id")
                index = data.get("output_index") if isinstance(data, dict) else None
                if isinstance(index, int):
                    item = data.get("item")
                    if kind == "response.output_item.added":
                        if _is_fetch_item(item):
                            state.hidden.add(index)
                        else:
                            state.client_calls |= isinstance(item, dict) and item.get("type") in CALL_ITEMS
                            mapping[index] = next_index
                            next_index += 1
                    if kind == "response.output_item.done":
                        state.items[index] = item
                        if index not in state.hidden:
                            given.append(item)
                    if index in state.hidden:
                        continue
                    client = mapping.get(index, index)
                    yield event.raw if client == index else sse.encode(event.name, {**data, "output_index": client})
                    continue
                if kind == "response.completed":
                    usage = api.usage_of_event(event)
                    if usage is not None:
                        on_usage(usage)
                    if state.hidden and not state.client_calls and round_number < MAX_FETCH_ROUNDS:
                        follow = True
                        break
                    if round_number or state.hidden:
                        body = dict(data.get("response") or {})
                        body["output"] = given
                        if first_id is not None:
                            body["id"] = first_id
                        yield sse.encode(event.name, {**data, "response": body})
                        continue
                yield event.raw
        finally:
            await response.close()
        if not follow:
            return
        turn = [state.items[i] for i in sorted(state.items)]
        response = await fetch(Round(turn, [FetchCall(str(state.items[i].get("call_id")),
                                                      arguments(state.items[i].get("arguments")))
                                            for i in sorted(state.hidden) if i in state.items]))
        if response.status >= 400:
            await response.close()
            return
