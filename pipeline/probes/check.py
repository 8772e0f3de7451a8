"""Score worksurface's post-compact view against baselines given the same token budget.

The transcript is cut (see `cut.py`), compacted as a forced manual compaction, and every method's view
is scored on the same probes. Baselines get exactly as many tokens as worksurface's view; Claude
Code's real summary, when the cut is its boundary, is scored at whatever size it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..core.config import Config
from ..formats.base import Transcript
from ..core.model import Message
from ..core.tokens import TokenCounter
from ..core.view import live_slice
from ..offline.sizing import OVERFLOW_NOTICE, SizeFlags, prepare_once
from .baselines import BASELINES
from .cut import cut, cut_transcript
from .match import Score, score
from .model import Probe, ProbeError, ProbeSet

WORKSURFACE = "worksurface"
CLAUDE_CODE = "claude-code"
DEFAULT_BASELINES: tuple[str, ...] = (*BASELINES, CLAUDE_CODE)


@dataclass(frozen=True)
class MethodResult:
    view: list[Message]
    tokens: int
    score: Score

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, **self.score.to_json()}


@dataclass
class CheckResult:
    """Tokens of the cut transcript, each method's view and score (worksurface first), and notes on
    baselines that could not run."""

    tokens_before: int
    methods: dict[str, MethodResult]
    notes: list[str] = field(default_factory=list)
    # worksurface's sizes before and after its compaction, counted and as the provider measures
    # (`PrepareReport.sizes`: the unit the compaction acted on, the anchor, the calibration).
    usage: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tokens_before": self.tokens_before,
                             "methods": {k: v.to_json() for k, v in self.methods.items()}}
        if self.usage is not None:
            d["usage"] = self.usage
        if self.notes:
            d["notes"] = list(self.notes)
        return d


def check(transcript: Transcript | Sequence[Message], probes: ProbeSet | Iterable[Probe], *,
          at: str | int | None = None, window: int | None = None, target: int | None = None,
          baselines: Sequence[str] = DEFAULT_BASELINES, counter: TokenCounter | None = None,
          use_usage: bool = True, config: Config | None = None) -> CheckResult:
    """Cut `transcript` at `at`, compact it as `worksurface compact --force` does (forced; `config`,
    default the defaults, with post-compact target `target` and context `window` over it; without a
    window, the one the transcript records) and score worksurface and each named baseline. With
    `use_usage` the size is anchored on the usage the transcript records (worksurface.core.sizes)."""
    unknown = [b for b in baselines if b not in DEFAULT_BASELINES]
    if unknown:
        raise ProbeError(f"unknown baseline(s) {', '.join(unknown)} (known: {', '.join(DEFAULT_BASELINES)})")
    probe_list = list(ProbeSet.of(probes))
    counter = counter if counter is not None else TokenCounter()
    messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
    c = cut(messages, at)
    # Only what the harness still sends takes part: past an earlier compaction, that is its tail.
    live = live_slice(c.before)
    from ..session.session import Session  # LangGraph is slow to import; load it when needed

    before = cut_transcript(transcript, c.before)
    flags = SizeFlags(window=window, target=target, use_usage=use_usage)
    with Session.open(None, config=flags.config(before, config or Config())) as session:
        # A view left over the threshold is scored as compacted: what the harness would be sent.
        # A manual compaction's instructions go to worksurface's compaction at its boundary too.
        prepared = prepare_once(session, before, use_usage=use_usage, force=True, instructions=c.instructions)
    budget = counter.messages(prepared.messages)
    result = CheckResult(counter.messages(live), {}, usage=prepared.report.sizes)
    result.notes += [f"{WORKSURFACE}: {n}" for n in prepared.report.notices if n.startswith(OVERFLOW_NOTICE)]
    result.notes += (prepared.report.sizes or {}).get("usage_notices", [])
    result.methods[WORKSURFACE] = _method(prepared.messages, probe_list, counter)
    for name in baselines:
        if name == CLAUDE_CODE:
            if c.claude_code_view is None:
                result.notes.append(f"{CLAUDE_CODE}: skipped, the cut is not at a Claude Code compact "
                                    "boundary followed by its summary")
            else:
                result.methods[name] = _method(c.claude_code_view, probe_list, counter)
            continue
        try:
            view = BASELINES[name](live, budget, counter)
        except ImportError:
            result.notes.append(f"{name}: skipped, langchain-core is not installed "
                                "(pip install 'worksurface[langchain]')")
            continue
        result.methods[name] = _method(view, probe_list, counter)
    return result


def _method(view: list[Message], probes: Sequence[Probe], counter: TokenCounter) -> MethodResult:
    return MethodResult(view, counter.messages(view), score(view, probes))

