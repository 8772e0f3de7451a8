"""Configuration: one typed model per stage and reinjector (`config_sections`), composed into `Config`.

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

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from .config_sections import (DEFAULT_COMPACTABLE_TOOLS, DEFAULT_EXCLUDED_TOOLS, PRICE_PRESETS, AutocompactConfig,
                              BudgetConfig, CollapseConfig, HookConfig, IngestConfig, MicrocompactConfig,
                              PluginsConfig, PricingConfig, ReinjectConfig, Section, SnipConfig, StoreConfig)
from . import trust
from .errors import ConfigError
from .patterns import PatternError, compile_user_pattern

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


class Config(Section):
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
    pin_file_max_bytes: int = Field(1 << 20, ge=1, description=(
        "The largest file `--pin @PATH` reads (bytes): a pin is a snippet to keep verbatim, not a document; "
        "a larger file is refused, naming it."))
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
    store: StoreConfig = StoreConfig()
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
                    compile_user_pattern(pin[3:], source="pin")
                except PatternError as exc:
                    raise ValueError(f"pin {pin!r} is not a valid regular expression: {exc.problem} (re: "
                                     "patterns run on google-re2, in linear time: no backreferences, lookahead "
                                     "or lookbehind)") from None
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


__all__ = ["CONFIG_FILE", "DEFAULT_COMPACTABLE_TOOLS", "DEFAULT_EXCLUDED_TOOLS", "DEFAULT_WINDOW", "ENV_NESTED_DELIMITER",
           "ENV_PREFIX", "MAIN_AGENT", "PRICE_PRESETS", "SUBAGENT", "AutocompactConfig", "BudgetConfig",
           "CollapseConfig", "Config", "ConfigError", "HookConfig", "IngestConfig", "MicrocompactConfig",
           "PluginsConfig", "PricingConfig", "ReinjectConfig", "Section", "SnipConfig", "env_names",
           "environment_overrides", "find_config_file"]
