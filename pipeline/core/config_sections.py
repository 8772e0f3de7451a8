"""The configuration's sections: one typed model per stage, reinjector and concern (budget, snip,
microcompact, collapse, autocompact, reinjection, hooks, pricing, ingestion, plugins), each field
documented where it is declared. `config.Config` composes them and says where values come from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Tools whose old results can be cleared: re-running them (or re-reading) gets the content back.
DEFAULT_COMPACTABLE_TOOLS = ("read", "shell", "grep", "glob", "search", "fetch", "edit", "write", "list")
# Memory and skill results hold instructions the agent cannot cheaply re-derive: never cleared.
DEFAULT_EXCLUDED_TOOLS = ("memory", "skill", "todo", "plan")


class Section(BaseModel):
    """A part of the configuration: unknown keys refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetConfig(Section):
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


class SnipConfig(Section):
    """Removing outputs a later one repeats or supersedes (a re-run, a re-read)."""

    min_gain_tokens: int = Field(4_000, ge=0, description=(
        "Snipping edits the middle of the view and so breaks the provider's cache from that point; it is "
        "applied in batches worth at least this much, or when the cache is cold anyway."))
    near_duplicate_ratio: float = Field(97.0, ge=50, le=100, description=(
        "rapidfuzz ratio at which an earlier output counts as a near-duplicate of a later one (a re-run whose"
        " output changed in a timestamp or a count)."))
    min_result_tokens: int = Field(200, ge=0, description=(
        "Outputs smaller than this are never snipped: the marker would cost about as much."))


class MicrocompactConfig(Section):
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


class CollapseConfig(Section):
    """Folding finished exploration spans (reads and searches) into a digest near the threshold."""

    trigger_fraction: float = Field(0.9, gt=0, le=1, description=(
        "Fraction of the autocompact threshold over which exploration spans are folded."))
    min_span_steps: int = Field(2, ge=1, description=(
        "A span shorter than this is not worth a digest."))
    keep_recent_steps: int = Field(10, ge=0, description=(
        "The newest exploration steps stay as they are: the agent is still reading their results."))


class AutocompactConfig(Section):
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
    text_floor: float = Field(0.5, ge=0, le=1, description=(
        "The least share of the post-compact target a compaction leaves to text (summary, kept tail, "
        "reinjected parts), in the target's own tokens. Where the harness's fixed part (system prompt, "
        "tools: worksurface.core.calibration) leaves the text less, the compaction keeps this floor and "
        "says the view measures over its target; an economic compaction does not fire at all (it would "
        "trade the working state for money). A half: at the default 40k target about 20k, where the hand "
        "probes of the 13 labeled sessions keep 84% of their facts (10k counted kept 77%, 4k 64%; "
        "benchmarks/RESULTS.md, Hand probes per user)."))
    text_floor_tokens: int = Field(4_000, ge=0, description=(
        "Once the fixed part leaves the text under text_floor, the least text the compaction keeps, in the "
        "target's own tokens (never more than the target), counted with what the view keeps before the "
        "summary (the system prefix; the harness's standing instructions a view carries whole, such as "
        "Codex's AGENTS.md, are a fixed part and not counted): a share alone starves a small target (half "
        "of --target 4000 is 2k, a summary of about 1.5k), while Claude Code's own summaries are "
        "2.7-4.2k. A target the fixed part leaves room in is met as before."))
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


class ReinjectConfig(Section):
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


class HookConfig(Section):
    """The working surface a harness hook returns after the harness's own compaction (`worksurface hook`)."""

    surface_tokens: int = Field(
        12_000, ge=500,
        description="Tokens the rebuilt surface may take (constraints, plan, files, skills, tools, details, "
                    "status): it is added beside the harness's own summary, so it is a budget of its own.")


PRICE_PRESETS = ("anthropic", "openai", "gemini", "deepseek")


class PricingConfig(Section):
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


class IngestConfig(Section):
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


class PluginsConfig(Section):
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


class StoreConfig(Section):
    """How long a session waits on its PostgreSQL database, each wait bounded and named (a limit that
    is hit raises `DatabaseTimeoutError` naming the field, or `DatabaseUnreachableError` naming the
    server): a server that is down, a link that stops moving bytes or a stuck lock ends the call
    instead of hanging it. The directory store waits only for its lock."""

    connect_timeout_seconds: int = Field(5, ge=2, description=(
        "Connecting to the server (libpq connect_timeout; libpq takes 2 s as its least). A server that "
        "does not answer by then is reported unreachable, naming host:port."))
    reply_timeout_seconds: float = Field(30.0, gt=0, description=(
        "Waiting for the server's answer to one statement, measured here (the only bound on a link that "
        "stops moving bytes without resetting: the server cannot tell this side). Above "
        "statement_timeout_seconds, so a slow statement is cancelled by the server first."))
    statement_timeout_seconds: float = Field(20.0, gt=0, description=(
        "The server cancels a statement running longer (PostgreSQL statement_timeout)."))
    lock_timeout_seconds: float = Field(10.0, gt=0, description=(
        "The server gives up waiting for a row or table lock (PostgreSQL lock_timeout); the session's own "
        "lock is waited for as long as the caller's lock timeout says."))
    idle_in_transaction_seconds: float = Field(60.0, gt=0, description=(
        "The server ends a connection left idle inside a transaction (PostgreSQL "
        "idle_in_transaction_session_timeout), releasing what it held."))
    keepalives_idle_seconds: int = Field(10, ge=1, description=(
        "TCP keepalive probes start after this much silence on a pooled connection (libpq keepalives_idle; "
        "the server side too), so a dead peer is found while idle."))
    keepalives_interval_seconds: int = Field(5, ge=1, description=(
        "Seconds between unanswered keepalive probes (libpq keepalives_interval)."))
    keepalives_count: int = Field(3, ge=1, description=(
        "Unanswered keepalive probes after which the connection is dead (libpq keepalives_count)."))
    tcp_user_timeout_seconds: float = Field(20.0, gt=0, description=(
        "Data sent but not acknowledged for this long ends the connection (libpq and server "
        "tcp_user_timeout, Linux)."))
