"""`worksurface config`: the configuration in effect here, and its JSON schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..core.config import CONFIG_FILE, ENV_NESTED_DELIMITER, ENV_PREFIX, Config, find_config_file
from ..core.errors import WorksurfaceError
from .app import AGENT_HELP, app, fail

config_app = typer.Typer(help=f"The configuration: defaults, then {CONFIG_FILE} or [tool.worksurface] in "
                              f"pyproject.toml, then {ENV_PREFIX}* variables (a section's field after "
                              f"{ENV_NESTED_DELIMITER!r}: {ENV_PREFIX}AUTOCOMPACT{ENV_NESTED_DELIMITER}"
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
    typer.echo(f"configuration file: {found or 'none (defaults)'}", err=True)
    typer.echo(config.model_dump_json(indent=2))


@config_app.command("schema")
def schema() -> None:
    """Print the configuration's JSON schema, with every field's description (for editors and docs)."""
    typer.echo(json.dumps(Config.model_json_schema(), indent=2))
