"""Plan documents: the files where users and agents keep the plan the work goes through (a plan the
agent wrote, a `.planning/` tree, a todo file, review findings being worked through).

A file the agent read or wrote is a plan document when it is prose (markdown or text) and its place
or name says it holds a plan, todos, a review or a spec. Its content is an observation of the
workspace, quoted with its path: it says what is planned, it never becomes a rule.
"""

from __future__ import annotations

import posixpath
import re
from typing import Sequence

from .files import FileFact

# Prose files; code and data files are never plan documents, whatever their name.
PROSE_EXTENSIONS = (".md", ".markdown", ".txt", ".rst", ".org")
# Folders that hold plans and todos (GSD's `.planning/`, `docs/plans/`, a `todos/` tree).
PLAN_DIR_RE = re.compile(r"(?i)(?:^|/)\.?(?:planning|plans?|todos?|tasks|roadmaps?|reviews?)/")
# Words in a file name that say it holds a plan, todos, findings or what done looks like.
PLAN_NAME_RE = re.compile(
    r"(?i)(?:^|[-_. ])(?:plan|plans|planning|todo|todos|tasks|roadmap|review|findings|checklist|spec|"
    r"requirements|design|prd|progress|handoff|next[-_ ]steps)(?:[-_. ]|$)")


def is_plan_document(path: str) -> bool:
    """The file at `path` is where a plan, todos, a review or a spec is kept."""
    base = posixpath.basename(path)
    if not base.lower().endswith(PROSE_EXTENSIONS):
        return False
    stem = base.rsplit(".", 1)[0]
    return bool(PLAN_DIR_RE.search(path) or PLAN_NAME_RE.search(stem))


def plan_documents(files: Sequence[FileFact]) -> list[FileFact]:
    """The plan documents among the files the agent read, edited or created (with content seen, not
    deleted since), newest first."""
    found = [f for f in files if is_plan_document(f.path) and f.content and not f.gone
             and f.actions & {"read", "edited", "created"}]
    return sorted(found, key=lambda f: -f.last_index)
