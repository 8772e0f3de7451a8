"""Packaging: one `worksurface` namespace, no generic top-level modules, a working console script."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str, cwd) -> subprocess.CompletedProcess:
    # Run outside the repository so the source folders are not importable through the cwd.
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_installed_names(tmp_path):
    ok = _run("import worksurface, worksurface.stages, worksurface.reinjectors, worksurface.formats", tmp_path)
    assert ok.returncode == 0, ok.stderr
    # The synthetic-session generator is a repository tool (tests, benchmarks), not part of the package.
    for generic in ("pipeline", "stages", "reinjectors", "fixturegen", "worksurface.fixturegen"):
        res = _run(f"import {generic}", tmp_path)
        assert res.returncode != 0 and "ModuleNotFoundError" in res.stderr


def test_ships_its_type_hints(tmp_path):
    res = _run("from importlib.resources import files; print(files('worksurface').joinpath('py.typed').is_file())",
               tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "True"


def test_console_script_help(tmp_path):
    res = subprocess.run([sys.executable, "-m", "worksurface.cli", "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for command in ("inspect", "compact", "replay", "status", "probe"):
        assert command in res.stdout


def test_every_package_folder_is_listed_for_the_wheel():
    """setuptools installs only the packages pyproject lists: a new subpackage left out would be missing
    from every non-editable install (and from the strict tree the type check reads)."""
    import tomllib
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    setuptools = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    roots = setuptools["package-dir"]
    on_disk = set()
    for name, folder in roots.items():
        for init in (repo / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(repo / folder).parts
            if "__pycache__" not in parts:
                on_disk.add(".".join((name, *parts)))
    assert on_disk == set(setuptools["packages"])
