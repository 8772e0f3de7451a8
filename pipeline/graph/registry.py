"""Every stage and reinjector worksurface ships, imported statically and listed in their order: the
one place that names them (the graph composes whatever it is given; the session passes these).

Stages reduce in this order on every call: ingestion (new results, before they are first sent), the
tool-result budget, snip, microcompact, collapse, autocompact. After a compaction the reinjectors
rebuild the working surface in priority order, each within what the ones before it left of the
post-compact target, so budgets shrink from the least valuable end: the status first (it reserves
its share and runs last, to report the rebuilt view), then constraints, plan, files, skills, tools,
`details` (what the summary had no room for, packed into whatever the others left), and `results`
(the newest tool results the view no longer shows, in what is still left).

Third-party parts join these per session (`stages_for`, `reinjectors_for`: installed entry points and
the config's `plugins` references, docs/plugins.md); the shipped ones stay imported statically here.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Sequence, TypeVar

from worksurface.reinjectors import constraints, details, files, plan, results, skills, status, tools
from worksurface.stages import autocompact, budget, collapse, ingest, microcompact, snip

from ..core.config import Config, ReinjectConfig
from ..core.errors import PluginError
from ..core.plugins import REINJECTORS_GROUP, STAGES_GROUP, Found, installed, load_entry_point, load_reference
from ..engine.state import CONTEXT_FIELDS, Reinjector, Stage, own_section, part_config
from .compose import REINJECT

STAGES: tuple[Stage[Any], ...] = (ingest.STAGE, budget.STAGE, snip.STAGE, microcompact.STAGE, collapse.STAGE,
                                  autocompact.STAGE)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
REINJECTORS: tuple[Reinjector, ...] = (status.REINJECTOR, constraints.REINJECTOR, plan.REINJECTOR, files.REINJECTOR,
                                       skills.REINJECTOR, tools.REINJECTOR, details.REINJECTOR,
                                       results.REINJECTOR)


# --- third-party parts (docs/plugins.md) --------------------------------------------------------------
# A third-party stage declares where it runs (`Stage.after`: the stage it follows) and a reinjector may
# (`Reinjector.after`; else it runs after all others, on what they leave of the target). Installed ones
# are found by their entry points, others are `module:OBJECT` references in plugins.stages and
# plugins.reinjectors; entry points come first (by name), then the config's references in their order,
# and parts placed after the same one keep that order.

def stages_for(config: Config) -> tuple[Stage[Any], ...]:
    """The shipped stages with the third-party ones `config` brings, each where it declares."""
    added = _added(config, Stage, STAGES_GROUP, "plugins.stages", config.plugins.stages)
    if not added:
        return STAGES
    placed: list[Stage[Any]] = list(STAGES)
    for part, source in added:
        if part.after is None:
            raise PluginError(f"stage {part.name!r} declares no place: set Stage.after to the stage it runs after "
                              f"(one of {', '.join(s.name for s in placed)})", source=source)
        placed.insert(_place(placed, part.after, STAGE_NAMES, part.name, "stage", source), part)
    return tuple(placed)


def reinjectors_for(config: Config) -> tuple[Reinjector, ...]:
    """The shipped reinjectors with the third-party ones `config` brings, each where it declares."""
    added = _added(config, Reinjector, REINJECTORS_GROUP, "plugins.reinjectors", config.plugins.reinjectors)
    placed: list[Reinjector] = list(REINJECTORS)
    shipped = tuple(r.name for r in REINJECTORS)
    for part, source in added:
        if not (isinstance(part.config, type) and issubclass(part.config, ReinjectConfig)):
            raise PluginError(f"reinjector {part.name!r}: its config must be ReinjectConfig or a subclass of it",
                              source=source)
        at = len(placed) if part.after is None else _place(placed, part.after, shipped, part.name, "reinjector",
                                                           source)
        placed.insert(at, part)
    return tuple(placed) if added else REINJECTORS


P = TypeVar("P", Stage, Reinjector)


def _added(config: Config, kind: type[P], group: str, key: str, references: Sequence[str]) -> list[tuple[P, str]]:
    """The third-party parts of one kind: installed entry points (unless plugins.entry_points is off),
    then the config's references, each checked and with its source for messages."""
    found = [load_entry_point(group, ep) for ep in installed(group)] if config.plugins.entry_points else []
    found += [load_reference(ref, f"{key}[{i}]") for i, ref in enumerate(references)]
    parts: list[tuple[P, str]] = []
    # A report tells stages from reinjectors by name, and plugins.options is keyed by it: no shipped
    # part's name of either kind is free.
    names = {s.name for s in STAGES} | {r.name for r in REINJECTORS} | {REINJECT}
    for item in found:
        part = _as_part(item, kind)
        if part.name in names:
            raise PluginError(f"{kind.__name__.lower()} name {part.name!r} is taken (names must be distinct)",
                              source=item.source)
        if not part.reads <= CONTEXT_FIELDS:
            raise PluginError(f"{part.name!r} reads {sorted(part.reads - CONTEXT_FIELDS)}, which StageContext does "
                              f"not have (its fields: {', '.join(sorted(CONTEXT_FIELDS))})", source=item.source)
        names.add(part.name)
        parts.append((part, item.source))
    return parts


def _as_part(item: Found, kind: type[P]) -> P:
    """What an entry point or reference names, as a part: the part itself, a module's `STAGE` /
    `REINJECTOR` (as the shipped modules declare theirs), or what a class or function without
    arguments returns."""
    value = item.value
    if isinstance(value, ModuleType):
        value = getattr(value, kind.__name__.upper(), None)
    elif not isinstance(value, kind) and callable(value):
        try:
            value = value()
        except Exception as exc:
            raise PluginError(f"calling it failed ({type(exc).__name__}: {exc})", source=item.source) from exc
    if not isinstance(value, kind):
        raise PluginError(f"names {type(value).__name__}, not a worksurface.engine.state.{kind.__name__} "
                          f"(nor a module declaring {kind.__name__.upper()}, nor a callable returning one)",
                          source=item.source)
    return value


def _place(placed: Sequence[Stage[Any] | Reinjector], after: str, shipped: Sequence[str], name: str, kind: str,
           source: str) -> int:
    """The index right after the part named `after` and any added parts already placed behind it."""
    names = [p.name for p in placed]
    if after not in names:
        raise PluginError(f"{kind} {name!r} runs after {after!r}, which is no {kind} (known: {', '.join(names)})",
                          source=source)
    at = names.index(after) + 1
    while at < len(names) and names[at] not in shipped:
        at += 1
    return at


def check_plugin_options(config: Config, stages: Sequence[Stage[Any]], reinjectors: Sequence[Reinjector]) -> None:
    """The settings of every part with a config type of its own validate now (a bad value fails when
    the session opens, not at the first compaction), and plugins.options names only such parts (a
    misspelt name would be silently ignored)."""
    parts: list[Stage[Any] | Reinjector] = [*stages, *reinjectors]
    own = [p for p in parts if own_section(p.config) is None]
    for part in own:
        part_config(config, part.config, part.name)
    unknown = sorted(set(config.plugins.options) - {p.name for p in own})
    if unknown:
        raise PluginError(f"no added stage or reinjector with settings of its own is named "
                          f"{', '.join(map(repr, unknown))} (loaded: {', '.join(p.name for p in own) or 'none'})",
                          source="plugins.options")
