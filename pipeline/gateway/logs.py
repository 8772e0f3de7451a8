"""Structured logs: every gateway line carries its fields (`extra={"fields": {...}}`), printed as
`key=value` pairs or, with `--json-logs`, as one JSON object. Provider keys and request bodies are
never among them: the gateway logs sizes, ids and decisions only. A credential inside a URL or a
libpq connection string (a store's `postgresql://user:password@host`, an upstream proxy's user
info, `password=...`) is shown as `***` in every line, whichever logger wrote it."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

LOGGER = "worksurface.gateway"
log = logging.getLogger(LOGGER)
log.addHandler(logging.NullHandler())


HIDDEN = "***"
# scheme://user:password@host: the password runs to the last "@" before the host's "/" (libpq reads
# user info up to the first "@" or "/"; a raw "@" in a password is hidden whole either way).
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:@\s/]*:)[^\s/]*@")
# scheme://token@host (user info without a colon, as some proxies take a key)
_URL_USER = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)[^:@\s/]+@")
# password=... in a URL's query (up to the next parameter) and in a libpq keyword string (up to the
# next blank, quoted values whole).
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|passwd|pwd|sslpassword)=)[^&#\s]*", re.IGNORECASE)
_KEYWORD_PASSWORD = re.compile(r"(?P<head>(?<![?&\w])(?:password|passwd|pwd|sslpassword|pgpassword)\s*=\s*)"
                               r"(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with every credential a URL or connection string holds replaced by ***."""
    if "://" not in text and "=" not in text:
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{HIDDEN}@", text)
    text = _URL_USER.sub(lambda m: f"{m['head']}{HIDDEN}@", text)
    text = _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{HIDDEN}", text)
    return _KEYWORD_PASSWORD.sub(lambda m: f"{m['head']}{HIDDEN}", text)


def _redacted(value: Any) -> Any:
    """A log field's value with its strings redacted (nested lists and objects too)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


def event(level: int, message: str, **fields: Any) -> None:
    """Log `message` with structured fields."""
    log.log(level, message, extra={"fields": fields})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        doc.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        return json.dumps(_redacted(doc), ensure_ascii=False, default=lambda v: redact(str(v)))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        fields = " ".join(f"{k}={_text(v)}" for k, v in (getattr(record, "fields", None) or {}).items())
        line = f"{stamp} {record.levelname.lower():7} {record.getMessage()}" + (f" {fields}" if fields else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(text) if (" " in text or not text) else text


def configure(json_logs: bool, level: int = logging.INFO) -> None:
    """Send the gateway's logs (and worksurface's notices) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else TextFormatter())
    for name in (LOGGER, "worksurface"):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, "_worksurface_gateway", False)]:
            logger.removeHandler(old)
        handler._worksurface_gateway = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
