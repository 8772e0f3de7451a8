"""What worksurface's per-call overhead is compared with, each run on the same messages per call.

(a) `recount`: a naive harness that re-encodes every message's text with tiktoken on every call.
(b) `LangChainTrim`: LangChain's `trim_messages` with the same un-memoized tiktoken counter, on
    messages converted to LangChain objects once up front.
(c) `EmptyGraph`: worksurface's graph shape (the five stage nodes, conditional edges, the reinject
    node) with nodes that return nothing; it visits as many nodes as worksurface did on that call,
    so it is the framework's floor for that call.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from worksurface.graph.compose import REINJECT
from worksurface.graph.registry import STAGE_NAMES
from worksurface.core.model import Message, message_text
from worksurface.engine.state import PipelineState, SkipKind
from worksurface.core.tokens import PER_MESSAGE_OVERHEAD, get_encoding



def recount(messages: Sequence[Message]) -> int:
    """Tokens of every message, encoded afresh: what a harness without memoization pays per call."""
    enc = get_encoding()
    return sum(PER_MESSAGE_OVERHEAD + len(enc.encode_ordinary(message_text(m))) for m in messages)


def visited_stages(report: Any) -> int:
    """How many reducing nodes worksurface's graph ran on a call (the rest were skipped by its edges)."""
    return sum(1 for s in report.stages if not s.skipped_as(SkipKind.NOT_RUN))


class LangChainTrim:
    """`trim_messages(strategy="last")` to `max_tokens` over a transcript converted once to LangChain
    messages. Raises ImportError when langchain-core is missing."""

    def __init__(self, messages: Sequence[Message], max_tokens: int) -> None:
        from langchain_core.messages import trim_messages

        from worksurface.integrations.langchain_messages import from_worksurface

        self._trim = trim_messages
        self.max_tokens = max_tokens
        self._lc: list[Any] = []
        self._offsets = [0]  # LangChain messages converted from messages[:i] (a tool message may split)
        for m in messages:
            self._lc.extend(from_worksurface([m]))
            self._offsets.append(len(self._lc))

    def __call__(self, start: int, end: int) -> list[Any]:
        """Trim the converted messages[start:end] (the live part of one call's prefix)."""
        history = self._lc[self._offsets[start]:self._offsets[end]]
        return self._trim(history, max_tokens=self.max_tokens, token_counter=_tiktoken_count,
                          strategy="last", start_on="human", include_system=True, allow_partial=False)


def _tiktoken_count(messages: Sequence[Any]) -> int:
    enc = get_encoding()
    return sum(PER_MESSAGE_OVERHEAD + len(enc.encode_ordinary(_lc_text(m))) for m in messages)


def _lc_text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        parts = [content]
    else:
        parts = [p if isinstance(p, str) else str(p.get("text") or p.get("thinking") or "") for p in content]
    for call in getattr(message, "tool_calls", None) or ():
        parts.append(f"{call['name']} {json.dumps(call['args'], sort_keys=True, ensure_ascii=False)}")
    return "\n".join(parts)


class EmptyGraph:
    """A compiled graph of worksurface's shape whose nodes do nothing. `run(view, visits, reinject)`
    walks `visits` stage nodes (and the reinject node when asked), like worksurface's edges did."""

    def __init__(self) -> None:
        graph = StateGraph(PipelineState)
        for name in STAGE_NAMES:
            graph.add_node(name, _empty)
        graph.add_node(REINJECT, _empty)
        graph.add_edge(START, STAGE_NAMES[0])
        for i, name in enumerate(STAGE_NAMES):
            nxt = STAGE_NAMES[i + 1] if i + 1 < len(STAGE_NAMES) else None
            graph.add_conditional_edges(name, _route(i, nxt), [REINJECT, END] + ([nxt] if nxt else []))
        graph.add_edge(REINJECT, END)
        self._graph = graph.compile()

    def run(self, view: list[Message], visits: int, reinject: bool = False) -> dict:
        state = {"view": view, "tokens": 0, "edits": [], "reports": [], "cache_edits": [], "compacted": False}
        return self._graph.invoke(state, config={"configurable": {"visits": visits, "reinject": reinject}})


def _empty(state: PipelineState) -> dict:
    return {}


def _route(index: int, next_name: str | None):
    def route(state: PipelineState, config: RunnableConfig) -> str:
        wanted = config["configurable"]
        if index + 1 >= wanted["visits"] or next_name is None:
            return REINJECT if wanted["reinject"] else END
        return next_name
    return route
