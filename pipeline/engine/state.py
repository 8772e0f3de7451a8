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

import enum
import operator
from dataclasses import asdict, dataclass, field, fields
from typing import (TYPE_CHECKING, Annotated, Any, Callable, Generic, NotRequired, Protocol, Sequence, TypedDict,
                    TypeVar, overload)

from pydantic import BaseModel, ValidationError

from ..core.config import Config, ReinjectConfig
from ..core.edits import Edit
from ..core.errors import ConfigError
from ..core.model import Message
from ..core.tokens import TokenCounter

if TYPE_CHECKING:
    from ..ledger import Ledger
    from .pricing import CallStats
    from ..core.calibration import Calibration
    from ..status.publish import PublisherState
    from ..status.snapshot import Snapshot

T = TypeVar("T")
C = TypeVar("C", bound=BaseModel)
C_contra = TypeVar("C_contra", bound=BaseModel, contravariant=True)


class SkipKind(enum.Enum):
    """Why a stage or reinjector did nothing on a call, as a value a caller can decide on (the reason's
    text is for people: no caller matches it)."""

    NOT_RUN = "not_run"  # the graph did not visit it: under its trigger
    NOTHING_NEW = "nothing_new"  # a repeated call: no stage ran
    DISABLED = "disabled"  # turned off in the configuration
    UNDER_TRIGGER = "under_trigger"  # the view is under the stage's own trigger or threshold
    BELOW_MINIMUM = "below_minimum"  # something to do, but it would free less than the stage's minimum
    NOT_WORTH_IT = "not_worth_it"  # the firing rule (`pricing.decide_edit`) says the edit does not pay
    NOTHING_TO_DO = "nothing_to_do"  # nothing the stage could edit or restore
    BREAKER_OPEN = "breaker_open"  # autocompact stopped trying after consecutive failed compactions
    UNSPECIFIED = "unspecified"  # a report made with only a reason's text (a third-party part)


@dataclass(frozen=True)
class Skipped:
    """The outcome of a part that did nothing: the kind of skip, and the reason the report shows."""

    kind: SkipKind
    reason: str


@dataclass(frozen=True)
class Compacted:
    """The outcome of a compaction: the epoch its summary and boundary name, why it fired, and the view's
    size before and after (the report's details hold the whole boundary)."""

    epoch: int
    reason: str
    pre_tokens: int
    post_tokens: int


Outcome = Skipped | Compacted


@dataclass
class StageReport:
    """What one stage or reinjector did on one call. `outcome` says it as a value (`Skipped` with its
    kind, `Compacted`); `skipped` is the reason's text the JSON report shows. A report made with only
    `skipped` gets `Skipped(UNSPECIFIED, text)`, one made with a `Skipped` outcome gets its text."""

    name: str
    tokens_before: int
    tokens_after: int
    items: int = 0
    ms: float = 0.0
    skipped: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        if self.outcome is None and self.skipped is not None:
            self.outcome = Skipped(SkipKind.UNSPECIFIED, self.skipped)
        elif isinstance(self.outcome, Skipped) and self.skipped is None:
            self.skipped = self.outcome.reason

    def skipped_as(self, kind: SkipKind) -> bool:
        """Whether this part did nothing for this kind of reason."""
        return isinstance(self.outcome, Skipped) and self.outcome.kind is kind

    def edited(self) -> None:
        """Mark a report that began as a skip as one that edited after all (snip's explicit request)."""
        self.outcome = None
        self.skipped = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        del d["outcome"]  # the report's JSON stays what it was: the reason's text in `skipped`
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
    # The part of token_offset that comes from the measured usage (the rest is the planned status).
    usage_offset: int = 0
    # How the harness's measured size relates to the counted one (fixed part + tokenizer ratio), when
    # the call is anchored on measured usage: after a compaction the offset is this, not the one taken
    # at the old, longer context (which holds what the harness cleared or added unseen there).
    calibration: Calibration | None = None
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


@dataclass(frozen=True)
class TextRoom:
    """The counted text a compaction may leave: what the post-compact target holds once the harness's
    fixed part is paid (`room`), and the floor it never goes under (`floor`: autocompact.text_floor of
    the target; once the fixed part leaves less, at least autocompact.text_floor_tokens of the target).
    `floored`: the fixed part leaves less than the floor."""

    room: int
    floor: int
    fixed: int

    @property
    def counted(self) -> int:
        return max(self.room, self.floor)

    @property
    def floored(self) -> bool:
        return self.room < self.floor


def compaction_target(ctx: StageContext, cap: int | None = None) -> int:
    """The post-compact target as the provider measures it, never above `cap`: the size of the view
    being compacted (a compaction asked of a view already under the target must not grow it)."""
    target = ctx.config.post_compact_target
    return target if cap is None else max(0, min(target, cap))


def text_room(ctx: StageContext, reserved: int = 0, cap: int | None = None) -> TextRoom:
    """The post-compact target in counted tokens (`reserved` counted tokens of it already taken, e.g.
    by the system prefix the view keeps; `cap` as in `compaction_target`): the measured target less
    what the harness sends beyond the messages, over the tokenizer ratio, and never under the floor."""
    target = compaction_target(ctx, cap)
    ratio = tokenizer_ratio(ctx)
    config = ctx.config.autocompact
    floor = int(config.text_floor * target / ratio)
    if ctx.calibration is None:
        return TextRoom(max(0, target - reserved), floor, 0)
    room = max(0, ctx.calibration.counted_for(target) - reserved)
    if room < floor:
        # The target is out of reach already: a share of a small one is no summary (a quarter of 4k is
        # 1k), so the text keeps text_floor_tokens of the target, counted with what was reserved.
        floor = max(floor, int(min(config.text_floor_tokens, target) / ratio) - reserved)
    return TextRoom(room, floor, ctx.calibration.fixed)


def effective_target(ctx: StageContext, cap: int | None = None) -> int:
    """The post-compact target as the provider measures it (`compaction_target`), raised to the size
    of a view that holds the text floor when the fixed part leaves less: what reinjection may fill up to."""
    room = text_room(ctx, cap=cap)
    target = compaction_target(ctx, cap)
    return max(target, measured_size(ctx, room.counted, compacted=True)) if room.floored else target


def view_offset(ctx: StageContext, counted: int, compacted: bool, measured_over: int | None = None) -> int:
    """Tokens to add to a view's counted size for its measured size: the call's offset, or after a
    compaction the calibrated one for the new, smaller view plus the planned status. The offset taken
    at the old context never carries over (it holds what the harness cleared there, or sent unseen),
    and a size is never negative. `measured_over`: the counted size of the view the usage offset was
    measured over, when the caller knows it; a view the stages cut to under half of it is sized as a
    compacted one (`usage_outlived`)."""
    offset = ctx.token_offset
    if (compacted or usage_outlived(counted, measured_over)) and ctx.calibration is not None:
        offset = ctx.calibration.offset(counted) + (ctx.token_offset - ctx.usage_offset)
    return max(-counted, offset)


def usage_outlived(counted: int, measured_over: int | None) -> bool:
    """Whether the stages took out most of the view the usage offset was measured over (a huge tool
    result budgeted): the offset, then mostly the tokenizers' difference over what is gone, no longer
    describes what is left (a 200 MB result measured 8% under its count left a view measured at
    minus millions)."""
    return measured_over is not None and counted * 2 < measured_over


def measured_size(ctx: StageContext, counted: int, compacted: bool, measured_over: int | None = None) -> int:
    """A view's size as the provider measures it (the count when nothing was measured): worksurface's
    count plus the provider's offset, recalibrated for a view a compaction made smaller, or (knowing
    `measured_over`, the counted size the usage was measured over) one the stages cut to under half of it."""
    return counted + view_offset(ctx, counted, compacted, measured_over)


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
    # The counted size of the view the call's usage offset was measured over (see `view_offset`).
    measured_over: NotRequired[int]
    # The stage the compiled graph starts at (a walk handed the call over there; default the first).
    start_at: NotRequired[str]
    # That stage's decision, when the walk made it before handing over (applied, not decided again).
    decided: NotRequired[StageResult | None]


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
    names = _fields_of_type(kind)
    if len(names) != 1:
        raise ConfigError(f"{kind.__name__} is not one section of Config (found {names or 'none'})")
    return names[0]


def own_section(kind: type[BaseModel]) -> str | None:
    """The field of Config whose type is `kind`, or None when it is no section of Config (a
    third-party part's own type: its settings are `plugins.options.<its name>`)."""
    names = _fields_of_type(kind)
    return names[0] if len(names) == 1 else None


def _fields_of_type(kind: type[BaseModel]) -> list[str]:
    return [name for name, f in Config.model_fields.items() if f.annotation is kind]


def part_config(config: Config, kind: type[C], name: str) -> C:
    """The settings of the part `name` whose config type is `kind`: its section of Config, or for a
    third-party type `plugins.options.<name>` validated by it (ConfigError naming that key)."""
    section = own_section(kind)
    if section is not None:
        value: C = getattr(config, section)
        return value
    try:
        return kind.model_validate(config.plugins.options.get(name, {}))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"plugins.options.{name}: invalid settings for {kind.__name__}: {problems}") from None


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
    # Where a third-party stage runs: right after the stage of this name (after any other added
    # stage already placed there). The shipped stages are listed in order and leave it None.
    after: str | None = None


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
    # Where a third-party reinjector runs: right after the reinjector of this name; None: after
    # every other (it gets what the others leave of the target).
    after: str | None = None
