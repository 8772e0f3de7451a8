"""One request's plan: `Session.prepare` on what the client sent, the client's context-management
edits, and the body to forward. Runs in the gateway's worker threads under the conversation's lock."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..core.config import Config
from ..core.errors import ContextOverflowError
from ..core.model import Origin
from ..formats import ownmark
from ..session.session import PrepareReport, Session
from . import context_management as cm_
from .apis import Api
from .registry import Entry, Registry


@dataclass
class Plan:
    """What to forward, and what the response must say about it."""

    body: bytes
    doc: dict[str, Any]
    report: PrepareReport
    applied: list[dict[str, Any]] = field(default_factory=list)
    compaction: str | None = None      # a summary to answer as a `compaction` block
    pause: bool = False                # answer the compaction alone (pause_after_compaction)
    notices: list[str] = field(default_factory=list)

    @property
    def fired(self) -> list[str]:
        return [s.name for s in self.report.stages if not s.skipped and s.items]


def plan_call(api: Api, registry: Registry, entry: Entry, body: Mapping[str, Any], base: Config,
              offer_fetch: bool, now: float | None = None) -> Plan:
    """The plan for one parsed request. Its transcript is read here, reusing the messages the
    conversation's previous request had unchanged (a FormatError: the request is not readable)."""
    session = registry.open(entry)
    with ownmark.keyed(entry.mark_key):
        return _plan(api, registry, entry, session, body, base, offer_fetch, now)


def _plan(api: Api, registry: Registry, entry: Entry, session: Session, body: Mapping[str, Any], base: Config,
          offer_fetch: bool, now: float | None) -> Plan:
    transcript = api.read_doc(body, entry.reuse)
    cm = cm_.parse(body)
    if api.NAME == "anthropic":
        messages = cm_.fold_compaction_blocks(transcript.messages, entry.summaries)
        if messages is not transcript.messages:
            transcript = dataclasses.replace(transcript, messages=messages)
    config = cm_.configure(base, cm, transcript.messages)
    if config != session.config:
        session.config = config
    instructions = cm.compact.instructions if cm is not None and cm.compact is not None else None
    try:    # sized on the usage the store keeps (Entry.record_usage), whichever replica forwarded the last call
        prepared = session.prepare(transcript, now=now, instructions=instructions)
    except ContextOverflowError as exc:
        if exc.prepared is None:
            raise
        prepared = exc.prepared     # the smallest view worksurface could make: the upstream decides
    view, report = prepared.messages, prepared.report
    plan = Plan(b"", {}, report, notices=list(report.notices))
    if cm is not None:
        if cm.clear_tool_uses is not None:
            calls, tokens = cm_.cleared_results(transcript.messages, view, session.counter)
            if cm.clear_tool_uses.clear_tool_inputs and calls:
                view, saved = cm_.clear_tool_inputs(view, calls, cm.clear_tool_uses.clear_tool_inputs, session.counter)
                tokens += saved
            cleared = cm_.cleared_tool_uses(len(calls), tokens)
            plan.applied += [cleared] if cleared else []
        if cm.keep_thinking_turns is not None:
            view, thinking = cm_.clear_thinking(view, cm.keep_thinking_turns, session.counter)
            plan.applied += [thinking] if thinking else []
        if cm.compact is not None and report.boundary:
            summary = next((m.text for m in view if m.origin is Origin.SUMMARY), "")
            if summary:
                plan.compaction, plan.pause = summary, cm.compact.pause
                registry.remember_summary(entry, cm_.summary_key(summary))
    plan.doc = api.build(transcript, view, body, offer_fetch, entry.memo)
    plan.body = entry.encoder.dumps(plan.doc)
    return plan
