"""`worksurface serve`: a gateway that speaks the providers' APIs (Anthropic Messages, OpenAI Chat
Completions and Responses), recognises each conversation, runs `Session.prepare` on every request
and forwards worksurface's view, so any harness gets the pipeline before every model call.

The gateway sits above the session floor: it imports worksurface.session, formats and core; nothing
below imports it."""

from __future__ import annotations

from .app import Gateway, create_app
from .config import GatewayConfig, load_config
from .server import serve

__all__ = ["Gateway", "GatewayConfig", "create_app", "load_config", "serve"]
