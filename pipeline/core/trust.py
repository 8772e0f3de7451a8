"""Configuration by trust level: what a project's file may set, and the files the user has trusted.

The user's own sources (their configuration file in the user config folder, `WORKSURFACE_*`
variables, flags and keyword arguments) may set anything. A project's file (`worksurface.toml`,
pyproject's `[tool.worksurface]`, found from the working folder upwards: it comes with the
repository) may set only data: sizes, thresholds, pins, budgets, prices, tool kinds. Settings that
import code, choose where the transcript and an API key are sent, or which files are read are taken
from a project's file only once the user has trusted that file (`worksurface config trust DIR`), which
records the file's sha256 as direnv does: a changed file must be trusted again.

Every field of `Config` is classified below (tests/test_trust.py walks them all): a new field is a
test failure until it is listed here, and an unlisted one is treated as user-only meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from pathlib import Path
from typing import AbstractSet, Any, Literal, Mapping

from .errors import ConfigError, UntrustedConfigError
from .fileio import PRIVATE_FILE_MODE, atomic_write

# The user's configuration folder (XDG), its configuration file and the record of trusted files.
USER_CONFIG_FILE = "config.toml"
TRUST_FILE = "trusted.json"
TRUST_COMMAND = "worksurface config trust"

# Only the user's own sources may set these: each with what it could do from a repository's file.
USER_ONLY: dict[str, str] = {
    "workspace_root": "it chooses the folder whose files are read into the context",
    "autocompact.summarizer": "it names code to import or a model the transcript is sent to",
    "autocompact.summarizer_options": "it names the model endpoint, the base URL and the API key sent there",
    "plugins.entry_points": "it turns on the code installed packages declare",
    "plugins.stages": "it names code to import and run",
    "plugins.reinjectors": "it names code to import and run",
    "plugins.options": "it configures third-party code",
}
# What a project's file may set without being trusted: data that changes how much is kept, never
# which code runs, where anything is sent or which files are read.
PROJECT_SETTINGS: frozenset[str] = frozenset({
    "window", "max_output", "autocompact_buffer", "post_compact_fraction", "autocompact_threshold_tokens",
    "pins", "pin_file_max_bytes", "post_compact_target_tokens", "status_strategy", "status_fold_min", "status_fold_max",
    *(f"budget.{k}" for k in ("max_result_tokens", "max_turn_tokens", "preview_head_tokens", "preview_tail_tokens")),
    *(f"snip.{k}" for k in ("min_gain_tokens", "near_duplicate_ratio", "min_result_tokens")),
    *(f"microcompact.{k}" for k in ("trigger_tokens", "clear_at_least", "keep_recent", "protect_tokens",
                                    "cache_ttl_seconds", "compactable_tools", "excluded_tools")),
    *(f"collapse.{k}" for k in ("trigger_fraction", "min_span_steps", "keep_recent_steps")),
    *(f"autocompact.{k}" for k in ("enabled", "pin_tokens", "keep_tail_tokens", "summary_tokens",
                                   "user_messages_tokens", "max_consecutive_failures", "economic_from",
                                   "text_floor", "text_floor_tokens")),
    *(f"reinject.{k}" for k in ("status_tokens", "constraints_tokens", "plan_tokens", "files_max", "file_tokens",
                                "files_tokens", "skill_tokens", "skills_tokens", "tools_tokens", "results_tokens",
                                "result_tokens", "visible_similarity")),
    *(f"pricing.{k}" for k in ("preset", "input_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok",
                               "output_per_mtok", "cache_ttl_seconds", "min_cache_tokens", "firing_rule", "horizon",
                               "horizon_calls", "max_horizon_calls", "batching")),
    *(f"ingest.{k}" for k in ("enabled", "min_gain_tokens", "repeat_min_run", "json_max_items", "json_keep_head",
                              "json_keep_tail", "blob_min_chars", "log_max_lines", "log_head_lines", "log_tail_lines",
                              "log_max_kept_lines", "exempt_kinds")),
    "hook.surface_tokens",
    *(f"store.{k}" for k in ("connect_timeout_seconds", "reply_timeout_seconds", "statement_timeout_seconds",
                             "lock_timeout_seconds", "idle_in_transaction_seconds", "keepalives_idle_seconds",
                             "keepalives_interval_seconds", "keepalives_count", "tcp_user_timeout_seconds")),
    # A table of per-agent settings: each key in it is classified as the setting it overrides.
    "agents",
})
# The key of `agents` whose entries are settings (checked as such).
AGENTS = "agents"

Verdict = Literal["trusted", "changed", "untrusted"]


def user_config_dir() -> Path:
    """The user's worksurface folder: `$XDG_CONFIG_HOME/worksurface`, else `~/.config/worksurface`."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "worksurface"


def user_config_file() -> Path:
    return user_config_dir() / USER_CONFIG_FILE


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def why_user_only(key: str) -> str | None:
    """Why a project's file may not set the dotted `key` (None: it may); a key under a free table
    (`autocompact.summarizer_options.base_url`) is classified as its table, an unclassified field
    as user-only."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in USER_ONLY:
            return USER_ONLY[prefix]
        if prefix in PROJECT_SETTINGS:
            return None
    return None if _is_section(parts[0]) and len(parts) == 1 else "it is not classified (a bug: tell us)"


def _is_section(name: str) -> bool:
    return any(k.startswith(name + ".") for k in (*PROJECT_SETTINGS, *USER_ONLY))


def user_only_keys(table: Mapping[str, Any], fields: AbstractSet[str] = frozenset(), prefix: str = "") -> list[str]:
    """The dotted keys of a configuration table that only the user's own sources may set: the
    user-only ones, and any of `fields` (every setting's dotted name) not classified yet. A key that is
    no setting at all is left to validation, which names it."""
    found: list[str] = []
    for key, value in table.items():
        path = f"{prefix}{key}"
        if path == AGENTS and not prefix and isinstance(value, Mapping):
            for agent, settings in value.items():
                if isinstance(settings, Mapping):
                    found += [f"{AGENTS}.{agent}.{k}" for k in user_only_keys(settings, fields)]
            continue
        if isinstance(value, Mapping) and (_is_section(path) or any(f.startswith(path + ".") for f in fields)) \
                and path not in USER_ONLY:
            found += user_only_keys(value, fields, path + ".")
            continue
        if path in USER_ONLY or (path not in PROJECT_SETTINGS and path in fields):
            found.append(path)
    return found


def trusted_files() -> dict[str, str]:
    """The files the user trusts, as resolved path -> sha256 of the content they trusted."""
    path = user_config_dir() / TRUST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the trusted files ({exc}); fix or remove it") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise ConfigError(f'{path}: not a record of trusted files (expected {{"files": {{path: sha256}}}}); '
                          "fix or remove it")
    return dict(files)


def _save(files: Mapping[str, str]) -> None:
    atomic_write(user_config_dir() / TRUST_FILE,
                 json.dumps({"files": dict(sorted(files.items()))}, indent=2) + "\n", PRIVATE_FILE_MODE)


def trust(file: Path) -> str:
    """Trust `file` as its content is now; the sha256 recorded."""
    sha = digest(file.read_bytes())
    files = trusted_files()
    files[str(file.resolve())] = sha
    _save(files)
    return sha


def revoke(file: Path) -> bool:
    """Stop trusting `file`; whether it was trusted."""
    files = trusted_files()
    gone = files.pop(str(file.resolve()), None) is not None
    if gone:
        _save(files)
    return gone


def verdict(file: Path, sha: str) -> Verdict:
    """Whether the user trusts `file` with content of digest `sha`."""
    recorded = trusted_files().get(str(file.resolve()))
    return "untrusted" if recorded is None else "trusted" if recorded == sha else "changed"


def check_project_table(file: Path, table: Mapping[str, Any], sha: str, fields: AbstractSet[str] = frozenset()) -> None:
    """UntrustedConfigError when a project's `file` (content digest `sha`) sets a user-only key (see
    `user_only_keys`) and the user has not trusted it as it is: one line naming the keys, why, and the
    command to trust it."""
    keys = user_only_keys(table, fields)
    if not keys:
        return
    state = verdict(file, sha)
    if state == "trusted":
        return
    why = why_user_only(keys[0]) or ""
    changed = " changed since you trusted it, and" if state == "changed" else ""
    raise UntrustedConfigError(
        f"{file}:{changed} sets {', '.join(keys)}, which a project's file may set only once you trust it ({keys[0]}: "
        f"{why}); review it, then: {TRUST_COMMAND} {shlex.quote(str(file.parent))}", keys=tuple(keys), path=str(file))


__all__ = ["PROJECT_SETTINGS", "TRUST_COMMAND", "USER_ONLY", "check_project_table", "digest", "revoke", "trust",
           "trusted_files", "user_config_dir", "user_config_file", "user_only_keys", "verdict", "why_user_only"]
