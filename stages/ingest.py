"""Ingestion: a new tool result is reduced before it is first sent, when reducing costs nothing.

A result no earlier call has sent is in no provider's cache yet, so replacing it breaks nothing; once
sent, changing it would re-bill everything after it. So this stage looks only at results of messages
new since the previous call, and its decision is sticky: the reduced text is what every later view
shows. Terminal noise goes; for what else goes (JSON items, blobs, the middle of a huge log) the
original is stored as an artifact and the result says how to open it. Runs before budget, which then
sees the reduced size.
"""

from __future__ import annotations

import time

from worksurface.core.config import IngestConfig
from worksurface.core.edits import ReplaceResult, edited_stage
from worksurface.core.model import Origin
from worksurface.engine.pricing import unsent_ids
from worksurface.engine.reduce_output import reduce_output
from worksurface.engine.state import PipelineState, SkipKind, Skipped, Stage, StageContext, StageReport, StageResult
from worksurface.core.toolkinds import call_target, effective_kind
from worksurface.core.view import calls_for, new_messages_start

NAME = "ingest"


def run(state: PipelineState, config: IngestConfig, ctx: StageContext) -> StageResult:
    started = time.perf_counter()
    view, tokens = state["view"], state["tokens"]
    if not config.enabled:
        return _skip(tokens, started, SkipKind.DISABLED, "disabled")
    unsent = ctx.unsent_ids if ctx.unsent_ids is not None else unsent_ids(ctx.transcript or view)
    counter = ctx.counter
    # Only the calls the new results answer, found walking back from the end of the view.
    new_results = [r.call_id for m in view[new_messages_start(view, unsent):] for r in m.tool_results]
    calls = calls_for(view, new_results)
    edits: list[ReplaceResult] = []
    freed = 0
    reduced_by: dict[str, list[str]] = {}
    # New messages sit at the end of the view: walk back only over them.
    for m in reversed(view):
        if m.id not in unsent:
            if m.origin is Origin.CONVERSATION:
                break
            continue
        if m.origin is not Origin.CONVERSATION:
            continue
        for r in m.tool_results:
            if r.images or edited_stage(m, r.call_id) is not None or not r.content:
                continue
            call = calls.get(r.call_id)
            kind = effective_kind(call) if call is not None else "other"
            reduction = reduce_output(r.content, config, lossy=kind not in config.exempt_kinds)
            if reduction.text == r.content:
                continue
            size = counter.block(r)
            text = reduction.text
            artifact_id = None
            if reduction.lossy:
                tool = f"{call.name} {call_target(call)}".strip() if call is not None else "tool"
                artifact = ctx.artifacts.put_artifact(r.content, kind="tool_result",
                                                      meta={"call_id": r.call_id, "tool": call.name if call else None})
                artifact_id = artifact.id
                where = f" at {artifact.path} (open that file to read it)" if artifact.path else ""
                text = (f"[Output of {tool} reduced on arrival ({', '.join(reduction.kinds)}): "
                        f"{size} tokens in full, stored as artifact {artifact.id}{where}.]\n{text}")
            gain = size - counter.text(text)
            if gain < config.min_gain_tokens:
                continue
            freed += gain
            reduced_by[r.call_id] = list(reduction.kinds)
            edits.append(ReplaceResult(NAME, r.call_id, text, artifact=artifact_id, tokens_freed=gain))
    if not edits:
        return _skip(tokens, started, SkipKind.NOTHING_TO_DO, "no new tool result to reduce")
    report = StageReport(NAME, tokens, tokens - freed, items=len(edits), ms=(time.perf_counter() - started) * 1000,
                         details={"reduced": reduced_by})
    return StageResult(list(reversed(edits)), report)


def _skip(tokens: int, started: float, kind: SkipKind, why: str) -> StageResult:
    return StageResult([], StageReport(NAME, tokens, tokens, ms=(time.perf_counter() - started) * 1000,
                                       outcome=Skipped(kind, why)))


# Runs on every call (trigger 0): only results new since the previous call are looked at.
STAGE = Stage(NAME, IngestConfig, run, reads=frozenset({"counter", "artifacts", "unsent_ids", "transcript"}))
