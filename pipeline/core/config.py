"""Configuration: one typed model per stage and reinjector (`config_sections`), composed into `Config`.

Thresholds derive from the window (every default is for a 200k window): autocompact fires at
window - max_output - autocompact_buffer, and the post-compact view aims at 20% of the window.
Values come from keyword arguments, `WORKSURFACE_*` environment variables, the project's
`worksurface.toml` or `[tool.worksurface]` in pyproject.toml, and the user's own
`~/.config/worksurface/config.toml` (earlier sources win). A project's file comes with the repository:
it may set only data-only settings until the user trusts it (core/trust.py says which and how).
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

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
    store: StoreConfig = StoreConfig()
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
        """Defaults, then the user's own file (`trust.user_config_file`), then the project's file found
        from `directory` (the current directory when None) upwards (see `find_config_file`; untrusted,
        it may set only data: `trust.check_project_table`), then `WORKSURFACE_*` variables of `environ`
        (the process's environment when None), then keyword overrides. A value that does not validate
        is named with the file or the variable it came from."""
        layers: list[tuple[str, dict[str, Any]]] = []
        user = trust.user_config_file()
        if user.is_file():
            layers.append((str(user), read_config_table(user)[0]))
        found = find_config_file(Path(directory) if directory is not None else Path.cwd())
        if found is not None:
            table, sha = read_config_table(found)
            trust.check_project_table(found, table, sha, field_paths())
            layers.append((str(found), table))
        variables = environ if environ is not None else _os_environ()
        env = environment_overrides(variables)
        if env:
            layers.append((ENV_LAYER, env))
        if overrides:
            layers.append(("<arguments>", overrides))
        data: dict[str, Any] = {}
        for _, layer in layers:
            data = _merge(data, layer)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_problems(exc, layers, [k for k in variables if k.upper().startswith(ENV_PREFIX)])) from None

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "<arguments>") -> "Config":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_problems(exc, [(source, data)])) from None

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


@lru_cache(maxsize=None)
def field_paths(model: type[BaseModel] | None = None, prefix: str = "") -> frozenset[str]:
    """Every setting's dotted name (`budget.max_result_tokens`): the fields of `model` (Config) and
    of its sections."""
    out: set[str] = set()
    for name, field in (model or Config).model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out |= field_paths(annotation, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return frozenset(out)


def environment_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration `WORKSURFACE_*` variables set, as a nested mapping (pydantic-settings reads
    them: `__` separates a section from its field, case does not matter). A list or table that is not
    JSON is a ConfigError naming the variable and the form expected."""
    from pydantic_settings import EnvSettingsSource     # only when a configuration is loaded
    from pydantic_settings import SettingsError

    source = EnvSettingsSource(Config, case_sensitive=False, env_prefix=ENV_PREFIX,  # type: ignore[arg-type]
                               env_nested_delimiter=ENV_NESTED_DELIMITER)
    if environ is not None:
        source.env_vars = {k.lower(): v for k, v in environ.items()}
    try:
        return dict(source())
    except SettingsError as exc:
        raise ConfigError(settings_error_line(exc, ENV_PREFIX, environ if environ is not None else _os_environ(),
                                              Config)) from None


def settings_error_line(exc: Exception, prefix: str, environ: Mapping[str, str], model: type[BaseModel]) -> str:
    """pydantic-settings' error for a variable that is not JSON where a list or table is expected, as
    one line naming the variable, what is wrong and the form expected (the value is not repeated: a
    table may hold a secret). `prefix` and `model`: the variables' prefix and the settings they fill."""
    field = re.search(r'field "([^"]+)"', str(exc))
    name = field.group(1) if field else ""
    wanted = (prefix + name).upper()
    for variable, value in sorted(environ.items()):
        upper = variable.upper()
        if upper != wanted and not upper.startswith(wanted + ENV_NESTED_DELIMITER):
            continue
        path = [p.lower() for p in upper[len(prefix):].split(ENV_NESTED_DELIMITER)]
        try:
            json.loads(value)
        except ValueError as err:
            form = _json_form(model, path)
            if form.startswith("a JSON object of"):
                form += f", or one {variable}{ENV_NESTED_DELIMITER}<FIELD> variable per field"
            return f"{variable}: not valid JSON ({err}); expected {form}"
    return f"{prefix}{name.upper()}: cannot be read ({exc.__cause__ or exc})"


def _json_form(model: type[BaseModel], path: Sequence[str]) -> str:
    """The JSON a variable for the field at `path` takes, in words."""
    annotation: Any = model
    for part in path:
        fields = getattr(annotation, "model_fields", {})
        if part not in fields:
            return "JSON"
        annotation = fields[part].annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"a JSON object of {'.'.join(path)}'s fields, e.g. {{\"{next(iter(annotation.model_fields))}\": ...}}"
    text = str(annotation)
    if text.startswith("tuple") or text.startswith("list"):
        return 'a JSON array, e.g. ["first", "second"]'
    if text.startswith("dict"):
        return 'a JSON object, e.g. {"key": "value"}'
    return f"JSON ({text})"


def _os_environ() -> Mapping[str, str]:
    import os

    return os.environ


def env_names(overrides: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The variable names behind a mapping from `environment_overrides`, for messages."""
    names: list[str] = []
    for key, value in overrides.items():
        name = f"{prefix}{ENV_NESTED_DELIMITER if prefix else ENV_PREFIX}{key.upper()}"
        names += env_names(value, name) if isinstance(value, Mapping) and key not in FREE_TABLES else [name]
    return names


# The label of the `WORKSURFACE_*` layer in `Config.load` (an error names the variable itself).
ENV_LAYER = f"{ENV_PREFIX}* variables"


def _problems(exc: ValidationError, layers: Sequence[tuple[str, Mapping[str, Any]]],
              variables: Sequence[str] = ()) -> str:
    """pydantic's errors as one line: per source (a file, a variable, the arguments), the keys that
    are wrong, what is wrong with each, and the value given."""
    by_origin: dict[str, list[str]] = {}
    for error in exc.errors():
        origin = _origin(tuple(error["loc"]), layers, variables)
        by_origin.setdefault(origin, []).append(_problem(error))
    return "; ".join(f"{origin}: invalid configuration: {'; '.join(problems)}" for origin, problems in by_origin.items())


def _origin(loc: tuple[Any, ...], layers: Sequence[tuple[str, Mapping[str, Any]]], variables: Sequence[str]) -> str:
    """Where the value at `loc` came from: the last layer that holds it; for the environment, the
    variable (the longest name the location matches)."""
    if not layers:
        return "<defaults>"
    if not loc:
        return " and ".join(label for label, _ in layers)
    for label, layer in reversed(layers):
        if not _holds(layer, loc):
            continue
        if label != ENV_LAYER:
            return label
        for n in range(len(loc), 0, -1):
            wanted = ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(p) for p in loc[:n]).upper()
            named = [v for v in variables if v.upper() == wanted]
            if named:
                return named[0]
        return label
    return layers[-1][0]


def _holds(layer: Mapping[str, Any], loc: tuple[Any, ...]) -> bool:
    node: Any = layer
    for part in loc:
        if not isinstance(node, Mapping):
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def _problem(error: Any) -> str:
    """One pydantic error as `section.key: what is wrong (got value)`."""
    if error.get("type") == "value_error" and not error["loc"]:
        return _sentence(error)     # a whole-configuration check names its own key
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    value = error.get("input")
    got = f" (got {value!r})" if error["loc"] and isinstance(value, (str, int, float, bool)) else ""
    return f"{where}: {_sentence(error)}{got}"


def _sentence(error: Any) -> str:
    """pydantic's message, except a choice written as a pattern (`^(a|b|c)$`), which reads as its
    choices, and an unknown key, which reads as the settings it could be."""
    if error.get("type") == "extra_forbidden":
        return _not_a_setting(tuple(error["loc"]))
    pattern = (error.get("ctx") or {}).get("pattern", "")
    if error.get("type") == "string_pattern_mismatch" and pattern.startswith("^(") and pattern.endswith(")$"):
        options = pattern[2:-2].split("|")
        return "must be " + (options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1])
    return str(error["msg"]).removeprefix("Value error, ")


def _not_a_setting(loc: tuple[Any, ...]) -> str:
    """An unknown key: not a setting, and the closest of the settings at its place."""
    model: Any = Config
    for part in loc[:-1]:
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return "not a setting"
        model = fields[part].annotation
    names = sorted(getattr(model, "model_fields", {}))
    close = difflib.get_close_matches(str(loc[-1]), names, n=1)
    where = f"of {'.'.join(map(str, loc[:-1]))}" if len(loc) > 1 else "at the top level"
    return "not a setting" + (f" (did you mean {close[0]}?)" if close else f" (the settings {where}: {', '.join(names)})")


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


def read_config_table(path: Path) -> tuple[dict[str, Any], str]:
    """The settings in a found file and the sha256 of the bytes they were read from (what a trust
    record is checked against): pyproject's `[tool.worksurface]`; in worksurface.toml either the bare
    keys or the same `[tool.worksurface]` table (so a snippet copied from pyproject works)."""
    data, sha = _read_toml_digest(path)
    tool = data.get("tool")
    table = tool.get("worksurface") if isinstance(tool, dict) else None
    if path.name == "pyproject.toml" or (isinstance(table, dict) and set(data) == {"tool"}):
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.worksurface] must be a table")
        return table, sha
    return data, sha


def _read_toml(path: Path) -> dict[str, Any]:
    return _read_toml_digest(path)[0]


def _read_toml_digest(path: Path) -> tuple[dict[str, Any], str]:
    # Read once: the bytes parsed are the bytes hashed, so a file swapped in between is never trusted.
    try:
        raw = path.read_bytes()
        return tomllib.loads(raw.decode("utf-8")), trust.digest(raw)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
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
           "environment_overrides", "field_paths", "find_config_file", "read_config_table"]
