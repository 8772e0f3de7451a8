"""`worksurface config`: the configuration in effect here, its JSON schema, and the project files the
user trusts to set more than data (worksurface.core.trust)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core import trust as trusted
from ..core.config import (CONFIG_FILE, ENV_NESTED_DELIMITER, ENV_PREFIX, Config, field_paths, find_config_file,
                           read_config_table)
from ..core.errors import WorksurfaceError
from .app import AGENT_HELP, app, fail
from .output import echo

config_app = typer.Typer(help=f"The configuration: defaults, then your own ~/.config/worksurface/"
                              f"{trusted.USER_CONFIG_FILE}, then the project's {CONFIG_FILE} or "
                              f"[tool.worksurface] in pyproject.toml (data-only settings until you trust it: "
                              f"{trusted.TRUST_COMMAND} DIR), then {ENV_PREFIX}* variables (a section's field "
                              f"after {ENV_NESTED_DELIMITER!r}: {ENV_PREFIX}AUTOCOMPACT{ENV_NESTED_DELIMITER}"
                              "SUMMARY_TOKENS=6000).", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
def show(directory: Optional[Path] = typer.Option(None, "--dir",
                                                  help="Where to look for the configuration file (default: the "
                                                       "current folder, then its parents)."),
         agent: Optional[str] = typer.Option(None, "--agent", help=AGENT_HELP)) -> None:
    """Print the configuration in effect (every field, as JSON) and, on stderr, where it came from;
    with --agent, as that agent's sessions use it (its `agents` settings merged in)."""
    try:
        config = Config.load(directory)
        if agent is not None:
            config = config.for_agent(agent)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    found = find_config_file(directory or Path.cwd())
    user = trusted.user_config_file()
    if user.is_file():
        echo(f"your configuration file: {user}", err=True)
    echo(f"configuration file: {found or 'none (defaults)'}", err=True)
    typer.echo(config.model_dump_json(indent=2))


@config_app.command("trust")
def trust(directory: Path = typer.Argument(Path("."), help="The folder whose configuration file (found as every "
                                           "command finds it: there, then its parents) you trust."),
          list_trusted: bool = typer.Option(False, "--list", help="List the files you trust and whether each "
                                            "is still as you trusted it."),
          revoke: bool = typer.Option(False, "--revoke", help="Stop trusting the folder's configuration file.")) -> None:
    """Trust a project's configuration file as it is now, so it may set every setting (plugins, the
    summarizer and its endpoint, the workspace root) and not only data; the file's sha256 is recorded
    in your configuration folder, and a changed file must be trusted again."""
    try:
        if list_trusted:
            _list_trusted()
            return
        found = find_config_file(directory)
        if found is None:
            raise fail(f"{directory}: no {CONFIG_FILE} or pyproject.toml with [tool.worksurface] applies here; "
                       "nothing to trust")
        if revoke:
            gone = trusted.revoke(found)
            echo(f"{found}: no longer trusted" if gone else f"{found}: was not trusted; nothing changed")
            return
        keys = trusted.user_only_keys(read_config_table(found)[0], field_paths())
        sha = trusted.trust(found)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    sets = f"; it sets {', '.join(keys)}" if keys else "; it sets only data-only settings now"
    echo(f"{found}: trusted as it is now (sha256 {sha[:16]}){sets}. A change to it needs trusting again.")


def _list_trusted() -> None:
    files = trusted.trusted_files()
    if not files:
        echo(f"no trusted files (in {trusted.user_config_dir() / trusted.TRUST_FILE})")
    for name, sha in files.items():
        path = Path(name)
        state = ("missing" if not path.is_file() else
                 "trusted" if trusted.digest(path.read_bytes()) == sha else "changed since trusted: not applied")
        echo(f"{path}: {state} (sha256 {sha[:16]})")


@config_app.command("schema")
def schema() -> None:
    """Print the configuration's JSON schema, with every field's description (for editors and docs)."""
    typer.echo(json.dumps(Config.model_json_schema(), indent=2))
