"""Names a package exports but imports on first use (PEP 562): `import worksurface` and the pytest
plugin stay quick, and LangGraph, tiktoken and the fact parsers load only when something needs them."""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import Any, Callable, Mapping

from .errors import MissingExtraError


def lazy_getattr(package: str, names: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` resolving each name in `names` from its submodule (`name -> submodule`)
    and caching it in the package's `namespace`."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    return __getattr__


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise MissingExtraError naming the extra to install when any of `modules` is missing, before
    `what` starts (instead of an ImportError traceback halfway through)."""
    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        raise MissingExtraError(what, extra, ", ".join(missing))
