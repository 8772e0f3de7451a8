"""The contract between the graph and its stages: state, context and report types.

A stage is `run(state, config, ctx) -> StageResult`: it reads the current view, decides new edits
and reports. The core applies and stores the edits, so a stage never touches the session directly
and never imports another stage.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Callable, Protocol, Sequence, TypedDict

from .config import Config
from .edits import Edit
from .model import Message
from .tokens import TokenCounter


@dataclass
class StageReport:
    """What one stage or reinjector did on one call."""

    name: str
    tokens_before: int
    tokens_after: int
    items: int = 0
    ms: float = 0.0
    skipped: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ms"] = round(self.ms, 3)
        return d


@dataclass(frozen=True)
class Artifact:
    """Stored original content: `id` fetches it back from the session; `path` is a file a model can open."""

    id: str
    path: str | None
    tokens: int


class ArtifactSink(Protocol):
    def put_artifact(self, content: str, *, kind: str, meta: dict[str, Any] | None = None) -> Artifact: ...


@dataclass
class StageContext:
    """Everything a stage may use besides the view: config, counting, clock, storage, summarizer."""

    config: Config
    counter: TokenCounter
    artifacts: ArtifactSink
    now: float
    idle_seconds: float | None = None
    forced: bool = False
    instructions: str | None = None
    epoch: int = 0
    explicit_snips: Sequence[tuple[tuple[str, ...], str]] = ()
    summarizer: Any = None
    # Filled by the core before the stages run: ids a stage must leave alone (invariant 3).
    protected: frozenset[str] = frozenset()
    consecutive_failures: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageResult:
    edits: list[Edit]
    report: StageReport
    cache_edits: list[str] = field(default_factory=list)


class PipelineState(TypedDict, total=False):
    """LangGraph state. Lists with reducers accumulate across nodes within one call."""

    view: list[Message]
    tokens: int
    edits: Annotated[list[Edit], operator.add]
    reports: Annotated[list[StageReport], operator.add]
    cache_edits: Annotated[list[str], operator.add]
    compacted: bool


Stage = Callable[[PipelineState, Any, StageContext], StageResult]
