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
