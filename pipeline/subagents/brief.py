"""A briefing for a fresh sub-agent: a selection from the ledger for one task, not the parent's history.

Seed 003/004: a fresh sub-agent starts with its own context; what it needs from the parent is the goal,
the rules that apply, the files that matter and why, what was tried and excluded, the identifiers it
must use, and what to report back. Each candidate line is scored for relevance to the task (rapidfuzz
token-set similarity on content words, plus shared paths and identifiers), and the lines are packed by
value per token into the budget with the summarizers' packer. The user's hard rules always come first.
Same ledger and task, same brief, byte for byte; every line keeps the message ids it came from.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from ..core.errors import WorksurfaceError
from ..core.escape import escape_headings, inline_value
from ..facts import Constraint, FileFact, command_forms
from ..facts.constraints import STRONG, USER
from ..ledger.records import LedgerView
from ..summarizers.packing import Item, Section, pack
from ..summarizers.tracker import closed_issues
from ..core.tokens import TokenCounter

DEFAULT_BUDGET = 3000
# Below this many tokens a brief cannot hold a task and a rule: refused rather than emptied.
MIN_BUDGET = 64
# A candidate counts as relevant from this score on (0..2: token-set similarity 0..1, plus 1 for a
# shared path or identifier). Below it a line is left out, however much room is left: a fresh agent
# reads every line it is given, so an unrelated rule is noise, not safety.
MIN_RELEVANCE = 0.45
# What was tried and failed is cheap to carry and costly to repeat: a lower bar.
MIN_RELEVANCE_EXCLUDED = 0.3
# Bonus for a path or identifier the task names appearing in a line (the strongest sign it applies).
SHARED_TERM_BONUS = 1.0
# Task text the agent read (an issue, a spec) is split into issues at separator lines; the issue most
# like the task (at least SPEC_MATCH) lends this bonus to the rules it states: a rule's own words
# rarely repeat the task's, but the issue it belongs to does.
SPEC_SEPARATOR = re.compile(r"(?m)^\s*={3,}\s*$")  # `bd show a; echo ===; bd show b` (not a markdown rule)
SPEC_MATCH = 0.6
SPEC_BONUS = 0.4
# Words that say nothing about what a line is about; left out of the similarity.
STOPWORDS = frozenset("""a an and are as at be been but by can could did do does for from had has have how i if in
into is it its me my no not of on or our should so than that the their then there these they this to
was we were what when where which while who will with would you your use using need needs make sure
all any each also only just more most other some such very via after before about""".split())
MIN_WORD = 3
# Paths, dotted or underscored identifiers, Module.Names and CamelCase words a task can name.
TERM_RE = re.compile(r"[\w@~-]*[/.][\w./@~-]*\w|\b\w+_\w+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|`[^`\n]{2,60}`")
# A rule or excluded approach that names no file is about the whole work: it applies to any task of
# the session (it is ranked by relevance, after the lines about the task itself). One that names
# files applies only when the task shares one of them or its words.
APPLIES_EVERYWHERE = 0.5
# A file a line names: a path with a slash, or a file name with a common extension.
SCOPE_RE = re.compile(r"[\w.@~-]*/[\w.@~-]*\w|\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|go|rs|ex|exs|erl|rb|java|kt|"
                      r"swift|c|h|cc|cpp|hpp|cs|php|sh|bash|md|json|ya?ml|toml|sql|html?|css|scss|vue|svelte|lock|"
                      r"cfg|ini|txt|proto|gradle|tf)\b")
# A line of the brief is cut (start and end kept) rather than dropped when it is this long.
SHRINK_CHARS = 400
# The user's latest request is context, not the goal: shown capped.
MAX_REQUEST_CHARS = 1200
MAX_COMMANDS = 6
# Command forms the session used more than once, most used first.
MAX_COMMAND_FORMS = 8
# A rule's source (the command or file that showed it) heads its group, cut to this length.
MAX_ORIGIN_CHARS = 120
MAX_COMMITS = 5
# Recent tool outcomes looked at for failures the error ledger does not hold.
MAX_OUTCOMES = 40
REPORT_BACK = ("- What you found or changed, with the file paths and the exact commands you ran and their results.\n"
               "- Anything that contradicts the rules or facts above, and what you did not finish.\n"
               "- Keep it short: your answer is all the parent agent will read.")
# The tier of the rules a harness injected into its standing start: filler, after every other line.
CARRIED_TIER = 2
GOAL, USER_WORDS, RULES, FILES, EXCLUDED, IDENTIFIERS, REPORT = (
    "Goal", "What the user said (verbatim, newest first)", "Rules that apply", "Relevant files", "Tried and excluded",
    "Identifiers", "Report back")
# The newest of the user's earlier messages ranks a little higher (this bonus, divided by its age).
USER_WORDS_BONUS = 0.3


class BriefError(WorksurfaceError):
    """A brief cannot be built as asked (an empty task, a budget too small to hold one)."""


@dataclass(frozen=True)
class BriefLine:
    """One line the brief kept: its section, its text, and the message ids it came from."""

    section: str
    text: str
    sources: tuple[str, ...]
    relevance: float


@dataclass(frozen=True)
class Brief:
    """The briefing text (within `budget` tokens) and the lines it holds, with their sources."""

    task: str
    text: str
    tokens: int
    budget: int
    lines: tuple[BriefLine, ...]
    candidates: int

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "tokens": self.tokens, "budget": self.budget, "candidates": self.candidates,
                "text": self.text,
                "lines": [{"section": x.section, "text": x.text, "sources": list(x.sources),
                           "relevance": round(x.relevance, 3)} for x in self.lines]}


def _words(text: str) -> str:
    words = re.findall(r"[a-z0-9_./-]+", text.lower())
    return " ".join(w for w in words if len(w) >= MIN_WORD and w not in STOPWORDS)


def task_terms(task: str) -> frozenset[str]:
    """Paths and identifiers the task names (lower-cased), with each path's file name and stem."""
    out: set[str] = set()
    for raw in TERM_RE.findall(task):
        term = raw.strip("`").rstrip(".,:;)").lower()
        if len(term) < MIN_WORD or term.replace(".", "").isdigit():
            continue
        out.add(term)
        base = posixpath.basename(term.rstrip("/"))
        if len(base) >= MIN_WORD and base != term and ("." in base or "_" in base):  # a file name, not a word
            out.add(base)
            stem = base.rsplit(".", 1)[0]
            if len(stem) >= 4 and stem != base:
                out.add(stem)
    return frozenset(out)


class Relevance:
    """How much a line is about the task: token-set similarity of content words, plus a bonus when
    it names a path or identifier the task names."""

    def __init__(self, task: str) -> None:
        self.words = _words(task)
        self.terms = task_terms(task)

    def __call__(self, text: str, *extra: str) -> float:
        low = " ".join((text,) + extra).lower()
        similarity = fuzz.token_set_ratio(self.words, _words(low)) / 100 if self.words else 0.0
        shared = any(t in low for t in self.terms)
        return similarity + (SHARED_TERM_BONUS if shared else 0.0)

    def standing(self, text: str, *extra: str, floor: float = APPLIES_EVERYWHERE, scoped: bool = True) -> float:
        """The relevance of standing state (a rule, an excluded approach, the user's words): as
        `__call__`, and at least `floor` when it applies to any task: when it names no file, or
        whatever it names when not `scoped`."""
        score = self(text, *extra)
        return score if scoped and SCOPE_RE.search(text) else max(score, floor)


@dataclass
class _Candidate:
    section: str
    text: str
    sources: tuple[str, ...]
    relevance: float
    tier: int = 1  # 0: always kept first (the task, the user's hard rules); CARRIED_TIER: room left over
    group: str = ""  # a heading line shared by the lines of one source (said once)
    strength: int = 0  # of a carried rule: the strongest (a prohibition) fills the room left first


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _hard(c: Constraint) -> bool:
    return c.source == USER and c.strength >= STRONG


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def closest_spec(view: LedgerView, rel: Relevance) -> tuple[str, str, float] | None:
    """(origin, folded text, score) of the part of the task text the agent read that is most like
    the task, when it is like it at all (SPEC_MATCH)."""
    best: tuple[str, str, float] | None = None
    for spec in view.task_specs():
        for part in SPEC_SEPARATOR.split(spec.text):
            if not part.strip():
                continue
            score = rel(part)
            if score >= SPEC_MATCH and (best is None or score > best[2]):
                best = (spec.origin, _fold(part), score)
    return best


def _rules(view: LedgerView, rel: Relevance) -> list[_Candidate]:
    spec = closest_spec(view, rel)
    out = []
    for c in view.standing_constraints():
        where = c.source + (f": {_clip(c.origin, MAX_ORIGIN_CHARS)}" if c.origin and c.origin != c.source else "")
        text = f"- {c.text.strip()}"
        score = rel.standing(c.text, c.origin)
        if spec is not None and _fold(c.text) in spec[1]:
            score += SPEC_BONUS
        # A rule of the harness's standing start (an injected AGENTS.md) is one of many the project
        # wrote for any task, and the sub-agent's harness may load it again: it fills the room the
        # session's own state leaves, never takes it.
        tier = CARRIED_TIER if c.carried else 0 if _hard(c) else 1
        out.append(_Candidate(RULES, text, (c.message_id,), score, tier, f"From {where}:",
                              c.strength if c.carried else 0))
    return out


def _criteria(view: LedgerView, rel: Relevance) -> list[_Candidate]:
    """What done looks like for the tasks still open, verbatim from the task text the agent read (an
    edge case, an acceptance criterion): a sub-agent doing part of the work must meet them too."""
    closed = closed_issues(view)
    out, said = [], set()
    for spec in view.task_specs():
        if spec.issue in closed:
            continue
        for criterion in spec.criteria:
            if criterion not in said:
                said.add(criterion)
                out.append(_Candidate(RULES, f"- {criterion}", (spec.message_id,), rel.standing(criterion, spec.origin),
                                      1, f"What done looks like (from `{_clip(spec.issue or spec.origin, MAX_ORIGIN_CHARS)}`):"))
    return out


def _file_line(f: FileFact, error: str | None) -> str:
    actions = ", ".join(sorted(f.actions)) or "seen"
    extra = []
    if f.gone:
        extra.append(f"moved to {f.moved_to}" if f.moved_to else "deleted")
    if f.stale:
        extra.append("changed since last read")
    if error:
        extra.append(f"last error: {error}")
    return f"- {inline_value(f.path)}: {actions}" + (f"; {'; '.join(extra)}" if extra else "")


def _files(view: LedgerView, rel: Relevance) -> list[_Candidate]:
    errors: dict[str, tuple[str, str]] = {}
    for e in view.tool_errors():
        if not e.resolved and e.target:
            errors[e.target] = (_clip(e.line, 160), e.message_id)
    out = []
    for f in view.file_activity():
        err = next(((line, mid) for target, (line, mid) in errors.items() if f.path.endswith(target)
                    or target.endswith(f.path)), None)
        sources = (f.last_message_id,) + ((err[1],) if err else ())
        out.append(_Candidate(FILES, _file_line(f, err[0] if err else None), sources, rel(f.path)))
    return out


def _excluded(view: LedgerView, rel: Relevance) -> list[_Candidate]:
    # What failed is cheap to carry and costly to repeat, whatever file it was about: every one
    # qualifies, the ones about the task first.
    out = [_Candidate(EXCLUDED, f"- {a.kind}: {_clip(a.text, SHRINK_CHARS)}", tuple(a.message_ids),
                      rel.standing(a.text, floor=MIN_RELEVANCE_EXCLUDED, scoped=False))
           for a in view.excluded_approaches()]
    # The agent's own conclusions (a cause found, what to use instead) and the calls that failed lately:
    # the lessons a fresh agent would otherwise learn again by repeating them.
    for f in view.findings():
        out.append(_Candidate(EXCLUDED, f"- {f.kind}: {_clip(f.text, SHRINK_CHARS)}", (f.message_id,),
                              rel.standing(f.text, floor=MIN_RELEVANCE_EXCLUDED, scoped=False)))
    errored = {e.message_id for e in view.tool_errors()}
    for o in view.recent_outcomes(MAX_OUTCOMES):
        if o.failed and o.message_id not in errored:
            out.append(_Candidate(EXCLUDED, f"- failed: {_clip(o.label, 160)}: {_clip(o.gist, 200)}", (o.message_id,),
                                  rel.standing(f"{o.label} {o.gist}", floor=MIN_RELEVANCE_EXCLUDED, scoped=False)))
    for e in view.tool_errors():
        if e.transient:
            continue
        label = e.label or f"{e.tool} {e.target}".strip()
        how = f" — {e.resolution}" if e.resolution else " — unresolved"
        sources = (e.message_id,) + ((e.resolved_message_id,) if e.resolved_message_id else ())
        out.append(_Candidate(EXCLUDED, f"- failed: {_clip(label, 160)}: {_clip(e.line, 200)}{how}", sources,
                              rel.standing(f"{label} {e.line}", e.resolution or "", floor=MIN_RELEVANCE_EXCLUDED,
                                           scoped=False)))
    return out


def _identifiers(view: LedgerView, rel: Relevance) -> list[_Candidate]:
    ids = view.identifiers()
    out: list[_Candidate] = []
    # Where to work: always relevant (a sub-agent in the wrong worktree or branch undoes everything).
    where = [f"cwd {ids.cwd}"] if ids.cwd else []
    where += [f"branch {b}" for b in ids.branches[:1]] + [f"worktree {w}" for w in ids.worktrees[:2]]
    if where:
        out.append(_Candidate(IDENTIFIERS, "- " + "; ".join(where), (), 1.0, 0))
    passed = [t for t in view.test_runs() if t.ok][::-1]
    seen: set[str] = set()
    for t in passed:
        if t.command not in seen and len(seen) < MAX_COMMANDS:
            seen.add(t.command)
            out.append(_Candidate(IDENTIFIERS, f"- worked: `{_clip(t.command, 200)}` ({_clip(t.summary, 120)})",
                                  (t.message_id,), 0.5 + rel(t.command)))
    for cmd in ids.commands[:MAX_COMMANDS]:
        if cmd not in seen:
            seen.add(cmd)
            out.append(_Candidate(IDENTIFIERS, f"- command: `{_clip(cmd, 200)}`", (), rel(cmd)))
    # The session's working steps (build, test, lint, sync), most used first: how work is done here,
    # whatever the task.
    for form, runs in command_forms(ids.commands)[:MAX_COMMAND_FORMS]:
        if runs > 1:
            out.append(_Candidate(IDENTIFIERS, f"- step used {runs} times: `{form}`", (), rel.standing(form)))
    for c in view.commits()[::-1][:MAX_COMMITS]:
        out.append(_Candidate(IDENTIFIERS, f"- commit {c.hash[:12]} {_clip(c.subject, 120)}", (c.message_id,),
                              0.5 + rel(c.subject)))
    return out


def _user_words(view: LedgerView, rel: Relevance, latest: str | None) -> list[_Candidate]:
    """The user's own messages, verbatim, newest first (the latest is the goal's context already):
    what the user said binds a sub-agent working for them as it binds the parent, and says it in
    words no extractor may have read as a rule."""
    out = []
    said = [u for u in view.user_messages() if u.text.strip() and u.message_id != latest]
    for age, u in enumerate(reversed(said)):
        # Newest first: a later message supersedes an earlier one on the same point.
        out.append(_Candidate(USER_WORDS, f"- {_clip(u.text, MAX_REQUEST_CHARS)}",
                              (u.message_id,) if u.message_id else (),
                              rel.standing(u.text, scoped=False) + USER_WORDS_BONUS / (1 + age)))
    return out


def _latest_request(view: LedgerView) -> tuple[str, str | None] | None:
    for u in reversed(view.user_messages()):
        text = u.text.strip()
        if text and not text.startswith("<task-notification>"):
            return text, u.message_id
    return None


def candidates(view: LedgerView, task: str) -> list[_Candidate]:
    """Every line a brief for `task` could hold, scored."""
    rel = Relevance(task)
    out = [_Candidate(GOAL, task.strip(), (), 2.0, 0)]
    request = _latest_request(view)
    if request is not None and _fold(request[0]) != _fold(task):
        out.append(_Candidate(GOAL, f"(Context, the user's latest request: {_clip(request[0], MAX_REQUEST_CHARS)})",
                              (request[1],) if request[1] else (), 1.0, 0))
    out += _user_words(view, rel, request[1] if request else None)
    out += _rules(view, rel) + _criteria(view, rel) + _files(view, rel) + _excluded(view, rel) + _identifiers(view, rel)
    out.append(_Candidate(REPORT, REPORT_BACK, (), 2.0, 0))
    return out


# Sections in display order: (share of the budget, priority: 0 is filled first).
SECTIONS = {GOAL: (0.2, 0), USER_WORDS: (0.15, 1), RULES: (0.25, 1), FILES: (0.1, 3), EXCLUDED: (0.15, 2),
            IDENTIFIERS: (0.1, 4), REPORT: (0.05, 0)}


def build_brief(view: LedgerView, task: str, budget_tokens: int = DEFAULT_BUDGET,
                counter: TokenCounter | None = None) -> Brief:
    """The brief for `task` from the ledger state `view`, at most `budget_tokens` tokens."""
    if not task.strip():
        raise BriefError("the task is empty: say what the sub-agent should do")
    if budget_tokens < MIN_BUDGET:
        raise BriefError(f"a brief needs a budget of at least {MIN_BUDGET} tokens, not {budget_tokens}")
    counter = counter if counter is not None else TokenCounter()
    pool = [c for c in candidates(view, task) if c.tier == 0 or c.relevance >= (
        MIN_RELEVANCE_EXCLUDED if c.section == EXCLUDED else MIN_RELEVANCE)]
    present = {c.section for c in pool}
    sections = {name: Section(name, [], share, priority, empty="") for name, (share, priority) in SECTIONS.items()
                if name in present}
    keyed: dict[tuple[Any, ...], _Candidate] = {}
    for n, c in enumerate(pool):
        tokens = max(1, counter.text(c.text))
        # Value per token within a tier; the tier and the position keep it total and deterministic.
        order = (n,)
        keyed[order] = c
        # Quoted text can pass for none of the brief's own sections (Item escapes tags and the summary's).
        item = Item(escape_headings(c.text, SECTIONS), (c.tier, -c.strength, -c.relevance / tokens, n), order, group=c.group,
                    shrinkable=len(c.text) > SHRINK_CHARS or c.section == GOAL, filler=c.tier == CARRIED_TIER)
        sections[c.section].items.append(item)
    text = pack(list(sections.values()), budget_tokens, counter)
    lines = []
    for name, section in sections.items():
        for item in sorted(section.chosen, key=lambda it: it.order):
            c = keyed[item.order]
            lines.append(BriefLine(name, item.text, tuple(s for s in c.sources if s), c.relevance))
    # Lines the final fit dropped are not in the text; keep only what the text shows.
    lines = [x for x in lines if x.text in text]
    return Brief(task, text, counter.text(text), budget_tokens, tuple(lines), len(pool))


__all__ = ["Brief", "BriefError", "BriefLine", "DEFAULT_BUDGET", "Relevance", "build_brief", "candidates",
           "task_terms"]
