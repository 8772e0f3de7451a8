"""Wire formats of the two HTTP APIs the LLM summarizer speaks: OpenAI-compatible Chat Completions
and Anthropic Messages. Only what a one-shot summary needs: a system prompt, one user message, text
back."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..core.errors import ConfigError, SummarizerError

# Anthropic requires an API version header; this is the stable one every Messages model accepts.
ANTHROPIC_VERSION = "2023-06-01"

# Error texts meaning "the request is over the model's context window" (Anthropic, OpenAI, vLLM and
# other OpenAI-compatible servers); dropping old rounds can fix these, retrying as is cannot.
PROMPT_TOO_LONG_MARKERS = ("prompt is too long", "context_length_exceeded", "maximum context length",
                           "request_too_large", "input is too long")
PROMPT_TOO_LONG_STATUSES = (400, 413)

# "prompt is too long: 215000 tokens > 200000 maximum" (Anthropic).
_GAP_OVER_RE = re.compile(r"([\d,]+)\s*tokens?\s*>\s*([\d,]+)")
# "maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens" (OpenAI).
_GAP_MAX_RE = re.compile(r"maximum context length is ([\d,]+) tokens.*?(?:resulted in|requested) ([\d,]+)",
                         re.DOTALL)


@dataclass(frozen=True)
class Provider:
    name: str
    default_base_url: str
    default_key_env: str
    path: str
    headers: Callable[[str | None], dict[str, str]]
    body: Callable[[str, str, str, int], dict[str, Any]]
    parse: Callable[[Any], str]


def _openai_headers(key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"} if key else {}


def _openai_body(model: str, system: str, user: str, max_tokens: int) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def _openai_parse(data: Any) -> str:
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise SummarizerError(f"openai: unexpected response shape: {_short(data)}") from None
    if isinstance(content, list):  # some compatible servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise SummarizerError(f"openai: message content is not text: {_short(content)}")
    return content


def _anthropic_headers(key: str | None) -> dict[str, str]:
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if key:
        headers["x-api-key"] = key
    return headers


def _anthropic_body(model: str, system: str, user: str, max_tokens: int) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "temperature": 0, "system": system,
            "messages": [{"role": "user", "content": user}]}


def _anthropic_parse(data: Any) -> str:
    try:
        blocks = data["content"]
        return "".join(b["text"] for b in blocks if b.get("type") == "text")
    except (KeyError, TypeError, AttributeError):
        raise SummarizerError(f"anthropic: unexpected response shape: {_short(data)}") from None


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "/chat/completions",
                       _openai_headers, _openai_body, _openai_parse),
    "anthropic": Provider("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", "/messages",
                          _anthropic_headers, _anthropic_body, _anthropic_parse),
}


def get_provider(name: str) -> Provider:
    try:
        return PROVIDERS[name]
    except KeyError:
        raise ConfigError(f"unknown summarizer provider {name!r} (known: {', '.join(PROVIDERS)})") from None


def error_message(body: bytes) -> str:
    """The human-readable message of an error response (both APIs nest it under "error")."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:500]
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        parts = [str(err[k]) for k in ("type", "code", "message") if err.get(k)]
        return ": ".join(parts) or _short(err)
    return str(err)[:500]


def is_prompt_too_long(status: int, message: str) -> bool:
    low = message.lower()
    return status in PROMPT_TOO_LONG_STATUSES and any(m in low for m in PROMPT_TOO_LONG_MARKERS)


def token_gap(message: str) -> int | None:
    """How many tokens over the limit the request was, when the error message says."""
    over = _GAP_OVER_RE.search(message)
    if over:
        return _int(over.group(1)) - _int(over.group(2))
    maxed = _GAP_MAX_RE.search(message)
    if maxed:
        return _int(maxed.group(2)) - _int(maxed.group(1))
    return None


def _int(digits: str) -> int:
    return int(digits.replace(",", ""))


def _short(value: Any) -> str:
    return repr(value)[:200]
