"""Names a package exports but imports on first use (PEP 562): `import worksurface` and the pytest
plugin stay quick, and LangGraph, tiktoken and the fact parsers load only when something needs them."""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Mapping


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
