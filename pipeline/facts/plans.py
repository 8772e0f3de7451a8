"""Plan documents: the files where users and agents keep the plan the work goes through (a plan the
agent wrote, a `.planning/` tree, a todo file, review findings being worked through).

A file the agent read or wrote is a plan document when it is prose (markdown or text) and its place
or name says it holds a plan, todos, a review or a spec; a dependency list (`requirements.txt`,
`constraints.txt`) is never one. Its content is an observation of the workspace, quoted with its path
as a file: it says what is planned, it never becomes the plan, a todo or a rule (those come only from
the harness's plan and todo tools and from the user).
"""

from __future__ import annotations

import posixpath
import re

# Prose files; code and data files are never plan documents, whatever their name.
PROSE_EXTENSIONS = (".md", ".markdown", ".txt", ".rst", ".org")
# Folders that hold plans and todos (GSD's `.planning/`, `docs/plans/`, a `todos/` tree).
PLAN_DIR_RE = re.compile(r"(?i)(?:^|/)\.?(?:planning|plans?|todos?|tasks|roadmaps?|reviews?)/")
# Words in a file name that say it holds a plan, todos, findings or what done looks like.
PLAN_NAME_RE = re.compile(
    r"(?i)(?:^|[-_. ])(?:plan|plans|planning|todo|todos|tasks|roadmap|review|findings|checklist|spec|"
    r"requirements|design|prd|progress|handoff|next[-_ ]steps)(?:[-_. ]|$)")
# pip's dependency lists (`requirements.txt`, `requirements-dev.txt`, `constraints.txt`): packages and
# versions, not a plan, whatever the word in their name.
DEPENDENCY_LIST_RE = re.compile(r"(?i)^(?:requirements|constraints)(?:[-_.][\w.-]*)?\.(?:txt|in)$")


def is_plan_document(path: str) -> bool:
    """The file at `path` is where a plan, todos, a review or a spec is kept."""
    base = posixpath.basename(path)
    if not base.lower().endswith(PROSE_EXTENSIONS) or DEPENDENCY_LIST_RE.match(base):
        return False
    stem = base.rsplit(".", 1)[0]
    return bool(PLAN_DIR_RE.search(path) or PLAN_NAME_RE.search(stem))
