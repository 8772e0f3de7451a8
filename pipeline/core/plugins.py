"""Third-party parts, found without editing the package: the entry points installed distributions
declare (`importlib.metadata`) and `module:OBJECT` references written in config. This module only
finds and loads objects, with errors that name where each came from; what an object must be (a
Stage, a Reinjector, a Summarizer) is checked by the floor that uses it (graph/registry.py,
summarizers/__init__.py)."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .errors import PluginError

STAGES_GROUP = "worksurface.stages"
REINJECTORS_GROUP = "worksurface.reinjectors"
SUMMARIZERS_GROUP = "worksurface.summarizers"


@dataclass(frozen=True)
class Found:
    """A loaded third-party object and where it came from (for every later error message)."""

    value: Any
    source: str


GROUPS = (STAGES_GROUP, REINJECTORS_GROUP, SUMMARIZERS_GROUP)


def installed(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of `group` that the distributions on sys.path declare, by name (a stable
    order, so the parts they add always compose the same way)."""
    return _installed(tuple(sys.path)).get(group, ())


@lru_cache(maxsize=4)
def _installed(path: tuple[str, ...]) -> dict[str, tuple[EntryPoint, ...]]:
    # One scan for every group (reading each distribution's metadata costs tens of milliseconds), kept
    # per sys.path: a changed path (a virtualenv activated in-process, a test's temporary
    # distribution) is scanned again.
    found = entry_points()
    return {group: tuple(sorted(found.select(group=group), key=lambda ep: (ep.name, ep.value))) for group in GROUPS}


def entry_point_source(group: str, ep: EntryPoint) -> str:
    return f"entry point {group}:{ep.name} = {ep.value!r}"


def load_entry_point(group: str, ep: EntryPoint) -> Found:
    """The object an entry point names; PluginError naming it when it does not load."""
    source = entry_point_source(group, ep)
    try:
        return Found(ep.load(), source)
    except Exception as exc:  # an import of someone else's package may fail with anything
        raise PluginError(f"does not load ({type(exc).__name__}: {exc})", source=source) from exc


def is_reference(text: str) -> bool:
    """Whether `text` is written as a `module:OBJECT` reference (a name never holds a colon)."""
    return ":" in text


def load_reference(reference: str, key: str) -> Found:
    """The object `module:OBJECT` names (OBJECT may be dotted: `pkg.mod:Class.attr`; `module` alone
    is the module); PluginError naming the config `key` when it does not load."""
    source = f"{key} = {reference!r}"
    module_name, _, attrs = reference.partition(":")
    if not module_name or not all(p.isidentifier() for p in module_name.split(".")) or (
            attrs and not all(p.isidentifier() for p in attrs.split("."))):
        raise PluginError("not a module:OBJECT reference (e.g. 'mypackage.stages:STAGE')", source=source)
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise PluginError(f"cannot import module {module_name!r} ({type(exc).__name__}: {exc})",
                          source=source) from exc
    for attr in attrs.split(".") if attrs else ():
        try:
            value = getattr(value, attr)
        except AttributeError:
            raise PluginError(f"{module_name} has no attribute {attrs!r}", source=source) from None
    return Found(value, source)


__all__ = ["Found", "REINJECTORS_GROUP", "STAGES_GROUP", "SUMMARIZERS_GROUP", "installed", "is_reference",
           "load_entry_point", "load_reference"]
