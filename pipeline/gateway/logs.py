"""Structured logs: every gateway line carries its fields (`extra={"fields": {...}}`), printed as
`key=value` pairs or, with `--json-logs`, as one JSON object. Provider keys and request bodies are
never among them: the gateway logs sizes, ids and decisions only."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LOGGER = "worksurface.gateway"
log = logging.getLogger(LOGGER)
log.addHandler(logging.NullHandler())


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
        return json.dumps(doc, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        fields = " ".join(f"{k}={_text(v)}" for k, v in (getattr(record, "fields", None) or {}).items())
        line = f"{stamp} {record.levelname.lower():7} {record.getMessage()}" + (f" {fields}" if fields else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


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
