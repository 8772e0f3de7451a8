"""A stage that redacts a word from tool results before the model sees them (docs/plugins.md).

Its settings come from `plugins.options.redact` (`word`); the original stays fetchable from the session,
like everything a shipped stage replaces.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from worksurface.core.edits import Edit, ReplaceResult
from worksurface.engine.state import PipelineState, Stage, StageContext, StageReport, StageResult


class RedactConfig(BaseModel):
    """The stage's own settings, validated when a session opens."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    word: str = Field("SECRET", min_length=1, description="A tool result holding this word is replaced.")
    replacement: str = Field("[redacted]", description="What the model sees instead of such a result.")


def run(state: PipelineState, config: RedactConfig, ctx: StageContext) -> StageResult:
    """One edit per tool result that holds the word, outside the protected tail; edits are sticky, so
    a result redacted once stays redacted on every later call (the prompt cache stays warm)."""
    edits: list[Edit] = [ReplaceResult("redact", result.call_id, config.replacement)
                         for message in state["view"] if message.id not in ctx.protected
                         for result in message.tool_results if config.word in result.content]
    return StageResult(edits, StageReport("redact", state["tokens"], state["tokens"], items=len(edits)))


STAGE = Stage("redact", RedactConfig, run, reads=frozenset({"protected"}), after="budget")
