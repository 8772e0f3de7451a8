"""The contract between the graph and its parts: how a stage and a reinjector declare themselves
(`Stage`, `Reinjector`), the typed per-call context they share, the graph state and the reports.

A stage reads the current view and decides new edits; the core applies and stores them, so a stage
never touches the session and never imports another stage. A reinjector returns the messages that
rebuild one part of the working surface after a compaction. Each module of stages/ and reinjectors/
ends with its declaration (`STAGE` / `REINJECTOR`): its name, its config section (by type), its
trigger, the context fields it reads and the per-call inputs it takes; the graph composes them from
those declarations alone. All of them share one frozen `StageContext`, passed as LangGraph's run
context (`context_schema`); what a single part needs travels in `StageContext.inputs` under the type
its declaration names, never through a loose dict.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, field, fields
from typing import (TYPE_CHECKING, Annotated, Any, Callable, Generic, NotRequired, Protocol, Sequence, TypedDict,
                    TypeVar, overload)

from pydantic import BaseModel

from ..core.config import Config, ReinjectConfig
from ..core.edits import Edit
from ..core.errors import ConfigError
from ..core.model import Message
from ..core.tokens import TokenCounter

if TYPE_CHECKING:
    from ..ledger import Ledger
    from .pricing import CallStats
    from ..core.usage import Calibration
    from ..status.publish import PublisherState
    from ..status.snapshot import Snapshot

T = TypeVar("T")
C = TypeVar("C", bound=BaseModel)
C_contra = TypeVar("C_contra", bound=BaseModel, contravariant=True)


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


@dataclass(frozen=True)
class StatusInputs:
    """The status bar as this call sees it: the reduced snapshot, the publisher's state, and the
    snapshot as it will be once the view has a given size (the baseline after a compaction)."""

    snapshot: Snapshot
    publisher: PublisherState
    resized: Callable[[int], Snapshot]


@dataclass(frozen=True)
class StatusUpdate:
    """A new status epoch started by the status reinjector: the publisher's next state and the ids of
    the previous epoch's status messages to remove from the view."""

    publisher: PublisherState
    remove_ids: tuple[str, ...] = ()
    # The view's size the new baseline reports.
    tokens: int | None = None


class StageInputs:
    """What single stages and reinjectors take on a call beyond the shared context, one object per
    type their declarations name (`Stage.needs`, `Stage.memory`, `Reinjector.needs`): the session
    builds it for each call, a part reads its own with `ctx.inputs.get(TheType)`."""

    __slots__ = ("_by_type",)

    def __init__(self, *items: object) -> None:
        self._by_type: dict[type, object] = {type(item): item for item in items}

    @overload
    def get(self, kind: type[T]) -> T | None: ...
    @overload
    def get(self, kind: type[T], default: T) -> T: ...

    def get(self, kind: type[T], default: T | None = None) -> T | None:
        """The input of this type, else `default` (None: the caller supplied none, a part does without)."""
        item = self._by_type.get(kind)
        return item if isinstance(item, kind) else default

    def types(self) -> frozenset[type]:
        return frozenset(self._by_type)


@dataclass(frozen=True)
class StageContext:
    """What every stage and reinjector may use besides the view; built once per call by the session.
    Fields only one part reads do not belong here: that part declares an input type and reads it
    from `inputs`."""

    config: Config
    counter: TokenCounter
    artifacts: ArtifactSink
    now: float
    # Seconds since the previous call; None on the first call (nothing cached yet).
    idle_seconds: float | None = None
    # A manual compaction (`Session.compact`, `--force`): every stage runs, autocompact fires whatever the size.
    forced: bool = False
    # The session's current epoch: a compaction starts the next one, and its summary, boundary and
    # reinjected messages all name that one.
    epoch: int = 1
    # Ids a stage must leave alone: the newest user message and everything after the last assistant turn.
    protected: frozenset[str] = frozenset()
    # Tokens the view costs beyond its counted text: the harness's measured usage anchor and the
    # status publication planned after the graph. Every trigger compares against the sum.
    token_offset: int = 0
    # How the harness's measured size relates to the counted one (fixed part + tokenizer ratio), when
    # the call is anchored on measured usage: after a compaction the offset is this, not the constant
    # taken at the old, longer context (whose tokenizer difference alone can exceed the target).
    calibration: Calibration | None = None
    anchor_counted: int = 0  # the counted size the call's offset was taken at
    # The live transcript as the harness sent it (original content, before any clearing).
    transcript: Sequence[Message] = ()
    # User text typed while the agent was busy, as (after message id, text): user input too.
    queued_inputs: Sequence[tuple[str | None, str]] = ()
    # The session's working-state ledger, updated with every message before the graph runs.
    ledger: Ledger | None = None
    # Cache economics (worksurface.engine.pricing). The session so far: model calls made before this one and
    # the transcript's mean growth per call; None: read off `transcript` (each assistant turn = a call).
    call_stats: CallStats | None = None
    # Transcript ids no earlier call sent (new since the previous view): ingestion reduces only
    # these, and an edit re-bills only the others. None: the transcript's last assistant turn on.
    unsent_ids: frozenset[str] | None = None
    # Each part's own inputs for this call (see `StageInputs`).
    inputs: StageInputs = field(default_factory=StageInputs)


CONTEXT_FIELDS = frozenset(f.name for f in fields(StageContext))


def cache_is_cold(ctx: StageContext) -> bool:
    """Whether the provider's prompt cache has expired since the previous call (idle past its TTL):
    the whole prefix is billed again whatever a stage edits."""
    return ctx.idle_seconds is not None and ctx.idle_seconds >= ctx.config.microcompact.cache_ttl_seconds


def tokenizer_ratio(ctx: StageContext) -> float:
    """Measured tokens per counted token (1.0 without a calibration): budgets in the provider's
    tokens are divided by it to get counted tokens."""
    return ctx.calibration.ratio if ctx.calibration is not None else 1.0


def counted_target(ctx: StageContext) -> int:
    """The post-compact target in counted tokens: the measured target less what the harness sends
    beyond the messages, over the tokenizer ratio."""
    target = ctx.config.post_compact_target
    if ctx.calibration is None:
        return target
    return max(0, int((target - ctx.calibration.fixed) / ctx.calibration.ratio))


def view_offset(ctx: StageContext, counted: int, compacted: bool) -> int:
    """Tokens to add to a view's counted size: the call's offset, or after a compaction the
    calibrated one for the new, smaller view."""
    if compacted and ctx.calibration is not None:
        return ctx.calibration.offset(counted) + (ctx.token_offset - ctx.calibration.offset(ctx.anchor_counted))
    return ctx.token_offset


@dataclass
class StageResult:
    """What a stage decided: its edits in the order they apply (a Sequence, so a stage can return a
    list of one edit kind), its report, and the call ids it cleared for providers that delete them."""

    edits: Sequence[Edit]
    report: StageReport
    cache_edits: list[str] = field(default_factory=list)


@dataclass
class Reinjection:
    """What a reinjector adds after a compaction; `status` only from the status reinjector."""

    messages: list[Message]
    report: StageReport
    status: StatusUpdate | None = None


class PipelineState(TypedDict):
    """LangGraph state. Lists with reducers accumulate across nodes within one call."""

    view: list[Message]
    tokens: int
    edits: Annotated[list[Edit], operator.add]
    reports: Annotated[list[StageReport], operator.add]
    cache_edits: Annotated[list[str], operator.add]
    compacted: bool
    status_update: NotRequired[StatusUpdate | None]


class StageRun(Protocol[C_contra]):
    """A stage's decision: edits for the view in `state`; `config` is the stage's own section."""

    def __call__(self, state: PipelineState, config: C_contra, ctx: StageContext, /) -> StageResult: ...


class StageDecline(Protocol[C_contra]):
    """A cheap decision without side effects: the stage's skipped result when it would not edit on
    this call, None when it would (then only `run` decides what)."""

    def __call__(self, state: PipelineState, config: C_contra, ctx: StageContext, /) -> StageResult | None: ...


class ReinjectorRun(Protocol):
    """Messages restoring one part of the working surface that the view does not already show,
    within `budget` tokens (worksurface's tokenizer)."""

    def __call__(self, view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int, /) -> Reinjection: ...


def section_name(kind: type[BaseModel]) -> str:
    """The field of Config whose type is `kind` (ConfigError unless exactly one is): a part declares
    its config by type, not by name."""
    names = [name for name, f in Config.model_fields.items() if f.annotation is kind]
    if len(names) != 1:
        raise ConfigError(f"{kind.__name__} is not one section of Config (found {names or 'none'})")
    return names[0]


def _no_trigger(config: Config) -> int:
    return 0


@dataclass(frozen=True)
class Stage(Generic[C]):
    """A reducing stage as its module declares it (`STAGE`, at the end of each module of stages/).

    `trigger` is the view size (the call's tokens) at or below which the stage cannot fire: once the
    view is under the trigger of every stage after the current one, the graph ends (0: it may fire on
    any call, so it always gets its turn). `reads` names the `StageContext` fields it reads (through
    the engine's helpers too; a test holds it to that)."""

    name: str
    config: type[C]
    run: StageRun[C]
    reads: frozenset[str]
    trigger: Callable[[Config], int] = _no_trigger
    # On a cold cache it may fire at any size (the prefix is billed again anyway).
    fires_when_cold: bool = False
    # Its inputs in `StageContext.inputs`, beyond the shared context.
    needs: tuple[type, ...] = ()
    # A per-session memory the session keeps for it between calls (in `StageContext.inputs`): the
    # stage validates what it finds there and decides exactly as without it.
    memory: Callable[[], object] | None = None
    # For a stage whose run may be costly (a summary may call a model): the quiet-call walk takes
    # only this decision and leaves an edit to the compiled graph.
    decline: StageDecline[C] | None = None


@dataclass(frozen=True)
class Reinjector:
    """A part of the working surface rebuilt after a compaction, as its module declares it
    (`REINJECTOR`, at the end of each module of reinjectors/). Reinjectors run when a call wrote a new
    compact boundary, in their registered order, each within what the ones before it left of the
    post-compact target."""

    name: str
    run: ReinjectorRun
    reads: frozenset[str]
    config: type[ReinjectConfig] = ReinjectConfig
    needs: tuple[type, ...] = ()
    # A part that reports on the rebuilt view (the status baseline): it keeps a claim on the budget
    # up to this cap, reserved first from a dry run, and runs after every other reinjector.
    reserve: Callable[[ReinjectConfig], int] | None = None
