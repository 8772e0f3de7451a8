"""The contract between the graph and its parts: the `Stage` and `Reinjector` protocols, the typed
per-call context, the graph state and the reports.

A stage reads the current view and decides new edits; the core applies and stores them, so a stage
never touches the session and never imports another stage. A reinjector returns the messages that
rebuild one part of the working surface after a compaction. Both get a frozen `StageContext`, passed
as LangGraph's run context (`context_schema`), never through a loose dict.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Callable, NotRequired, Protocol, Sequence, TypedDict

from ..core.config import Config, ReinjectConfig
from ..core.edits import Edit
from ..core.model import Message
from ..core.tokens import TokenCounter

if TYPE_CHECKING:
    from ..ledger import Ledger
    from .pricing import CallStats
    from ..core.calibration import Calibration
    from ..status.publish import PublisherState
    from ..status.snapshot import Snapshot
    from ..summarizers.base import Summarizer


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


@dataclass(frozen=True)
class StageContext:
    """Everything a stage or reinjector may use besides the view; built once per call by the session."""

    config: Config
    counter: TokenCounter
    artifacts: ArtifactSink
    now: float
    # Seconds since the previous call; None on the first call (nothing cached yet).
    idle_seconds: float | None = None
    # A manual compaction (`Session.compact`, `--force`): autocompact fires whatever the size.
    forced: bool = False
    # The user's focus for a manual compaction, quoted in the summary.
    instructions: str | None = None
    epoch: int = 1
    explicit_snips: Sequence[tuple[tuple[str, ...], str]] = ()
    summarizer: Summarizer | None = None
    # Ids a stage must leave alone: the newest user message and everything after the last assistant turn.
    protected: frozenset[str] = frozenset()
    consecutive_failures: int = 0
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
    status: StatusInputs | None = None
    reinjectors: Sequence[Reinjector] = ()
    # The session's working-state ledger, updated with every message before the graph runs.
    ledger: Ledger | None = None
    # Cache economics (worksurface.engine.pricing). The session so far: model calls made before this one and
    # the transcript's mean growth per call; None: read off `transcript` (each assistant turn = a call).
    call_stats: CallStats | None = None
    # Transcript ids no earlier call sent (new since the previous view): ingestion reduces only
    # these, and an edit re-bills only the others. None: the transcript's last assistant turn on.
    unsent_ids: frozenset[str] | None = None
    # Per-session memory a stage may keep between calls (keyed by stage name), so it reads only what
    # is new; a stage validates what it finds there and decides exactly as without it. None: no memory.
    scratch: dict[str, Any] | None = None


def tokenizer_ratio(ctx: StageContext) -> float:
    """Measured tokens per counted token (1.0 without a calibration): budgets in the provider's
    tokens are divided by it to get counted tokens."""
    return ctx.calibration.ratio if ctx.calibration is not None else 1.0


@dataclass(frozen=True)
class TextRoom:
    """The counted text a compaction may leave: what the post-compact target holds once the harness's
    fixed part is paid (`room`), and the floor it never goes under (`floor`, config
    autocompact.text_floor of the target). `floored`: the fixed part leaves less than the floor."""

    room: int
    floor: int
    fixed: int

    @property
    def counted(self) -> int:
        return max(self.room, self.floor)

    @property
    def floored(self) -> bool:
        return self.room < self.floor


def text_room(ctx: StageContext, reserved: int = 0) -> TextRoom:
    """The post-compact target in counted tokens (`reserved` counted tokens of it already taken, e.g.
    by the system prefix the view keeps): the measured target less what the harness sends beyond the
    messages, over the tokenizer ratio, and never under the floor."""
    target = ctx.config.post_compact_target
    ratio = tokenizer_ratio(ctx)
    floor = int(ctx.config.autocompact.text_floor * target / ratio)
    if ctx.calibration is None:
        return TextRoom(max(0, target - reserved), floor, 0)
    return TextRoom(max(0, ctx.calibration.counted_for(target) - reserved), floor, ctx.calibration.fixed)


def effective_target(ctx: StageContext) -> int:
    """The post-compact target as the provider measures it, raised to the size of a view that holds
    the text floor when the fixed part leaves less: what reinjection may fill up to."""
    room = text_room(ctx)
    target = ctx.config.post_compact_target
    return max(target, measured_size(ctx, room.counted, compacted=True)) if room.floored else target


def view_offset(ctx: StageContext, counted: int, compacted: bool) -> int:
    """Tokens to add to a view's counted size for its measured size: the call's offset, or after a
    compaction the calibrated one for the new, smaller view plus the planned status. The offset taken
    at the old context never carries over (it holds what the harness cleared there, or sent unseen),
    and a size is never negative."""
    offset = ctx.token_offset
    if compacted and ctx.calibration is not None:
        offset = ctx.calibration.offset(counted) + (ctx.token_offset - ctx.usage_offset)
    return max(-counted, offset)


def measured_size(ctx: StageContext, counted: int, compacted: bool) -> int:
    """A view's size as the provider measures it (the count when nothing was measured)."""
    return counted + view_offset(ctx, counted, compacted)


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


class Stage(Protocol):
    """A reducing stage: a module of `stages/` with a `NAME` and a `run` function."""

    NAME: str

    def run(self, state: PipelineState, config: Any, ctx: StageContext) -> StageResult:
        """Decide edits for the view in `state`; `config` is this stage's own section of the Config."""
        ...


class Reinjector(Protocol):
    """A part of the working surface rebuilt after a compaction: a module of `reinjectors/`."""

    NAME: str

    def run(self, view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
        """Messages restoring this part that the view does not already show, within `budget` tokens."""
        ...
