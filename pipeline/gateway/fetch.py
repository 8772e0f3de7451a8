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
from .apis import FETCH_TOOL, Api, OddAnswer, Watch, dumps
from .upstream import UpstreamResponse, UpstreamUnavailable

MAX_FETCH_ROUNDS = 4
# Responses output items that are calls of a client's own tool.
CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "computer_call", "mcp_call"})


@dataclass(frozen=True)
class FetchCall:
    """One call the model made: `input` as it gave it (fetch answers a non-object with an error)."""

    call_id: str
    input: Any

    @property
    def artifact(self) -> str | None:
        """The artifact id asked for, when the input names one (for the log)."""
        wanted = self.input.get("id") if isinstance(self.input, dict) else None
        return wanted[:200] if isinstance(wanted, str) else None


@dataclass
class Round:
    turn: Any
    calls: list[FetchCall]


Answered = list[tuple[Round, list[str]]]        # each round with its results' texts, in call order
FollowUp = Callable[[Round], Awaitable[UpstreamResponse]]
OnUsage = Watch


def arguments(text: Any) -> Any:
    """A call's arguments as the model gave them: the JSON they hold, or the text itself when it is
    none (fetch answers anything but an object with an error result)."""
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# --- Chat Completions ------------------------------------------------------------------------------

def _is_fetch_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return isinstance(function, dict) and function.get("name") == FETCH_TOOL


def chat_round(doc: Any) -> Round | None:
    """The round to answer in a whole response: its model called fetch_artifact and nothing else."""
    choices = doc.get("choices") if isinstance(doc, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list) or not calls or not all(_is_fetch_call(c) for c in calls):
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
        state = _ChatRound(may_follow=round_number < MAX_FETCH_ROUNDS)
        try:
            async for event in sse.events(response.chunks()):
                on_usage.usage_of(lambda: api.usage_of_event(event))
                try:
                    out = state.relay(event)
                except Exception as exc:    # not understood: it goes on as it came
                    on_usage.odd(f"a chunk: {type(exc).__name__}: {exc}")
                    out = None if state.follow else event.raw
                if out is not None:
                    yield out
        finally:
            await response.close()
        if not state.follow:
            return
        try:
            response = await fetch(state.round())
        except UpstreamUnavailable as exc:
            on_usage.follow_up_failed(str(exc))
            return
        if response.status >= 400:
            await response.close()
            return


@dataclass
class _ChatRound:
    """One upstream response of a Chat Completions stream: its tool calls as they build up, those the
    client sees renumbered from 0, and whether the gateway answers this round itself (`follow`)."""

    may_follow: bool
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    hidden: set[int] = field(default_factory=set)
    shown: dict[int, int] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    follow: bool = False

    def relay(self, event: sse.Event) -> bytes | None:
        """The chunk as the client gets it (None: nothing for the client)."""
        data = event.data()
        choices = data.get("choices") if isinstance(data, dict) else None
        if self.follow or not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            # After the follow-up is decided, the rest (usage, [DONE]) belongs to a round the client never sees.
            return None if self.follow else event.raw
        choice = choices[0]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return event.raw
        content = delta.get("content")
        self.text.append(content if isinstance(content, str) else "")
        calls = delta.get("tool_calls")
        out = self._calls(calls) if isinstance(calls, list) and calls else None
        if out == calls:
            out = None                  # the client's own calls, numbered as they came: nothing to say
        if choice.get("finish_reason") == "tool_calls" and self.hidden and not self.shown:
            if self.may_follow:
                self.follow = True
                return None
            choice = {**choice, "finish_reason": "stop"}     # only fetch calls, answered no more
        if out is None and choice is choices[0]:
            return event.raw
        if out is None and isinstance(calls, list) and calls:
            out = calls
        delta = {k: v for k, v in delta.items() if k != "tool_calls"} | ({"tool_calls": out} if out else {})
        if not delta and choice.get("finish_reason") is None and len(choices) == 1:
            return None                 # a piece of a hidden call
        return sse.encode(None, {**data, "choices": [{**choice, "delta": delta}, *choices[1:]]})

    def _calls(self, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Folds the chunk's call pieces in; returns the client's pieces, renumbered."""
        out = []
        for part in parts:
            if not isinstance(part, dict) or not isinstance(part.get("index", 0), int):
                raise OddAnswer(f"a tool call piece is {type(part).__name__}, not a call with an index")
            i = part.get("index", 0)
            call = self.calls.setdefault(i, {"id": "", "name": "", "arguments": ""})
            function = part.get("function")
            function = function if isinstance(function, dict) else {}
            ident = part.get("id")
            if isinstance(ident, str) and ident:
                call["id"] = ident
            call["name"] += _text(function.get("name"))
            call["arguments"] += _text(function.get("arguments"))
            if i not in self.hidden and i not in self.shown:
                if call["name"] == FETCH_TOOL:
                    self.hidden.add(i)
                else:
                    self.shown[i] = len(self.shown)
            if i in self.shown:
                out.append({**part, "index": self.shown[i]})
        return out

    def round(self) -> Round:
        """The model's turn and its fetch calls, to answer."""
        turn = {"role": "assistant", "content": "".join(self.text) or None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(self.calls.items())]}
        return Round(turn, [FetchCall(self.calls[i]["id"], arguments(self.calls[i]["arguments"]))
                            for i in sorted(self.hidden)])


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


async def responses_stream(api: Api, response: UpstreamResponse, fetch: FollowUp, on_usage: OnUsage) -> AsyncIterator[bytes]:
    """A Responses stream with fetch calls hidden and answered: the follow-up's items continue the
    client's output numbering, and `response.completed` lists the items the client was given."""
    output = _ResponsesOutput()
    for round_number in range(MAX_FETCH_ROUNDS + 1):
        output.begin_round(round_number)
        follow = False
        try:
            async for event in sse.events(response.chunks()):
                data = event.data()
                kind = data.get("type") if isinstance(data, dict) else None
                if kind == "response.completed":
                    on_usage.usage_of(lambda: api.usage_of_event(event))
                    if output.follows_up():
                        follow = True
                        break
                try:
                    out = output.relay(event, data, kind)
                except Exception as exc:    # not understood: it goes on as it came
                    on_usage.odd(f"{kind or 'an event'}: {type(exc).__name__}: {exc}")
                    out = event.raw
                if out is not None:
                    yield out
        finally:
            await response.close()
        if not follow:
            return
        try:
            response = await fetch(output.round())
        except UpstreamUnavailable as exc:
            on_usage.follow_up_failed(str(exc))
            return
        if response.status >= 400:
            await response.close()
            return


class _ResponsesOutput:
    """The output items of a Responses stream as the client sees them, across the gateway's rounds: fetch
    calls hidden, the others numbered on, every round named after the first round's response."""

    def __init__(self) -> None:
        self.next_index = 0
        self.given: list[Any] = []
        self.first_id: Any = None
        self.begin_round(0)

    def begin_round(self, number: int) -> None:
        self.number = number
        self.hidden: set[int] = set()
        self.items: dict[int, Any] = {}     # output index -> the item, when done
        self.mapping: dict[int, int] = {}
        self.client_calls = False

    def follows_up(self) -> bool:
        """The model called fetch_artifact alone: the gateway answers and asks again."""
        return bool(self.hidden) and not self.client_calls and self.number < MAX_FETCH_ROUNDS

    def relay(self, event: sse.Event, data: Any, kind: Any) -> bytes | None:
        """The event as the client gets it (None: nothing for the client)."""
        if kind in ("response.created", "response.in_progress") and self.number:
            return None                     # the client's response began with the first round
        if kind == "response.created":
            response = data.get("response")
            self.first_id = response.get("id") if isinstance(response, dict) else None
        index = data.get("output_index") if isinstance(data, dict) else None
        if isinstance(index, int):
            return self._item_event(event, data, kind, index)
        if kind == "response.completed" and (self.number or self.hidden):
            if not isinstance(data.get("response"), dict):
                raise OddAnswer("response.completed carries no response object")
            body = dict(data["response"])
            body["output"] = self.given
            if self.first_id is not None:
                body["id"] = self.first_id
            return sse.encode(event.name, {**data, "response": body})
        return event.raw

    def _item_event(self, event: sse.Event, data: dict[str, Any], kind: Any, index: int) -> bytes | None:
        item = data.get("item")
        if kind == "response.output_item.added":
            if _is_fetch_item(item):
                self.hidden.add(index)
            else:
                self.client_calls |= isinstance(item, dict) and item.get("type") in CALL_ITEMS
                self.mapping[index] = self.next_index
                self.next_index += 1
        if kind == "response.output_item.done":
            self.items[index] = item
            if index not in self.hidden:
                self.given.append(item)
        if index in self.hidden:
            return None
        client = self.mapping.get(index, index)
        return event.raw if client == index else sse.encode(event.name, {**data, "output_index": client})

    def round(self) -> Round:
        """The model's turn and its fetch calls, to answer."""
        turn = [self.items[i] for i in sorted(self.items)]
        return Round(turn, [FetchCall(str(self.items[i].get("call_id")), arguments(self.items[i].get("arguments")))
                            for i in sorted(self.hidden) if i in self.items])
