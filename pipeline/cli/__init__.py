"""Command-line interface. Each command module registers itself on `app` when imported."""

from __future__ import annotations

from .app import app, run

# Command modules (import order is the order of `worksurface --help`).
from . import artifact_cmd  # noqa: E402,F401
from . import batch_cmd  # noqa: E402,F401
from . import brief_cmd  # noqa: E402,F401
from . import compact_cmd  # noqa: E402,F401
from . import config_cmd  # noqa: E402,F401
from . import hook_cmd  # noqa: E402,F401
from . import inspect_cmd  # noqa: E402,F401
from . import mcp_cmd  # noqa: E402,F401
from . import probe_cmd  # noqa: E402,F401
from . import replay_cmd  # noqa: E402,F401
from . import report_cmd  # noqa: E402,F401
from . import serve_cmd  # noqa: E402,F401
from . import session_cmd  # noqa: E402,F401
from . import status_cmd  # noqa: E402,F401


def main() -> None:
    run()     # app() with one-line usage and OS errors (see app.run)
