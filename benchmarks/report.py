"""Markdown tables and atomic writes for the results files."""

from __future__ import annotations

import json
import math
from typing import Any, Sequence



def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; columns holding only numbers are right-aligned, the others left."""
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and bool(rows)
               for i in range(len(headers))]
    align = ["---:" if n else "---" for n in numeric]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def caption(command: str, machine: str, runs: str) -> str:
    """The line every table carries: how it was made, where, and what the figures aggregate."""
    return f"_Command: `{command}`. Machine: {machine}. {runs}_"


def dumps(results: Any) -> str:
    """JSON with NaN written as null (strict JSON readers reject NaN)."""
    return json.dumps(_clean(results), indent=2, ensure_ascii=False) + "\n"


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
