"""`worksurface serve`: the context-managing gateway (see worksurface.gateway)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..core.errors import WorksurfaceError
from .app import app, fail


@app.command()
def serve(
    host: Optional[str] = typer.Option(None, "--host", help="Address to listen on (default 127.0.0.1: "
                                       "this machine only)."),
    port: Optional[int] = typer.Option(None, "--port", help="Port to listen on (default 8788; 0: any free port)."),
    upstream: Optional[str] = typer.Option(None, "--upstream", help="Base URL requests are forwarded to "
                                           "(default: api.anthropic.com for Messages, api.openai.com for "
                                           "Chat Completions and Responses)."),
    store: Optional[str] = typer.Option(None, "--store", help="Session store: a directory (default "
                                        "~/.local/state/worksurface/gateway) or a postgresql:// URL."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file: these settings at the top level, "
                                          "worksurface's own under [session]."),
    offer_fetch: Optional[bool] = typer.Option(None, "--offer-fetch/--no-offer-fetch", help="Offer the model "
                                               "a fetch_artifact tool to read back what was cleared."),
    json_logs: Optional[bool] = typer.Option(None, "--json-logs/--text-logs", help="One JSON object per log line."),
    window: Optional[int] = typer.Option(None, "--window", help="The model's context window (sessions' window)."),
) -> None:
    """Run the gateway: point a harness's base URL at it (ANTHROPIC_BASE_URL, a Codex model_provider,
    an SDK's base_url) and every request gets worksurface's view of its conversation."""
    try:
        from ..gateway import load_config, serve as run_gateway
    except ImportError as exc:
        raise fail(f"worksurface serve needs the gateway extra ({exc.name} is missing): "
                   "pip install 'worksurface[gateway]'") from None
    from pydantic_settings import SettingsError

    try:
        settings = load_config(config, host=host, port=port, upstream=upstream, store=store,
                               offer_fetch=offer_fetch, json_logs=json_logs)
        if window is not None:
            settings = settings.model_copy(update={"session": {**settings.session, "window": window}})
            settings.session_config()
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except SettingsError as exc:    # a WORKSURFACE_GATEWAY_* list or table that is not JSON: refuse to start
        raise fail(_settings_error(exc)) from None
    run_gateway(settings)


def _settings_error(exc: Exception) -> str:
    import os

    from ..core.config import settings_error_line
    from ..gateway.config import GatewayConfig

    prefix = str(GatewayConfig.model_config.get("env_prefix") or "")
    return settings_error_line(exc, prefix, os.environ, GatewayConfig)
