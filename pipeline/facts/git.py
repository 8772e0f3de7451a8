"""Repository facts from git output: branch, changed files, last commit (the status bar's), and the
commits and pushes the ledger's commit records are made of (`commits_made`, `pushes`).

Only the output of the git subcommands named in the command line is read (`git status`,
`git commit`, `git log --oneline`, `git checkout`/`git switch`), and only lines of the shape
those commands print.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BRANCH = re.compile(r"^On branch (\S+)", re.M)
_SWITCHED = re.compile(r"^Switched to (?:a new )?branch '([^']+)'", re.M)
_SHORT_BRANCH = re.compile(r"^## ([^.\s]+)", re.M)
_PORCELAIN = re.compile(r"^(?! {2})[ MADRCUT?!]{2} (.+)$", re.M)
_CLEAN = re.compile(r"^nothing to commit", re.M)
_HEADERS = ("Changes to be committed:", "Changes not staged for commit:", "Untracked files:",
            "Unmerged paths:")
_LONG_PREFIX = re.compile(r"^(?:modified|new file|deleted|renamed|copied|typechange|both modified|"
                          r"both added|both deleted|added by us|added by them|deleted by us|"
                          r"deleted by them):\s+")
# `git commit` output: `[branch hash] subject` (`[branch (root-commit) hash]` for a first commit).
COMMIT_RE = re.compile(r"^\[([^\s\]]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+)$", re.M)
_ONELINE = re.compile(r"^([0-9a-f]{7,40}) (.+)$", re.M)
_SHORT_FLAGS = re.compile(r"(?:^|\s)(?:--porcelain\S*|--short|-s\w*|-\w*s)(?:\s|$)")


@dataclass(frozen=True)
class GitFacts:
    """None: the output said nothing about it; `changed_files=()`: the working tree is clean;
    `changed_unknown`: a commit happened, so what was changed before is no longer known."""

    branch: str | None = None
    changed_files: tuple[str, ...] | None = None
    last_commit: str | None = None
    changed_unknown: bool = False

    @property
    def empty(self) -> bool:
        return (self.branch is None and self.changed_files is None and self.last_commit is None
                and not self.changed_unknown)


def _path(entry: str) -> str:
    """A status entry's path; a rename `old -> new` is the new path."""
    entry = entry.strip().strip('"')
    return entry.split(" -> ")[-1].strip('"')


def _long_status(output: str) -> tuple[str, ...] | None:
    """Paths listed under the section headers of `git status` (long form)."""
    paths: list[str] = []
    in_section = False
    for line in output.splitlines():
        if line.strip() in _HEADERS:
            in_section = True
        elif not line.strip():
            continue
        elif in_section and line.startswith("\t"):
            paths.append(_path(_LONG_PREFIX.sub("", line.strip())))
        elif not line.startswith((" ", "\t")):
            in_section = False
    if paths:
        return tuple(paths)
    return () if _CLEAN.search(output) else None


def _status(command: str, output: str) -> GitFacts:
    branch = _BRANCH.search(output) or _SHORT_BRANCH.search(output)
    args = re.split(r"&&|\|\||[;|\n]", command.split("git status", 1)[1])[0]
    if _SHORT_FLAGS.search(args):
        changed: tuple[str, ...] | None = tuple(_path(m.group(1)) for m in _PORCELAIN.finditer(output))
    else:
        changed = _long_status(output)
    return GitFacts(branch.group(1) if branch else None, changed)


def parse_git(command: str, output: str) -> GitFacts:
    """What `output` says about the repository, given the command line that printed it."""
    branch: str | None = None
    changed: tuple[str, ...] | None = None
    commit: str | None = None
    committed = False
    if "git commit" in command and (m := COMMIT_RE.search(output)):
        # A commit takes what was staged, not necessarily everything changed: the set is unknown now.
        branch, commit, committed = m.group(1), f"{m.group(2)} {m.group(3)}", True
    elif "git log" in command and "--oneline" in command and (m := _ONELINE.search(output)):
        commit = f"{m.group(1)} {m.group(2)}"
    if re.search(r"git (?:checkout|switch)\b", command) and (m := _SWITCHED.search(output)):
        branch = m.group(1)
    if "git status" in command:
        status = _status(command, output)
        branch = status.branch or branch
        changed = status.changed_files if status.changed_files is not None else changed
    return GitFacts(branch, changed, commit, committed and changed is None)


# `git push` output: `   05fd186..a230dbf  br -> br` (a range) or ` * [new branch]      br -> br`.
PUSH_RANGE_RE = re.compile(r"^\s*\+?\s*[0-9a-f]{7,40}\.{2,3}([0-9a-f]{7,40})\s+(\S+) -> (\S+)", re.M)
PUSH_NEW_RE = re.compile(r"^\s*\* \[new branch\]\s+(\S+) -> (\S+)", re.M)
# A literal each of these patterns cannot match without: an output without it is not scanned for it
# (most outputs are neither a commit's nor a push's).
GIT_LITERALS: dict[re.Pattern[str], str] = {COMMIT_RE: "] ", PUSH_RANGE_RE: " -> ", PUSH_NEW_RE: "* [new branch]"}


def may_match(pattern: re.Pattern[str], text: str, literals: dict[re.Pattern[str], str] = GIT_LITERALS) -> bool:
    """False when `text` lacks the literal `pattern` needs (`literals`), so it cannot match."""
    return literals[pattern] in text


def may_show_history(output: str) -> bool:
    """False when `output` surely reports no commit and no push (`commits_made` and `pushes` find none)."""
    return any(literal in output for literal in GIT_LITERALS.values())


def commits_made(output: str) -> list[tuple[str | None, str, str]]:
    """(branch, hash, subject) of each commit a `git commit` output reports."""
    if not may_match(COMMIT_RE, output):
        return []
    return [(m.group(1) or None, m.group(2), m.group(3)) for m in COMMIT_RE.finditer(output)]


def pushes(output: str) -> list[tuple[str | None, str]]:
    """(pushed head hash, or None for a new branch pushed whole; branch) of each ref a push output updated."""
    out: list[tuple[str | None, str]] = []
    if may_match(PUSH_RANGE_RE, output):
        out += [(m.group(1), m.group(2)) for m in PUSH_RANGE_RE.finditer(output)]
    if may_match(PUSH_NEW_RE, output):
        out += [(None, m.group(1)) for m in PUSH_NEW_RE.finditer(output)]
    return out
