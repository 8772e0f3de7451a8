"""Configuration: one typed model per stage and reinjector, composed into `Config`.

Thresholds derive from the window (every default is for a 200k window): autocompact fires at
window - max_output - autocompact_buffer, and the post-compact view aims at 20% of the window.
Values come from keyword arguments, `WORKSURFACE_*` environment variables, `worksurface.toml`, or
`[tool.worksurface]` in pyproject.toml (later sources win, in the reverse of that order).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError

# The configuration file worksurface looks for (pyproject.toml's [tool.worksurface] too).
CONFIG_FILE = "worksurface.toml"
# Environment overrides: WORKSURFACE_WINDOW=100000, WORKSURFACE_AUTOCOMPACT__SUMMARY_TOKENS=6000 (a
# section's field after the delimiter; lists and tables as JSON). Names that are no field are ignored,
# so the gateway's WORKSURFACE_GATEWAY_* and the clients' variables never collide with these.
ENV_PREFIX = "WORKSURFACE_"
ENV_NESTED_DELIMITER = "__"
# The keys of `agents` for the main agent and for every sub-agent (any other key is a sub-agent type).
MAIN_AGENT = "main"
SUBAGENT = "subagent"
# Fields that are tables of free keys (set whole, as JSON, from the environment), not sections.
FREE_TABLES = ("summarizer_options", "options", "agents")
# Folders that end the upward search for a configuration file: a repository's root.
REPOSITORY_MARKERS = (".git", ".hg")

# Tools whose old results can be cleared: re-running them (or re-reading) gets the content back.
DEFAULT_COMPACTABLE_TOOLS = ("read", "shell", "grep", "glob", "search", "fetch", "edit", "write", "list")
# Memory and skill results hold instructions the agent cannot cheaply re-derive: never cleared.
DEFAULT_EXCLUDED_TOOLS = ("memory", "skill", "todo", "plan")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetConfig(_Section):
    """Large tool results stored as artifacts and replaced by a preview (values at a 200k window)."""

    max_result_tokens: int = Field(12_000, ge=100, description=(
        "One result over this is replaced: Claude Code's own per-result cap is of this order, and a single "
        "result larger than this crowds out everything else the model needs."))
    max_turn_tokens: int = Field(50_000, ge=100, description=(
        "The results answering one assistant turn together: parallel calls can flood the view at once."))
    preview_head_tokens: int = Field(600, ge=0, description=(
        "Head and tail previews: an error's cause is usually at the end of the output."))
    preview_tail_tokens: int = Field(600, ge=0, description=(
        "The tail preview of an oversized result (see preview_head_tokens)."))


class SnipConfig(_Section):
    """Removing outputs a later one repeats or supersedes (a re-run, a re-read)."""

    min_gain_tokens: int = Field(4_000, ge=0, description=(
        "Snipping edits the middle of the view and so breaks the provider's cache from that point; it is "
        "applied in batches worth at least this much, or when the cache is cold anyway."))
    near_duplicate_ratio: float = Field(97.0, ge=50, le=100, description=(
        "rapidfuzz ratio at which an earlier output counts as a near-duplicate of a later one (a re-run whose"
        " output changed in a timestamp or a count)."))
    min_result_tokens: int = Field(200, ge=0, description=(
        "Outputs smaller than this are never snipped: the marker would cost about as much."))


class MicrocompactConfig(_Section):
    """Clearing old results of tools whose output can be fetched again (values at a 200k window).

    Above the trigger, when to clear is an economic decision (pricing.decide_edit): a batch fires once
    the tokens it removes reach the economic batch for the tail it re-bills, so the view follows a
    sawtooth between a small kept tail and that batch instead of growing to the threshold."""

    trigger_tokens: int = Field(20_000, ge=0, description=(
        "Below this view size clearing is never considered: a view this small costs little to read, and the "
        "stage is not even run (measured on the cost benchmark: a low floor lets the firing rule keep the "
        "view small; 100k let it read a much larger cached prefix on every call)."))
    clear_at_least: int = Field(1_000, ge=0, description=(
        "A batch removes at least this much, whatever the firing rule says (a smaller one is not worth a "
        "changed prefix and a new artifact); the economic batch is usually larger."))
    keep_recent: int = Field(3, ge=0, description=(
        "The newest results of compactable tools are kept whatever their size: the agent is using them "
        "(LangChain's ClearToolUsesEdit keeps 3 too)."))
    protect_tokens: int = Field(4_000, ge=0, description=(
        "... and so is the newest stretch of this many tokens (the current step and its results). Each batch "
        "re-bills what follows its edit point, so a larger protected tail costs on every batch."))
    cache_ttl_seconds: float = Field(300.0, ge=0, description=(
        "Idle longer than this, the provider's cache has expired (Anthropic's default TTL is 5 minutes): the "
        "whole prefix is billed again anyway, so clearing costs nothing extra."))
    compactable_tools: tuple[str, ...] = Field(DEFAULT_COMPACTABLE_TOOLS, description=(
        "Tool kinds whose old results may be cleared: re-running them (or re-reading) gets the content back."))
    excluded_tools: tuple[str, ...] = Field(DEFAULT_EXCLUDED_TOOLS, description=(
        "Tool kinds never cleared: memory and skill results hold instructions the agent cannot cheaply re-derive."))


class CollapseConfig(_Section):
    """Folding finished exploration spans (reads and searches) into a digest near the threshold."""

    trigger_fraction: float = Field(0.9, gt=0, le=1, description=(
        "Fraction of the autocompact threshold over which exploration spans are folded."))
    min_span_steps: int = Field(2, ge=1, description=(
        "A span shorter than this is not worth a digest."))
    keep_recent_steps: int = Field(10, ge=0, description=(
        "The newest exploration steps stay as they are: the agent is still reading their results."))


class AutocompactConfig(_Section):
    """Summarizing everything before a kept tail; sizes are caps within the post-compact target."""

    enabled: bool = Field(True, description=(
        "False: never compact on its own (the view may then pass the threshold: the harness decides); "
        "a manual compaction (`--force`, /compact) still runs."))
    pin_tokens: int = Field(2_000, ge=0, description=(
        "Room for pinned content (`pins`) a summary restores verbatim; pins beyond it are reported as not kept."))

    keep_tail_tokens: int = Field(12_000, ge=0, description=(
        "The newest messages kept verbatim (the target's share decides below this cap)."))
    summary_tokens: int = Field(8_000, ge=200, description=(
        "The summary's cap: beyond it a summary repeats what the reinjectors restore."))
    user_messages_tokens: int = Field(4_000, ge=0, description=(
        "Of the summary, the room for the user's own earlier messages, quoted verbatim."))
    max_consecutive_failures: int = Field(3, ge=1, description=(
        "After this many failed compactions in a row the breaker opens (it retries once the view has grown by"
        " a tenth of the window), so a session that cannot be compacted does not loop."))
    economic_from: float = Field(0.5, gt=0, le=1, description=(
        "Below the threshold a compaction is considered once the view passes this share of it, and made only "
        "when the firing rule says it pays: the tokens it removes, read on every expected remaining call, "
        "against re-billing what stays, batched to its economic size (worksurface.engine.pricing). The ledger"
        " carries the working state across compactions, so an earlier one costs little retention and can save"
        " much of a long session's bill. 1.0: compact only at the threshold (Claude Code)."))
    text_floor: float = Field(0.25, ge=0, le=1, description=(
        "The least share of the post-compact target a compaction leaves to text (summary, kept tail, "
        "reinjected parts), in the target's own tokens. Where the harness's fixed part (system prompt, "
        "tools: worksurface.core.calibration) leaves the text less, the compaction keeps this floor and "
        "says the view measures over its target; an economic compaction does not fire at all (it would "
        "trade the working state for money). A quarter: at the default 40k target about 10k, where the "
        "hand probes of the long sessions keep most facts (4k counted kept 46-91% of them, 10k 63-100%)."))
    summarizer: str = Field(
        "structured",
        description='"structured" needs no model; "llm" is a LangChain chat model writing the narrative beside '
                    'the structured sections (worksurface.summarizers.chat_model), configured by summarizer_options; '
                    "the name of a summarizer an installed package declares (entry point worksurface.summarizers), "
                    'or a "module:Class" reference (built with summarizer_options).')
    summarizer_options: dict[str, Any] = Field(
        default_factory=dict,
        description='For "llm": model ("provider:model", for LangChain\'s init_chat_model), api_key_env (the '
                    "variable holding the key), narrative_share, max_retries, and anything init_chat_model "
                    "takes (base_url, timeout, temperature, max_tokens ...).")


class ReinjectConfig(_Section):
    """What each reinjector may restore after a compaction (caps; the post-compact target decides)."""

    status_tokens: int = Field(600, ge=0, description=(
        "The status baseline: a few hundred tokens hold every section."))
    constraints_tokens: int = Field(3_000, ge=0, description=(
        "Standing rules and tried-and-excluded approaches, verbatim: what agents lose first."))
    plan_tokens: int = Field(3_000, ge=0, description=(
        "The todo list and the latest plan (a long approved plan may take a quarter of the room left)."))
    files_max: int = Field(5, ge=0, description=(
        "Files the agent was working on, newest first: at least this many (more when the target has room), "
        "each up to file_tokens, together up to files_tokens or three quarters of the room left."))
    file_tokens: int = Field(4_000, ge=0, description="The most one reinjected file may take (see files_max).")
    files_tokens: int = Field(16_000, ge=0, description="The most all reinjected files may take together (see files_max).")
    skill_tokens: int = Field(4_000, ge=0, description=(
        "Skills invoked in the session, newest first (their instructions are not in the summary): the most "
        "one skill may take."))
    skills_tokens: int = Field(8_000, ge=0, description="The most all reinjected skills may take together.")
    tools_tokens: int = Field(1_000, ge=0, description=(
        "Tools, MCP servers and agents announced mid-session."))
    results_tokens: int = Field(24_000, ge=0, description=(
        "The newest tool results from before the kept tail, verbatim, in what the target still leaves once "
        "everything else was restored: together up to this, each up to result_tokens."))
    result_tokens: int = Field(2_000, ge=0, description="The most one reinjected tool result may take.")
    visible_similarity: float = Field(90.0, ge=0, le=100, description=(
        "rapidfuzz similarity at which the kept tail counts as already showing a file or a rule."))


class HookConfig(_Section):
    """The working surface a harness hook returns after the harness's own compaction (`worksurface hook`)."""

    surface_tokens: int = Field(
        12_000, ge=500,
        description="Tokens the rebuilt surface may take (constraints, plan, files, skills, tools, details, "
                    "status): it is added beside the harness's own summary, so it is a budget of its own.")


PRICE_PRESETS = ("anthropic", "openai", "gemini", "deepseek")


class PricingConfig(_Section):
    """The provider's prices (see worksurface.engine.pricing for the presets and how a call is billed) and the
    firing rule that weighs an edit of the already-sent view against the re-billing it causes."""

    preset: str = Field("anthropic", pattern="^(" + "|".join(PRICE_PRESETS) + ")$", description=(
        "Start from this provider's documented prices; the fields below override single values."))
    input_per_mtok: float | None = Field(None, ge=0, description=(
        "USD per million input tokens not served from the cache (None: the preset's)."))
    cache_read_per_mtok: float | None = Field(None, ge=0, description=(
        "USD per million input tokens served from the cache (None: the preset's)."))
    cache_write_per_mtok: float | None = Field(None, ge=0, description=(
        "USD per million tokens written to the cache (None: the preset's; equal to input where caching is "
        "automatic and writes carry no premium)."))
    output_per_mtok: float | None = Field(None, ge=0, description=(
        "USD per million output tokens, for replays that know them (None: the preset's)."))
    cache_ttl_seconds: float | None = Field(None, ge=0, description=(
        "Seconds a cached prefix lives without use (None: the preset's; Anthropic's default is 300)."))
    min_cache_tokens: int | None = Field(None, ge=0, description=(
        "Prompts shorter than this are never cached (None: the preset's documented minimum)."))
    firing_rule: bool = Field(True, description=(
        "When false, snip, microcompact and collapse fire on their own triggers alone (the old rule)."))
    horizon: str = Field("auto", pattern="^(auto|calls_so_far|until_threshold|fixed)$", description=(
        "How many more calls an edit's saving is counted over: \"calls_so_far\" (a session that ran k calls "
        "runs about k more), \"until_threshold\" (until autocompact rewrites the view anyway, at the "
        "session's mean growth per call), \"auto\" (the smaller of the two) or \"fixed\" (horizon_calls)."))
    horizon_calls: int = Field(20, ge=0, description=(
        "The calls a \"fixed\" horizon counts a saving over (see horizon)."))
    max_horizon_calls: int = Field(200, ge=1, description=(
        "No estimate counts a saving over more calls than this (a long past is no promise)."))
    batching: bool = Field(True, description=(
        "Wait until an edit that pays removes the economic batch (pricing.economic_batch_tokens: re-billing "
        "the tail once per batch against reading the removable tokens on every call until then), so the "
        "prefix changes in a few large steps instead of a little on every call. False: fire as soon as an "
        "edit pays at all."))


class IngestConfig(_Section):
    """Reduction of a new tool result before it is first sent (see worksurface.engine.reduce_output)."""

    enabled: bool = Field(True, description="Reduce new tool results before they are first sent.")
    min_gain_tokens: int = Field(40, ge=0, description=(
        "Only results whose reduction saves at least this many tokens are replaced (a smaller edit is not "
        "worth an artifact and a changed result)."))
    repeat_min_run: int = Field(3, ge=2, description=(
        "A run of this many identical lines or more becomes one line and a count."))
    json_max_items: int = Field(40, ge=2, description=(
        "A JSON array longer than this keeps its first json_keep_head and last json_keep_tail items (items "
        "that mention an error are kept too)."))
    json_keep_head: int = Field(10, ge=0, description=(
        "Items kept from the start of a JSON array over json_max_items."))
    json_keep_tail: int = Field(5, ge=0, description=(
        "Items kept from the end of a JSON array over json_max_items."))
    blob_min_chars: int = Field(256, ge=32, description=(
        "A run of base64 or hex characters at least this long, with no spaces, is a blob."))
    log_max_lines: int = Field(400, ge=10, description=(
        "A log longer than this many lines keeps its head, its tail and every line that reports an error, "
        "failure or warning in between (up to log_max_kept_lines); the whole is an artifact."))
    log_head_lines: int = Field(60, ge=0, description=(
        "Lines kept from the start of a log over log_max_lines."))
    log_tail_lines: int = Field(120, ge=0, description=(
        "Lines kept from the end of a log over log_max_lines."))
    log_max_kept_lines: int = Field(150, ge=0, description=(
        "Error, failure and warning lines kept from between a long log's head and tail."))
    exempt_kinds: tuple[str, ...] = Field(("read", "edit", "write", "memory", "skill", "todo", "plan"), description=(
        "Tools whose output is a document the agent may edit line by line (or its memory): only terminal "
        "escapes are stripped from them, never content."))


class PluginsConfig(_Section):
    """Third-party stages, reinjectors and summarizers (docs/plugins.md): installed ones are found by
    their entry points, others are named here; each part declares its place and its inputs."""

    entry_points: bool = Field(True, description=(
        "Use the stages and reinjectors installed packages declare (entry points worksurface.stages and "
        "worksurface.reinjectors); false: only the shipped ones and those listed here."))
    stages: tuple[str, ...] = Field((), description=(
        'Stages to add, as "module:OBJECT" references to a worksurface.engine.state.Stage (or a class or '
        "function returning one); each runs where it declares (Stage.after: after the named stage)."))
    reinjectors: tuple[str, ...] = Field((), description=(
        'Reinjectors to add, as "module:OBJECT" references to a worksurface.engine.state.Reinjector (or a '
        "class or function returning one); after the shipped ones unless it declares Reinjector.after."))
    options: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "Each third-party part's settings, by the part's name, validated by the config type it declares "
        "(a part that declares one of the shipped sections, such as ReinjectConfig, reads that section)."))


# Defaults that are a share of the window, as (section or None, field, share): the 200k-window values
# (20k output reserve, 13k buffer, microcompact at 100k, ...) are the caps, and a smaller window gets
# the same proportions instead of a threshold that goes negative (a 32k window would otherwise
# compact at "1 token"). Values set explicitly are never scaled.
DEFAULT_WINDOW = 200_000
WINDOW_SHARES: tuple[tuple[str | None, str, float], ...] = (
    (None, "max_output", 0.10), (None, "autocompact_buffer", 0.065),
    ("budget", "max_result_tokens", 0.06), ("budget", "max_turn_tokens", 0.25),
    ("budget", "preview_head_tokens", 0.003), ("budget", "preview_tail_tokens", 0.003),
    ("snip", "min_gain_tokens", 0.02),
    ("microcompact", "trigger_tokens", 0.10), ("microcompact", "clear_at_least", 0.005),
    ("microcompact", "protect_tokens", 0.02),
)
# The summary and the kept tail need no share here: they are sized from the post-compact target,
# which is itself a share of the window.


def _scaled_defaults(data: Any) -> Any:
    """Fill the window-relative defaults the raw configuration leaves unset (see WINDOW_SHARES)."""
    if not isinstance(data, dict):
        return data
    window = data.get("window", DEFAULT_WINDOW)
    if isinstance(window, str) and window.strip().isdigit():     # from the environment
        window = int(window)
    if not isinstance(window, int) or window >= DEFAULT_WINDOW:
        return data
    out = dict(data)
    for section, name, share in WINDOW_SHARES:
        model: type[BaseModel] = Config if section is None else Config.model_fields[section].annotation  # type: ignore[assignment]
        default = model.model_fields[name].default
        floor = model.model_fields[name].metadata
        value = max(int(window * share), _minimum(floor))
        value = min(value, default)
        if section is None:
            out.setdefault(name, value)
        else:
            part = out.get(section)
            part = dict(part) if isinstance(part, dict) else {}
            part.setdefault(name, value)
            out[section] = part
    return out


def _minimum(metadata: list[Any]) -> int:
    """The `ge` bound pydantic declares for a field (0 when none)."""
    return max((int(getattr(m, "ge", 0) or 0) for m in metadata), default=0)


class Config(_Section):
    """Everything configurable; values come from keyword arguments, `worksurface.toml` or
    `[tool.worksurface]` in pyproject.toml (found from the current folder upwards)."""

    window: int = Field(200_000, ge=1_000, description=(
        "The model's context window in its provider's tokens."))
    max_output: int = Field(20_000, ge=0, description=(
        "Kept free for the model's answer (and its thinking): 10% of the window, at most 20k."))
    autocompact_buffer: int = Field(13_000, ge=0, description=(
        "A margin under the window so a call never fails on a token-count difference: 6.5%, at most 13k "
        "(autocompact fires at window - max_output - autocompact_buffer, 167k of 200k, as Claude Code)."))
    post_compact_fraction: float = Field(0.2, gt=0, le=1, description=(
        "The post-compact view aims at this share of the window, so the agent gets most of it back."))
    autocompact_threshold_tokens: int | None = Field(None, ge=1_000, description=(
        "An absolute autocompact threshold instead of window - max_output - autocompact_buffer: higher (up "
        "to window - max_output) or lower than the derived one."))
    pins: tuple[str, ...] = Field((), description=(
        "Content that must survive every compaction verbatim: a literal text, or re:PATTERN (every match in "
        "the summarized span). Each compaction reports any pin it could not keep."))
    post_compact_target_tokens: int | None = Field(None, ge=500, description=(
        "An absolute post-compact target instead of the fraction."))
    workspace_root: str | None = Field(None, description=(
        "Reinject current file contents from here (never from outside it); None: the transcript's copy."))
    status_strategy: str = Field("delta", pattern="^(append|replace|delta)$", description=(
        "How the status bar is published: a baseline then deltas (cache-friendly), every full bar appended, "
        "or the newest one replacing the previous."))
    status_fold_min: int = Field(4, ge=1, description=(
        "Deltas accumulate at the tail; they are folded into one fresh baseline when a stage already breaks "
        "the cache on this call and at least `status_fold_min` are in view, or in any case once "
        "`status_fold_max` are (so the bar never grows without bound between compactions)."))
    status_fold_max: int = Field(40, ge=2, description=(
        "Deltas in view at which they are folded into a baseline in any case (see status_fold_min)."))
    budget: BudgetConfig = BudgetConfig()
    snip: SnipConfig = SnipConfig()
    microcompact: MicrocompactConfig = MicrocompactConfig()
    collapse: CollapseConfig = CollapseConfig()
    autocompact: AutocompactConfig = AutocompactConfig()
    reinject: ReinjectConfig = ReinjectConfig()
    pricing: PricingConfig = PricingConfig()
    ingest: IngestConfig = IngestConfig()
    hook: HookConfig = HookConfig()
    plugins: PluginsConfig = PluginsConfig()
    agents: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        'Settings for one kind of agent, merged over the rest of this configuration: "main" (the main '
        'agent), "subagent" (every sub-agent), or a sub-agent\'s type name (e.g. "Explore", merged over '
        '"subagent"). A session learns which it is from the harness (a Claude Code sidechain and the '
        "parent's call that launched it) or `Session.open(agent=...)` / `--agent`."))

    @property
    def threshold(self) -> int:
        """Autocompact threshold: the window less the output reserve and a safety buffer."""
        if self.autocompact_threshold_tokens is not None:
            return max(1, min(self.autocompact_threshold_tokens, self.window - self.max_output))
        return max(1, self.window - self.max_output - self.autocompact_buffer)

    @property
    def post_compact_target(self) -> int:
        if self.post_compact_target_tokens is not None:
            return self.post_compact_target_tokens
        return int(self.window * self.post_compact_fraction)

    @property
    def compaction_floor(self) -> int:
        """Where autocompact starts weighing an economic compaction (at most the threshold)."""
        return min(self.threshold, int(self.threshold * self.autocompact.economic_from))

    @property
    def collapse_trigger(self) -> int:
        return int(self.threshold * self.collapse.trigger_fraction)

    @classmethod
    def load(cls, directory: str | Path | None = None, *, environ: Mapping[str, str] | None = None,
             **overrides: Any) -> "Config":
        """Defaults, then the configuration file found from `directory` (the current directory when
        None) upwards (see `find_config_file`), then `WORKSURFACE_*` variables of `environ` (the
        process's environment when None), then keyword overrides."""
        found = find_config_file(Path(directory) if directory is not None else Path.cwd())
        data = _config_table(found) if found is not None else {}
        env = environment_overrides(environ)
        source = str(found or "<defaults>") + (f" and {ENV_PREFIX}* variables ({', '.join(env_names(env))})"
                                                if env else "")
        return cls.from_mapping(_merge(_merge(data, env), overrides), source=source)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "<arguments>") -> "Config":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(_problem(e) for e in exc.errors())
            raise ConfigError(f"{source}: invalid configuration: {problems}") from None

    @field_validator("pins")
    @classmethod
    def _pin_patterns(cls, pins: tuple[str, ...]) -> tuple[str, ...]:
        for pin in pins:
            if pin.startswith("re:"):
                try:
                    re.compile(pin[3:])
                except re.error as exc:
                    raise ValueError(f"pin {pin!r} is not a valid regular expression ({exc})") from None
        return pins

    @model_validator(mode="before")
    @classmethod
    def _window_relative(cls, data: Any) -> Any:
        return _scaled_defaults(data)

    @model_validator(mode="after")
    def _agents_valid(self) -> "Config":
        """Each agent's settings make a valid configuration (checked once, where they are written)."""
        for name, over in self.agents.items():
            if "agents" in over:
                raise ValueError(f"agents.{name} cannot hold agents of its own")
            try:
                Config.model_validate(_merge(self.model_dump(exclude_unset=True, exclude={"agents"}), over))
            except ValidationError as exc:
                raise ValueError(f"agents.{name}: " + "; ".join(_problem(e) for e in exc.errors())) from None
        return self

    def for_agent(self, agent: str | None) -> "Config":
        """The configuration of one agent: `agents.main` merged over the rest for the main agent (None
        or "main"); for a sub-agent `agents.subagent`, then `agents.<its type>` when `agent` names one
        ("subagent" itself: no type known). The result holds no `agents` table (it is applied), so
        resolving it again changes nothing. Values set only here are window-relative as elsewhere."""
        if not self.agents:
            return self
        # The result has no `agents` of its own: they are applied, and applying again changes nothing.
        layers = [MAIN_AGENT] if agent in (None, MAIN_AGENT) else [SUBAGENT] + ([agent] if agent != SUBAGENT else [])
        overrides = [self.agents[name] for name in layers if name in self.agents]
        data = self.model_dump(exclude_unset=True, exclude={"agents"})
        for over in overrides:
            data = _merge(data, over)
        applied = " then ".join(n for n in layers if n in self.agents) or "none"
        return Config.from_mapping(data, source=f"agents ({applied})")

    def with_overrides(self, **overrides: Any) -> "Config":
        clean = {k: v for k, v in overrides.items() if v is not None}
        if not clean:
            return self
        # Only what was set explicitly is carried over, so window-relative defaults follow a new window.
        return Config.from_mapping(_merge(self.model_dump(exclude_unset=True), clean))


def environment_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration `WORKSURFACE_*` variables set, as a nested mapping (pydantic-settings reads
    them: `__` separates a section from its field, case does not matter)."""
    from pydantic_settings import EnvSettingsSource     # only when a configuration is loaded

    source = EnvSettingsSource(Config, case_sensitive=False, env_prefix=ENV_PREFIX,  # type: ignore[arg-type]
                               env_nested_delimiter=ENV_NESTED_DELIMITER)
    if environ is not None:
        source.env_vars = {k.lower(): v for k, v in environ.items()}
    return dict(source())


def env_names(overrides: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The variable names behind a mapping from `environment_overrides`, for messages."""
    names: list[str] = []
    for key, value in overrides.items():
        name = f"{prefix}{ENV_NESTED_DELIMITER if prefix else ENV_PREFIX}{key.upper()}"
        names += env_names(value, name) if isinstance(value, Mapping) and key not in FREE_TABLES else [name]
    return names


def _problem(error: Any) -> str:
    """One pydantic error as `section.key: what is wrong (got value)`."""
    if error.get("type") == "value_error" and not error["loc"]:
        return _sentence(error)     # a whole-configuration check names its own key
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    value = error.get("input")
    got = f" (got {value!r})" if error["loc"] and isinstance(value, (str, int, float, bool)) else ""
    return f"{where}: {_sentence(error)}{got}"


def _sentence(error: Any) -> str:
    """pydantic's message, except a choice written as a pattern (`^(a|b|c)$`), which reads as its choices."""
    pattern = (error.get("ctx") or {}).get("pattern", "")
    if error.get("type") == "string_pattern_mismatch" and pattern.startswith("^(") and pattern.endswith(")$"):
        options = pattern[2:-2].split("|")
        return "must be " + (options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1])
    return str(error["msg"]).removeprefix("Value error, ")


def find_config_file(start: Path) -> Path | None:
    """The configuration file that applies to `start`, searched as ruff and black do: in `start` and
    then each parent folder, the first `worksurface.toml`, or `pyproject.toml` that has a
    `[tool.worksurface]` table (one without it is skipped); the search ends at a repository root
    (a folder holding `.git` or `.hg`) or the filesystem root."""
    folder = start.resolve()
    while True:
        own, pyproject = folder / CONFIG_FILE, folder / "pyproject.toml"
        if own.is_file():
            return own
        tool = _read_toml(pyproject).get("tool") if pyproject.is_file() else None
        if isinstance(tool, dict) and "worksurface" in tool:
            return pyproject
        if any((folder / marker).exists() for marker in REPOSITORY_MARKERS) or folder.parent == folder:
            return None
        folder = folder.parent


def _config_table(path: Path) -> dict[str, Any]:
    """The settings in a found file: pyproject's `[tool.worksurface]`; in worksurface.toml either the
    bare keys or the same `[tool.worksurface]` table (so a snippet copied from pyproject works)."""
    data = _read_toml(path)
    tool = data.get("tool")
    table = tool.get("worksurface") if isinstance(tool, dict) else None
    if path.name == "pyproject.toml" or (isinstance(table, dict) and set(data) == {"tool"}):
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.worksurface] must be a table")
        return table
    return data


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
