"""Running the gateway: private files, logs, uvicorn on the configured address."""

from __future__ import annotations

import logging
import os
from typing import Any

from .app import create_app
from .config import GatewayConfig, check_network_policy
from .logs import configure, event

# Session data, artifacts and logs the gateway writes are the user's alone.
PRIVATE_UMASK = 0o077


def serve(config: GatewayConfig, *, ready: Any = None) -> None:
    """Serve until interrupted. `ready(port)` is called once the socket is listening."""
    import uvicorn

    check_network_policy(config)        # before anything listens
    os.umask(PRIVATE_UMASK)
    configure(config.json_logs)
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                           access_log=False, lifespan="on", timeout_graceful_shutdown=5))
    original = server.startup

    async def startup(sockets: Any = None) -> None:
        await original(sockets)
        port = server.servers[0].sockets[0].getsockname()[1] if server.servers else config.port
        event(logging.INFO, "worksurface gateway listening", host=config.host, port=port, store=config.store,
              upstream=config.upstream or {"anthropic": config.anthropic_upstream, "openai": config.openai_upstream})
        if ready is not None:
            ready(port)

    server.startup = startup  # type: ignore[method-assign]
    server.run()
