"""Configuration: one typed model per stage and reinjector, composed into `Config`.

Thresholds derive from the window (DESIGN.md section 4): autocompact fires at
window - max_output - autocompact_buffer, and the post-compact view aims at 20% of the window.
Values come from keyword arguments, `worksurface.toml`, or `[tool.worksurface]` in pyproject.toml.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError

# Tools whose old results can be cleared: re-running them (or re-reading) gets the content back.
DEFAULT_COMPACTABLE_TOOLS = ("read", "shell", "grep", "glob", "search", "fetch", "edit", "write", "list")
# Memory and skill results hold instructions the agent cannot cheaply re-derive: never cleared.
DEFAULT_EXCLUDED_TOOLS = ("memory", "skill", "todo", "plan")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetConfig(_Section):
    max_result_tokens: int = Field(12_000, ge=100)
    max_turn_tokens: int = Field(50_000, ge=100)
    # Head and tail previews: an error's cause is usually at the end of the output.
    preview_head_tokens: int = Field(600, ge=0)
    preview_tail_tokens: int = Field(600, ge=0)


class SnipConfig(_Section):
    # Snipping edits the middle of the view and so breaks the provider's cache from that point;
    # it is applied in batches worth at least this much, or when the cache is cold anyway.
    min_gain_tokens: int = Field(4_000, ge=0)
    near_duplicate_ratio: float = Field(97.0, ge=50, le=100)
    min_result_tokens: int = Field(200, ge=0)


class MicrocompactConfig(_Section):
    trigger_tokens: int = Field(100_000, ge=0)
    clear_at_least: int = Field(20_000, ge=0)
    keep_recent: int = Field(5, ge=0)
    protect_tokens: int = Field(40_000, ge=0)
    cache_ttl_seconds: float = Field(300.0, ge=0)
    compactable_tools: tuple[str, ...] = DEFAULT_COMPACTABLE_TOOLS
    excluded_tools: tuple[str, ...] = DEFAULT_EXCLUDED_TOOLS


class CollapseConfig(_Section):
    # Fraction of the autocompact threshold over which exploration spans are folded.
    trigger_fraction: float = Field(0.9, gt=0, le=1)
    min_span_steps: int = Field(2, ge=1)
    keep_recent_steps: int = Field(10, ge=0)


class AutocompactConfig(_Section):
    keep_tail_tokens: int = Field(12_000, ge=0)
    summary_tokens: int = Field(8_000, ge=200)
    user_messages_tokens: int = Field(4_000, ge=0)
    max_consecutive_failures: int = Field(3, ge=1)
    # "structured" needs no model; "llm" takes options such as provider, model, base_url,
    # api_key_env and timeout (see worksurface.summarizers.llm.LLMSummarizer).
    summarizer: str = "structured"
    summarizer_options: dict[str, Any] = Field(default_factory=dict)


class ReinjectConfig(_Section):
    status_tokens: int = Field(600, ge=0)
    constraints_tokens: int = Field(3_000, ge=0)
    plan_tokens: int = Field(3_000, ge=0)
    files_max: int = Field(5, ge=0)
    file_tokens: int = Field(4_000, ge=0)
    files_tokens: int = Field(16_000, ge=0)
    skill_tokens: int = Field(4_000, ge=0)
    skills_tokens: int = Field(8_000, ge=0)
    tools_tokens: int = Field(1_000, ge=0)
    visible_similarity: float = Field(90.0, ge=0, le=100)


class Config(_Section):
    window: int = Field(200_000, ge=1_000)
    max_output: int = Field(20_000, ge=0)
    autocompact_buffer: int = Field(13_000, ge=0)
    post_compact_fraction: float = Field(0.2, gt=0, le=1)
    post_compact_target_tokens: int | None = Field(None, ge=500)
    workspace_root: str | None = None
    status_strategy: str = Field("delta", pattern="^(append|replace|delta)$")
    # Deltas accumulate at the tail; they are folded into one fresh baseline when a stage already
    # breaks the cache on this call and at least `status_fold_min` are in view, or in any case once
    # `status_fold_max` are (so the bar never grows without bound between compactions).
    status_fold_min: int = Field(4, ge=1)
    status_fold_max: int = Field(40, ge=2)
    budget: BudgetConfig = BudgetConfig()
    snip: SnipConfig = SnipConfig()
    microcompact: MicrocompactConfig = MicrocompactConfig()
    collapse: CollapseConfig = CollapseConfig()
    autocompact: AutocompactConfig = AutocompactConfig()
    reinject: ReinjectConfig = ReinjectConfig()

    @property
    def threshold(self) -> int:
        """Autocompact threshold: the window less the output reserve and a safety buffer."""
        return max(1, self.window - self.max_output - self.autocompact_buffer)

    @property
    def post_compact_target(self) -> int:
        if self.post_compact_target_tokens is not None:
            return self.post_compact_target_tokens
        return int(self.window * self.post_compact_fraction)

    @property
    def collapse_trigger(self) -> int:
        return int(self.threshold * self.collapse.trigger_fraction)

    @classmethod
    def load(cls, directory: str | Path | None = None, **overrides: Any) -> "Config":
        """Defaults, then `worksurface.toml` or pyproject's `[tool.worksurface]` found in `directory`
        (the current directory when None), then keyword overrides."""
        data: dict[str, Any] = {}
        base = Path(directory) if directory is not None else Path.cwd()
        own, pyproject = base / "worksurface.toml", base / "pyproject.toml"
        if own.is_file():
            data = _read_toml(own)
        elif pyproject.is_file():
            data = _read_toml(pyproject).get("tool", {}).get("worksurface", {})
        return cls.from_mapping(_merge(data, overrides), source=str(own if own.is_file() else pyproject))

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "<arguments>") -> "Config":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{source}: invalid configuration: {problems}") from None

    def with_overrides(self, **overrides: Any) -> "Config":
        clean = {k: v for k, v in overrides.items() if v is not None}
        if not clean:
            return self
        return Config.from_mapping(_merge(self.model_dump(), clean))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


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
