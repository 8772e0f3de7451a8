"""The gateway's settings: where it listens, where it forwards, where sessions live, what it adds.

Values come from the command line, a TOML file (`--config`: these keys at the top level, and a
`[session]` table with worksurface's own configuration, the keys of worksurface.toml), and
environment variables named `WORKSURFACE_GATEWAY_<FIELD>` (the bearer token is best given there).
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..core.config import Config
from ..core.errors import ConfigError

# Loopback: a gateway reachable from other machines would forward their requests with the keys they
# send; binding elsewhere is an explicit choice.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8788
ANTHROPIC_API = "https://api.anthropic.com"
OPENAI_API = "https://api.openai.com"


# The one name given for the token wherever the gateway refuses to go without one.
TOKEN_VARIABLE = "WORKSURFACE_GATEWAY_TOKEN"


class ExposedGatewayError(ConfigError):
    """A gateway asked to listen beyond this machine with no token: anyone who can reach it could send
    requests through it and read its sessions."""


def is_loopback(host: str | None) -> bool:
    """`host` (an address to bind or a peer's address) reaches this machine only: 127.0.0.0/8, ::1
    (IPv4-mapped too) or `localhost`. Any other name or address, or none, is not."""
    if not host:
        return False
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def check_network_policy(config: "GatewayConfig") -> None:
    """Loopback needs no token; any other bind address needs one (ExposedGatewayError otherwise)."""
    if not config.token and not is_loopback(config.host):
        raise ExposedGatewayError(
            f"--host {config.host or '(empty: every interface)'} is reachable from other machines: set a "
            f"token ({TOKEN_VARIABLE}, or `token` in --config) that clients send as X-Worksurface-Token, or "
            "listen on 127.0.0.1")


def default_store() -> str:
    """Session data under the user's state directory (XDG), never the working directory."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(state) / "worksurface" / "gateway")


class GatewayConfig(BaseSettings):
    """Everything `worksurface serve` can be told."""

    model_config = SettingsConfigDict(env_prefix="WORKSURFACE_GATEWAY_", extra="forbid", frozen=True)

    host: str = Field(DEFAULT_HOST, description="Address to listen on (loopback by default).")
    port: int = Field(DEFAULT_PORT, ge=0, le=65535, description="Port to listen on (0: any free port).")
    upstream: str | None = Field(None, description="One upstream base URL for every API (the provider, "
                                                   "or another proxy); overrides the two below.")
    anthropic_upstream: str = Field(ANTHROPIC_API, description="Where Anthropic Messages requests go.")
    openai_upstream: str = Field(OPENAI_API, description="Where OpenAI Chat Completions and Responses go.")
    store: str = Field(default_factory=default_store, description="Session store: a directory (one "
                       "subdirectory per session) or a postgresql:// URL.")
    token: str | None = Field(None, description="Bearer token clients must send to the gateway itself "
                              "(X-Worksurface-Token or Proxy-Authorization) on every route but /healthz; "
                              "required to listen beyond loopback. None: only loopback peers are served.")
    offer_fetch: bool = Field(False, description="Add a fetch_artifact tool to each request and answer "
                              "the model's calls to it, so a cleared result can be read back.")
    cache_edits: bool = Field(False, description="The upstream supports Anthropic cache_edits: results "
                              "worksurface clears are deleted from the cached prefix instead of re-sent.")
    json_logs: bool = Field(False, description="One JSON object per log line (for log collectors).")
    upstream_timeout: float = Field(600.0, gt=0, description="Seconds an upstream may take to answer "
                                    "(between bytes on a stream).")
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to connect to the upstream.")
    worker_threads: int = Field(4, ge=1, description="Threads that read and prepare requests (one "
                                "conversation at a time each): a slow conversation holds one, never the others. "
                                "The work is Python (one core at a time): more threads share it more finely, "
                                "fewer finish each request sooner.")
    max_open_sessions: int = Field(256, ge=1, description="Sessions kept open in memory; the least "
                                   "recently used beyond this are closed (their data stays in the store).")
    hot_sessions: bool | None = Field(None, description="Keep an open session's state in memory and write "
                                      "it to the store behind the request (session.writebehind): each "
                                      "answer's end waits until the call is stored. The gateway must own "
                                      "its sessions; None: on for a directory store, off for PostgreSQL, "
                                      "whose replicas read what the others wrote before every call.")
    collect_interval: float = Field(30.0, gt=0, description="Seconds between the full garbage collections "
                                    "the gateway runs at a quiet moment (gateway.collector), instead of "
                                    "Python's own, which would stop whichever request was under way.")
    session: dict[str, Any] = Field(default_factory=dict, description="worksurface configuration for "
                                    "every session (window, stages, ...: the keys of worksurface.toml).")

    def upstream_for(self, api: str) -> str:
        """The base URL requests of `api` ("anthropic" or an OpenAI one) are forwarded to."""
        if self.upstream:
            return self.upstream
        return self.anthropic_upstream if api == "anthropic" else self.openai_upstream

    def writes_behind(self) -> bool:
        """Whether sessions are kept hot with their writes behind the request (`hot_sessions`)."""
        return self.hot_sessions if self.hot_sessions is not None else "://" not in self.store

    def session_config(self) -> Config:
        """The worksurface configuration sessions start from."""
        return Config.from_mapping(dict(self.session), source="gateway [session]")


def load_config(path: str | os.PathLike[str] | None = None, **overrides: Any) -> GatewayConfig:
    """Settings from `path` (TOML), then the environment, then `overrides` (None values ignored)."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        config = GatewayConfig(**data)
        config.session_config()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path or 'gateway settings'}: {problems}") from None
    check_network_policy(config)
    return config
