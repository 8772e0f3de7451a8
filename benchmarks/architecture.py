"""The figures issue 53's "Done when" names, measured from the source (by walking its AST, not by grep),
so the before and after of each step of the redesign can be re-made: `python -m benchmarks.architecture`
(`--root DIR` measures another checkout, `--json` prints them as JSON).

- functions over cyclomatic complexity 20 (radon's rank D or worse, `radon cc -n D`)
- distinct string keys read from `Message.meta` outside formats/ (`x.meta["k"]`, `x.meta.get("k")`,
  `"k" in x.meta`), and how many reads
- `Session`'s attributes and the distinct store keys the session reads or writes (`get_meta`/`set_meta`)
- `StageContext`'s fields
- modules in status/ that import facts/ or use `re`
- source files a fact kind touches: for each kind of the ledger's registry (`ledger.kinds.KINDS`), the
  files that name its record type or its name as a string (an estimate of what a new kind would touch)
- stage reports whose caller reads the skip reason's text (`.skipped.startswith(...)`, `.skipped == "..."`)
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
from pathlib import Path
from typing import Any, Iterator

SOURCE_DIRS = ("pipeline", "stages", "reinjectors")
COMPLEXITY_OVER = 20


def source_files(root: Path) -> Iterator[Path]:
    for d in SOURCE_DIRS:
        yield from sorted((root / d).rglob("*.py"))


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def complex_functions(root: Path) -> list[str]:
    """`file:function (complexity)` of every function or method over COMPLEXITY_OVER."""
    from radon.complexity import cc_visit

    out = []
    for path in source_files(root):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            blocks = [block] + list(getattr(block, "closures", [])) + list(getattr(block, "methods", []))
            for b in blocks:
                if b.complexity > COMPLEXITY_OVER and type(b).__name__ == "Function":
                    out.append(f"{path.relative_to(root)}:{b.fullname} ({b.complexity})")
    return sorted(set(out))


def _is_meta(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "meta") or (isinstance(node, ast.Name) and node.id == "meta")


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def meta_reads(root: Path) -> dict[str, int]:
    """Reads of `meta` under a string key outside formats/, by key."""
    found: dict[str, int] = {}
    for path in source_files(root):
        if (root / "pipeline" / "formats") in path.parents:
            continue
        for node in ast.walk(parse(path)):
            key = None
            if isinstance(node, ast.Subscript) and _is_meta(node.value) and isinstance(node.ctx, ast.Load):
                key = _str(node.slice)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and _is_meta(node.func.value) and node.args):
                key = _str(node.args[0])
            elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
                  and _is_meta(node.comparators[0])):
                key = _str(node.left)
            if key is not None:
                found[key] = found.get(key, 0) + 1
    return dict(sorted(found.items()))


def _class(root: Path, rel: str, name: str) -> ast.ClassDef:
    for node in ast.walk(parse(root / rel)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"{rel}: no class {name}")


def session_attributes(root: Path) -> list[str]:
    """The attributes a `Session` instance holds: every `self.x = ...` in its methods, and its class annotations."""
    cls = _class(root, "pipeline/session/session.py", "Session")
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                    names.add(e.attr)
    return sorted(names)


def store_keys(root: Path) -> list[str]:
    """Distinct keys the session's modules pass to the store's `get_meta`/`set_meta` (a module-level
    constant is resolved to its string)."""
    keys: set[str] = set()
    for path in sorted((root / "pipeline" / "session").glob("*.py")):
        tree = parse(path)
        consts = {t.id: _str(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name) and _str(n.value) is not None}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get_meta", "set_meta") and node.args):
                arg = node.args[0]
                key = _str(arg) or (consts.get(arg.id) if isinstance(arg, ast.Name) else None)
                if key is not None:
                    keys.add(key)
    return sorted(keys)


def stage_context_fields(root: Path) -> list[str]:
    cls = _class(root, "pipeline/engine/state.py", "StageContext")
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def status_parsers(root: Path, folder: str = "status", patterns: bool = True) -> list[str]:
    """Modules of status/ (or another `folder` of the package) that import facts/ or (`patterns`) `re`."""
    out = []
    for path in sorted((root / "pipeline" / folder).glob("*.py")):
        why = set()
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Import):
                why |= {a.name for a in node.names if a.name in ("re", "re2") and patterns}
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level == 0 and mod in ("re", "re2") and patterns:
                    why.add(mod)
                if "facts" in mod.split(".") or (node.level and mod == "" and any(a.name == "facts" for a in node.names)):
                    why.add("facts")
        if why:
            out.append(f"{path.relative_to(root)} ({', '.join(sorted(why))})")
    return out


def kind_files(root: Path) -> dict[str, int]:
    """For each kind the ledger registers, how many source files name its record type or its name as a
    string: the files a kind is spread over today (read from `KINDS` in ledger/kinds.py by its AST)."""
    kinds: dict[str, str] = {}
    for node in ast.walk(parse(root / "pipeline" / "ledger" / "kinds.py")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Kind" and len(node.args) >= 2:
            name, typ = _str(node.args[0]), node.args[1]
            tname = typ.attr if isinstance(typ, ast.Attribute) else typ.id if isinstance(typ, ast.Name) else None
            if name and tname:
                kinds[name] = tname
    trees = {p: parse(p) for p in source_files(root)}
    out = {}
    for name, tname in kinds.items():
        n = 0
        for tree in trees.values():
            for node in ast.walk(tree):
                if ((isinstance(node, ast.Name) and node.id == tname) or (isinstance(node, ast.Attribute) and node.attr == tname)
                        or (isinstance(node, ast.alias) and node.name == tname) or _str(node) == name):
                    n += 1
                    break
        out[name] = n
    return out


def skip_text_matches(root: Path) -> list[str]:
    """Places that decide on a stage report's skip reason by its text."""
    out = []
    for path in source_files(root):
        for node in ast.walk(parse(path)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("startswith", "endswith") and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "skipped"):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
            elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "skipped"
                  and any(_str(c) is not None for c in node.comparators)):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def measure(root: Path) -> dict[str, Any]:
    meta = meta_reads(root)
    kinds = kind_files(root)
    try:
        complex_ = complex_functions(root)
    except ImportError:
        complex_ = ["radon is not installed"]
    return {
        "functions_over_complexity_20": len(complex_),
        "meta_keys_read_outside_formats": len(meta),
        "meta_reads_outside_formats": sum(meta.values()),
        "session_attributes": len(session_attributes(root)),
        "session_store_keys": len(store_keys(root)),
        "stage_context_fields": len(stage_context_fields(root)),
        "status_modules_importing_facts_or_re": len(status_parsers(root)),
        "summarizer_modules_importing_facts": len(status_parsers(root, "summarizers", patterns=False)),
        "files_per_fact_kind_median": statistics.median(kinds.values()) if kinds else 0,
        "files_per_fact_kind_max": max(kinds.values()) if kinds else 0,
        "skip_reason_text_matches": len(skip_text_matches(root)),
        "details": {"complex_functions": complex_, "meta_keys": meta, "session_attributes": session_attributes(root),
                    "store_keys": store_keys(root), "stage_context_fields": stage_context_fields(root),
                    "status_parsers": status_parsers(root),
                    "summarizers_importing_facts": status_parsers(root, "summarizers", patterns=False),
                    "files_per_kind": kinds,
                    "skip_reason_text_matches": skip_text_matches(root)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--json", action="store_true", help="print every figure and its details as JSON")
    parser.add_argument("--details", action="store_true", help="also list what each figure counts")
    args = parser.parse_args()
    figures = measure(args.root)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    details = figures.pop("details")
    for name, value in figures.items():
        print(f"{name:42} {value}")
    if args.details:
        for name, value in details.items():
            print(f"\n{name}:")
            for item in (value.items() if isinstance(value, dict) else value):
                print(f"  {item}")


if __name__ == "__main__":
    main()
