"""Responses on their way back: passed through byte for byte, read only for their usage, and
rewritten only where the gateway must speak for itself (never the model's content):

- a `compaction` block before the model's content, when the client's `compact_20260112` edit fired;
- `context_management.applied_edits`, when the client asked for edits (the final `message_delta` of
  a stream, the top level of a body);
- with `--offer-fetch`, the model's calls to `fetch_artifact`: answered by the gateway, which asks
  the upstream again with the artifact's content and streams on the answer; the client sees neither
  the call nor its result (a call made beside the client's own tools is dropped instead: its result
  would have to travel in the client's next turn, which knows nothing of it).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from . import sse
from .apis import FETCH_TOOL, Api, OddAnswer, Watch, dumps
from .context_management import compaction_block
from .fetch import MAX_FETCH_ROUNDS, Answered, FetchCall, FollowUp, Round
from .upstream import UpstreamResponse, UpstreamUnavailable

@dataclass
class Rewrite:
    """What an Anthropic response must say besides the model's content."""

    compaction: str | None = None
    applied: list[dict[str, Any]] = field(default_factory=list)
    context_management: bool = False        # the client asked: answer applied_edits (maybe empty)
    fetch: FollowUp | None = None           # answers fetch_artifact calls (None: not offered)

    @property
    def needed(self) -> bool:
        return bool(self.compaction or self.context_management or self.fetch)


async def passthrough(api: Api, response: UpstreamResponse, on_usage: Watch) -> AsyncIterator[bytes]:
    """A stream as it comes, its usage read on the way."""
    try:
        async for event in sse.events(response.chunks()):
            on_usage.usage_of(lambda: api.usage_of_event(event))
            yield event.raw
    finally:
        await response.close()


async def anthropic_stream(api: Api, response: UpstreamResponse, rewrite: Rewrite, on_usage: Watch) -> AsyncIterator[bytes]:
    """An Anthropic stream with the rewrites in the module doc. An event worksurface cannot read
    goes to the client as it came (noted once): the stream is never cut by the gateway's parser."""
    blocks = _ClientBlocks(rewrite)
    started = False
    rounds = 0
    while True:
        blocks.begin_round()
        follow = False
        try:
            async for event in sse.events(response.chunks()):
                out: list[bytes] = []
                try:
                    name = event.name
                    if name == "message_start":
                        on_usage.usage_of(lambda: api.usage_of_event(event))
                        if rounds == 0:     # a follow-up's own start is hidden: the client's message began
                            out.append(event.raw)
                        if not started:
                            started = True
                            if rewrite.compaction:
                                out.append(_compaction_events(rewrite.compaction))
                                blocks.shift(1)
                    elif name in _BLOCK_EVENTS:
                        relayed = blocks.relay(event)
                        out += [relayed] if relayed is not None else []
                    elif name == "message_delta" and blocks.follows_up(event, rounds):
                        follow = True
                    elif name == "message_delta":
                        out.append(blocks.final_delta(event))
                    else:
                        out.append(event.raw)
                except Exception as exc:    # not understood: it goes on as it came
                    on_usage.odd(f"{event.name or 'an event'}: {type(exc).__name__}: {exc}")
                    out = [event.raw]
                if follow:
                    break
                for piece in out:
                    yield piece
        finally:
            await response.close()
        if not follow or rewrite.fetch is None:
            return
        rounds += 1
        try:
            response = await rewrite.fetch(blocks.round())
        except UpstreamUnavailable as exc:
            on_usage.follow_up_failed(str(exc))
            return
        if response.status >= 400:
            await response.close()
            return


_BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


class _ClientBlocks:
    """The content blocks of a stream as the client sees them: the gateway's own fetch calls hidden, the
    others numbered on from the blocks of earlier rounds (and after a compaction block)."""

    def __init__(self, rewrite: Rewrite) -> None:
        self.rewrite = rewrite
        self.next_index = 0
        self.begin_round()

    def begin_round(self) -> None:
        self.mapping: dict[int, int] = {}               # upstream block index -> the client's
        self.blocks: dict[int, _Block] = {}
        self.hidden: set[int] = set()
        self.client_tools = False
        self.base = self.next_index                     # the client's index of this round's block 0

    def shift(self, blocks: int) -> None:
        """The gateway's own blocks come first (a compaction block): the upstream's follow them."""
        self.base += blocks
        self.next_index += blocks

    def relay(self, event: sse.Event) -> bytes | None:
        """A block event as the client gets it (None: a hidden block's)."""
        name, data = event.name or "", event.data()
        index = data.get("index") if isinstance(data, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            return event.raw
        assert isinstance(data, dict)
        if name == "content_block_start":
            block = data.get("content_block")
            block = block if isinstance(block, dict) else {}
            self.blocks[index] = _Block(copy.deepcopy(block))
            if self.rewrite.fetch is not None and block.get("type") == "tool_use" and block.get("name") == FETCH_TOOL:
                self.hidden.add(index)
            elif index not in self.mapping:
                # Numbered as the upstream numbers them, less the hidden blocks before, after the earlier rounds'.
                self.client_tools |= block.get("type") in ("tool_use", "server_tool_use")
                self.mapping[index] = self.base + index - sum(1 for h in self.hidden if h < index)
                self.next_index = max(self.next_index, self.mapping[index] + 1)
        elif index in self.blocks:
            self.blocks[index].feed(name, data)
        if index in self.hidden:
            return None
        client = self.mapping.get(index, index)
        return event.raw if client == index else sse.encode(name, {**data, "index": client})

    def follows_up(self, event: sse.Event, rounds: int) -> bool:
        """The model stopped to call fetch_artifact alone: the gateway answers and asks again."""
        data = event.data()
        delta = data.get("delta") if isinstance(data, dict) else None
        stop = delta.get("stop_reason") if isinstance(delta, dict) else None
        return (bool(self.hidden) and not self.client_tools and stop == "tool_use"
                and self.rewrite.fetch is not None and rounds < MAX_FETCH_ROUNDS)

    def final_delta(self, event: sse.Event) -> bytes:
        data = event.data()
        if not self.rewrite.context_management or not isinstance(data, dict):
            return event.raw
        return sse.encode(event.name, {**data, "context_management": {"applied_edits": self.rewrite.applied}})

    def round(self) -> Round:
        """The model's turn and its fetch calls, to answer."""
        turn = [self.blocks[i].done() for i in sorted(self.blocks)]
        calls = [self.blocks[i].done() for i in sorted(self.hidden)]
        return Round(turn, [FetchCall(str(c.get("id")), c.get("input")) for c in calls])


def anthropic_body(api: Api, doc: Any, rewrite: Rewrite) -> Any:
    """A whole Anthropic response with the rewrites (a non-JSON or error body is left alone)."""
    if not isinstance(doc, dict) or doc.get("type") != "message":
        return doc
    out = dict(doc)
    if not isinstance(out.get("content") or [], list):
        raise OddAnswer("the message's content is not a list")
    if rewrite.fetch is not None:
        out["content"] = [b for b in out.get("content") or []
                          if not (isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == FETCH_TOOL)]
    if rewrite.compaction:
        out["content"] = [compaction_block(rewrite.compaction), *(out.get("content") or [])]
    if rewrite.context_management:
        out["context_management"] = {"applied_edits": rewrite.applied}
    return out


def anthropic_round(doc: Any) -> Round | None:
    """The round to answer in a whole response: its model called fetch_artifact and nothing else."""
    content = doc.get("content") if isinstance(doc, dict) else None
    if not isinstance(content, list) or doc.get("stop_reason") != "tool_use":
        return None
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    calls = [b for b in uses if b.get("name") == FETCH_TOOL]
    if not calls or len(calls) < len(uses):
        return None
    return Round(content, [FetchCall(str(b.get("id")), b.get("input")) for b in calls])


def anthropic_follow_up(doc: dict[str, Any], answered: Answered) -> bytes:
    """The forwarded request again, with each answered round: the model's turn and the results."""
    messages = list(doc.get("messages") or [])
    for done, results in answered:
        messages.append({"role": "assistant", "content": done.turn})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.call_id, "content": r}
                                                      for c, r in zip(done.calls, results)]})
    return dumps({**doc, "messages": messages})


def _compaction_events(summary: str) -> bytes:
    return (sse.encode("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "compaction", "content": None}})
            + sse.encode("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "compaction_delta", "content": summary}})
            + sse.encode("content_block_stop", {"type": "content_block_stop", "index": 0}))


class _Block:
    """A content block rebuilt from its stream events (to send the model's turn back to it)."""

    def __init__(self, start: dict[str, Any]) -> None:
        self.block = start
        self.partial = ""

    def feed(self, name: str, data: dict[str, Any]) -> None:
        delta = data.get("delta")
        if name != "content_block_delta" or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        piece = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}.get(kind or "")
        if piece is not None and not isinstance(delta.get(piece, ""), str):
            return                      # not text: the client gets the event as it is; the turn keeps none
        if kind == "text_delta":
            self.block["text"] = str(self.block.get("text", "")) + delta.get("text", "")
        elif kind == "input_json_delta":
            self.partial += delta.get("partial_json", "")
        elif kind == "thinking_delta":
            self.block["thinking"] = str(self.block.get("thinking", "")) + delta.get("thinking", "")
        elif kind == "signature_delta":
            self.block["signature"] = delta.get("signature")

    def done(self) -> dict[str, Any]:
        if self.block.get("type") in ("tool_use", "server_tool_use") and self.partial:
            try:
                self.block["input"] = json.loads(self.partial)
            except ValueError:
                self.block["input"] = {}
            self.partial = ""
        return self.block
