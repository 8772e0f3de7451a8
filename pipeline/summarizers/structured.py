"""The `structured` summarizer: fixed sections filled from extracted facts, deterministic, no model.

Exact strings beat paraphrase: user messages, rules, error lines, test summaries, commands and
hashes are copied, never reworded. The budget always holds: sections claim shares in priority
order (request, constraints, excluded approaches, progress and identifiers, errors, files, user
messages, current work) and the least important items are trimmed first (see packing.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..core.errors import SummarizerError
from ..core.escape import one_line as on_its_line
from ..core.model import Message, Origin, is_user_turn
from ..core.tokens import PER_MESSAGE_OVERHEAD, TokenCounter, get_encoding
from ..ledger import Ledger
from ..ledger.kinds import KINDS, SummaryLine
from ..ledger.source import FactSource
from ..ledger.views import (COMPLAINT, FOLLOW_UP, VERIFIED, VIA_ANSWERS, Decision, command_forms, current_work,
                            first_line, is_plan_document, one_line)
from .base import Summary, SummaryRequest
from .conversation import given_how, newest_of_each, replied_reports
from .packing import Item, Section, pack, render, shrink
from .sections import (ACTIVE_REQUEST, CARRIED_GROUP, CURRENT_WORK, DECISIONS, ERRORS, FILES, HEADINGS,
                       IDENTIFIERS, NEXT_STEP, PROGRESS, TITLE, TRIED, USER_MESSAGES, USER_QUOTES, carried_lines)
from .tracker import IN_PROGRESS_RE, TRACKER_MARK_RE, TRACKER_STATE_RE, closed_issues, closed_spec_texts, short_command

NAME = "structured"
# (priority, share of the budget): priority 0 is kept first; shares are first claims, and what a
# section leaves unused flows to the others in priority order.
PLAN: dict[str, tuple[int, float]] = {
    "": (0, 0.06),             # title and the focus note from custom instructions
    ACTIVE_REQUEST: (1, 0.10),
    NEXT_STEP: (2, 0.03),
    DECISIONS: (3, 0.13),
    TRIED: (4, 0.08),
    PROGRESS: (5, 0.10),
    IDENTIFIERS: (6, 0.12),
    ERRORS: (7, 0.08),
    FILES: (8, 0.10),
    USER_MESSAGES: (9, 0.12),
    CURRENT_WORK: (10, 0.16),
}
# How many task texts, earlier test runs and recent tool calls are worth naming.
MAX_TASK_TITLES = 8
MAX_TEST_COMMANDS = 5
# The agent's follow-ups and reports of its checks worth quoting (newest first).
MAX_FOLLOW_UPS, MAX_VERIFIED = 8, 1
RECENT_CALLS = 6
# An error item names its call, its line and its outcome in a line or two, not a log.
MAX_ERROR_LABEL_CHARS, MAX_ERROR_CHARS = 100, 180
# Long verbatim blocks are quoted within a share of the summary's budget (never under the minimum):
# the last assistant message, the plan's text (the plan reinjector restores it whole when there is room).
LAST_MESSAGE_SHARE, PLAN_TEXT_SHARE, MIN_CAPPED_TOKENS = 0.15, 0.15, 120
# The agent's report before the user's newest message(s), each within this share of the budget.
REPLIED_REPORTS, REPORT_SHARE = 1, 0.1
# Once this many calls followed the last assistant message, it ranks after the newest results.
STALE_AFTER_CALLS, STALE_MESSAGE_AFTER_OUTCOMES = 8, 16
# Recent calls whose output is quoted (a few lines each), newest first, as the budget allows.
RECENT_OUTCOMES = 60
RECENT_EDITS = 3
# Command forms and tools named before any other list's tail (each costs a few tokens).
HEAD_COMMAND_FORMS = 12
HEAD_TOOLS = 6
# Files only read that are named before the others become filler.
HEAD_READ_FILES = 5
# Names the agent's edits defined (functions, tests, constants): few tokens each, often the only
# record of what was built.
HEAD_SYMBOLS = 12
# Edit gists worth offering when the budget has room: what an edit added often exists nowhere else.
MAX_EDITS = 20
TODO_STATUS_ORDER = {"in_progress": 0, "pending": 1, "completed": 2}
# What the Active request says when the latest request is kept verbatim right after the summary.
KEPT_REQUEST = "Latest user request: kept verbatim right after this summary (it takes precedence over this summary)."
# Exclusions a small summary keeps first (packing.ESSENTIAL_SHARE): what the user turned down or
# stopped, then what was undone or decided against; the agent's other "didn't work" remarks are not.
ESSENTIAL_APPROACHES = {"rejected": 1, "interrupted": 1, "reverted": 2, "decided against": 2}
APPROACH_ORDER = {"rejected": 0, "interrupted": 0, "worked around": 1, "reverted": 1, COMPLAINT: 1,
                  "decided against": 1, "ruled out": 1, "assumption corrected": 1, "abandoned": 2}


class StructuredSummarizer:
    """Writes the fixed-section summary from the ledger's records and views; same input, same bytes."""

    name = NAME

    def summarize(self, request: SummaryRequest, counter: TokenCounter) -> Summary:
        budget = request.budget_tokens - PER_MESSAGE_OVERHEAD
        if budget <= 0:
            raise SummarizerError(f"summary budget of {request.budget_tokens} tokens leaves no room for text")
        candidates = _Builder(request).sections()
        sections = _honest(candidates)
        text = pack(sections, budget, counter)
        if request.keep_full is not None and any(s.left_out() for s in sections if s.note_left_out):
            # Items were left out for room: keep the whole summary and say once where it is.
            where = f"Left out for room above: the whole summary is {request.keep_full(render(_everything(candidates)))}."
            room = budget - counter.text(where) - 2
            if room > 0:
                sections = _honest(candidates)
                text = pack(sections, room, counter) + "\n\n" + where
        kept = {s.heading or "preamble": len(s.chosen) for s in sections}
        offered = {s.heading or "preamble": len(s.items) for s in sections}
        return Summary(text, NAME, counter.text(text), {"items_kept": kept, "items_offered": offered})


def _honest(candidates: list[Section]) -> list[Section]:
    """Fresh copies to pack (packing cuts items in place) that say what they leave out: every
    section with a heading ends with a count of its items left out for room."""
    return [replace(s, items=list(s.items), chosen=[], used=0, note_left_out=bool(s.heading)) for s in candidates]


def _everything(candidates: list[Section]) -> list[Section]:
    return [replace(s, chosen=list(s.items)) for s in candidates]


def candidate_sections(request: SummaryRequest) -> list[Section]:
    """Every section with all its candidate items, before packing: the summary packs them into its
    budget, and the `details` reinjector offers what the summary had no room for."""
    return _Builder(request).sections()


class _Builder:
    def __init__(self, request: SummaryRequest) -> None:
        self.request = request
        self.messages: Sequence[Message] = request.messages
        self.queued = tuple(request.queued_inputs)
        self.src = fact_source(request)
        # The session's working directory: the ledger's (all history), else the summarized span's.
        self.cwd = self.src.main_cwd()
        self.carried = _carried(self.src.own_summaries())
        self.earlier = self.src.earlier_summaries()
        # Facts used by more than one section, read once.
        self.runs = self.src.test_runs()
        self.todos = self.src.todo_state()
        self.plan = self.src.plan_mode()
        self.errors_found = self.src.tool_errors()
        self.tracker = self.src.tracker_updates()
        self.closed_specs = closed_spec_texts(self.src)
        self.findings = self.src.findings()
        self.decisions_made: list[Decision] = self.src.records("decisions")

    def rel(self, path: str) -> str:
        """A path under the session's working directory shown relative to it (the cwd is listed once),
        on one line (a path with a line break in it cannot start another item)."""
        if self.cwd and path.startswith(self.cwd.rstrip("/") + "/"):
            path = path[len(self.cwd.rstrip("/")) + 1:]
        return on_its_line(path)

    def sections(self) -> list[Section]:
        users = [(u.text, given_how(u)) for u in self.src.user_messages()]
        users = newest_of_each([(t, "") for t in self.carried.get(USER_QUOTES, [])] + users)
        built = {
            "": self.preamble(),
            ACTIVE_REQUEST: self.active_request(users),
            USER_MESSAGES: self.user_messages(users),
            FILES: self.files(),
            ERRORS: self.errors(),
            DECISIONS: self.decisions(),
            TRIED: self.tried(),
            PROGRESS: self.progress(),
            CURRENT_WORK: self.current_work(),
            NEXT_STEP: self.next_step(users),
            IDENTIFIERS: self.identifiers(),
        }
        for kind in KINDS:
            if kind.summary is not None:
                built[kind.summary.section] += self.declared(kind.name, kind.summary, len(built[kind.summary.section]))
        out = []
        for heading in ("",) + HEADINGS:
            priority, share = PLAN[heading]
            cap = self.request.user_messages_tokens if heading == USER_MESSAGES else None
            out.append(Section(heading, built[heading], share, priority, cap=cap,
                               inline=heading == IDENTIFIERS, skip_repeats=heading == IDENTIFIERS))
        return out

    def preamble(self) -> list[Item]:
        items = [Item(TITLE, (0,), (0,), quoted=False)]
        if self.request.instructions and self.request.instructions.strip():
            note = f"Focus requested for this summary (verbatim): {self.request.instructions.strip()}"
            items.append(Item(note, (1,), (1,), shrinkable=True))
        return items

    def active_request(self, users: list[tuple[str, str]]) -> list[Item]:
        items: list[Item] = []
        kept = [m for m in self.request.kept if is_user_turn(m)]
        if users and kept:
            items.append(Item(KEPT_REQUEST, (0,), (0,), quoted=False))
        elif users:
            text, how = users[-1]
            how = f", {how}" if how else ""
            # Never shortened: the newest user message is quoted whole or not at all (then the kept
            # tail starts at it, or it stays verbatim right after the summary: `kept`).
            items.append(Item(f"Latest user request (verbatim{how}):\n{text}", (0,), (0,)))
            if len(users) > 1:
                items.append(Item(f"First request of the session (verbatim):\n{users[0][0]}", (2,), (2,),
                                  shrinkable=True))
        if any(is_user_turn(m) for m in self.request.tail):
            items.append(Item("Newer user messages follow in the kept recent conversation; they take precedence.",
                              (1,), (1,)))
        closed = closed_issues(self.src)
        # Newest first whichever source answers (the ledger lists records oldest first).
        specs = sorted(self.src.task_specs(), key=lambda t: (-t.index, t.origin))[:MAX_TASK_TITLES]
        for n, spec in enumerate(specs):
            rank = (3, spec.issue in closed, n)
            # A text split out of a multi-issue output is named by its own header (the command that
            # printed several would only repeat itself).
            label = "- Task text read:" if spec.issue and spec.origin.endswith(f"({spec.issue})") else \
                f"- Task text read with `{spec.origin}`:"
            # The state a tracker header printed is the state when read: the known one replaces it.
            title = TRACKER_MARK_RE.sub("", TRACKER_STATE_RE.sub("", spec.title)) if spec.issue else spec.title
            if spec.issue in closed:
                title += " (closed since)"
            items.append(Item(f"{label} {title}", rank, (3, -spec.index, n)))
        # What done looks like for the tasks still open (verbatim from their text); a closed task's
        # criteria are met or moot.
        said: set[str] = set()  # the same issue read twice (alone and with others) lists its criteria once
        for n, spec in enumerate(s for s in specs if s.issue not in closed):
            for k, criterion in enumerate(spec.criteria):
                if criterion in said:
                    continue
                said.add(criterion)
                items.append(Item(f"- {criterion}", (5, k, n), (5, -spec.index, n, k),
                                  f"Task criteria (from `{spec.issue or spec.origin}`):"))
        if self.earlier:
            items.append(Item(f"Earlier summary (verbatim):\n{self.earlier[-1]}", (9,), (9,), shrinkable=True))
        return items

    def user_messages(self, users: list[tuple[str, str]]) -> list[Item]:
        # The latest and first requests are quoted under Active request; the others, newest first.
        rest = users[1:-1]
        if self.decisions_made:
            # Answers to the agent's questions are quoted among the decisions, with their questions.
            rest = [(text, how) for text, how in rest if how != f"via {VIA_ANSWERS}"]
        items = []
        for n, (text, how) in enumerate(reversed(rest), 1):
            label = f"[{n}, {how}]" if how else f"[{n}]"
            items.append(Item(f"{label} {text}", (n,), (n,), shrinkable=True))
        return items

    def files(self) -> list[Item]:
        items = []
        reads = 0
        for f in self.src.file_activity():
            modified = bool(f.actions - {"read"})
            # Newest first already says when; a file changed was read too, which says nothing new.
            notes = ", ".join(sorted(f.actions - {"read"} if modified else f.actions))
            if f.stale:
                notes += "; changed since last seen"
            # A plan document the work goes through counts with the files changed, however old.
            plan = is_plan_document(f.path)
            line = f"- {self.rel(f.path)} ({notes}{'; plan document' if plan else ''})"
            key = (0 if modified or plan else 1, -f.last_index, f.path)
            # Files only read, beyond the newest few, are filler: what was changed is the artifact.
            reads += not (modified or plan)
            items.append(Item(line, key, key, filler=not (modified or plan) and reads > HEAD_READ_FILES))
        return items + self.carried_items(FILES)

    def errors(self) -> list[Item]:
        items, seen = [], set()
        # A failure worked around is listed under Tried and excluded approaches: not twice.
        tried = {a.text for a in self.src.excluded_approaches() if a.kind == "worked around"}
        for e in reversed(self.errors_found):
            if (e.label, e.line) in seen or any(t.startswith(f"{e.label} failed: ") for t in tried):
                continue
            seen.add((e.label, e.line))
            outcome = e.resolution or "UNRESOLVED"
            line = (f"- {one_line(self.shorten_paths(e.label), MAX_ERROR_LABEL_CHARS)}: {one_line(e.line, MAX_ERROR_CHARS)}"
                    f" -> {one_line(self.shorten_paths(outcome), MAX_ERROR_CHARS)}")
            # A tool's passing refusal (a read over its size limit) is filler after every real error.
            items.append(Item(line, (2 if e.transient else 0 if not e.resolved else 1, -e.index), (e.index,),
                              filler=e.transient))
        return items + self.carried_items(ERRORS)

    def decisions(self) -> list[Item]:
        items = []
        done = self.closed_specs
        answered = {(d.message_id, d.index): _fold(d.answer) for d in self.decisions_made}
        for n, c in enumerate(self.src.standing_constraints()):
            if _fold(c.text) in answered.get((c.message_id, c.index), "\0"):
                continue  # a rule said in an answer: the answer is quoted whole among the decisions
            if c.carried:
                continue  # said in the harness's standing start, which every view carries verbatim
            origin = f" `{self.rel(c.origin)}`" if c.origin else ""
            group = f"From {c.source}{origin}:"
            # A rule only the task text of an issue the agent has since closed states was about
            # finished work: it ranks after every rule that still applies.
            finished = (bool(done[0]) and c.source == "task spec" and _in_any(c.text, done[0])
                        and not _in_any(c.text, done[1]))
            essential = 0 if finished or c.source == "task spec" else 1 if c.source == "user" else 2
            items.append(Item(f"- {c.text}", (finished, -c.strength, c.source != "user", -c.index, n), (c.index, n),
                              group, essential=essential))
        plan = self.plan
        if plan.approved and plan.plan_path:
            items.append(Item(f"- Plan approved by the user; saved to {plan.plan_path}", (False, -3, False, 0, -1),
                              (-1, 0), "Decisions:", essential=1))
        # The user's answers to the agent's questions, as the harness recorded them: an answer in the
        # user's own words, or one turning down the option the agent recommended, ranks with the
        # user's rules, and so does the newest answer (where the discussion stands); picking an
        # offered option, after them.
        newest = self.decisions_made[-1] if self.decisions_made else None
        for n, d in enumerate(self.decisions_made):
            weight = -2 if d.declined or not d.picked_option or d is newest else -1
            items.append(Item(f"- {d.text}", (False, weight, False, -d.index, n), (d.index, n),
                              "Decided by the user (answers to the agent's questions, verbatim):",
                              essential=1 if weight == -2 else 2))
        for n, f in enumerate(self.findings):
            if f.kind == COMPLAINT:
                continue  # a negative result: listed under Tried and excluded approaches
            items.append(Item(f"- ({f.kind}) {f.text}", (False, 5, -f.index, n), (f.index, n),
                              "Findings (the agent's own conclusions):"))
        for n, text in enumerate(self.carried.get(DECISIONS, [])):
            items.append(Item(text, (False, 9, n), (-2, n), CARRIED_GROUP))
        return items

    def tried(self) -> list[Item]:
        items = []
        for n, a in enumerate(self.src.excluded_approaches()):
            rank = (APPROACH_ORDER.get(a.kind, 2), -a.index, n)
            items.append(Item(f"- ({a.kind}) {self.shorten_paths(a.text)}", rank, (a.index, n),
                              essential=ESSENTIAL_APPROACHES.get(a.kind, 0)))
        for n, text in enumerate(self.carried.get(TRIED, [])):
            items.append(Item(text, (9, n), (-1, n)))
        return items

    def progress(self) -> list[Item]:
        items: list[Item] = []
        seen: set[str] = set()
        for run in reversed(self.runs):
            key = first_line(run.command)
            if key in seen or len(seen) >= MAX_TEST_COMMANDS:
                continue
            latest = not seen
            seen.add(key)
            label = "Latest test run" if latest else "Earlier test run"
            items.append(Item(f"- {label}: `{key}` -> {run.summary}", (0 if latest else 3, -run.index),
                              (0, -run.index), "Tests:"))
        if self.todos is not None:
            for n, it in enumerate(self.todos.items):
                status = TODO_STATUS_ORDER.get(it.status, 1)
                rank = (1, status, n)
                items.append(Item(f"- [{it.status}] {it.text}", rank, (1, n), "Todo list:"))
                if it.detail:
                    # What a remaining item involves is the plan; what a done one involved, its record.
                    items.append(Item(f"  ↳ {it.detail}", rank + (1,) if status < 2 else (4, n), (1, n, 1),
                                      "Todo list:", shrinkable=True))
        plan = self.plan
        if plan.active:
            items.append(Item("- Plan mode is ON: plan first, no edits until the user approves.", (0, 0),
                              (2, 0), "Plan:"))
        if plan.plan:
            state = "approved" if plan.approved else "proposed, not approved"
            # The plan the work follows ranks right after the latest test run: it is what the agent
            # would otherwise have to re-derive.
            items.append(self.capped(Item(f"- Plan ({state}):\n{plan.plan}", (0, 1), (2, 1), "Plan:", shrinkable=True),
                                     PLAN_TEXT_SHARE))
        # The agent's own account of its latest checks, and what it listed as left open (newest
        # first): often the only record of a piped run's result or of a promised step.
        said = self.src.records("followups")[::-1]
        for n, f in enumerate([f for f in said if f.kind == VERIFIED][:MAX_VERIFIED]):
            items.append(Item(f"- {self.shorten_paths(f.text)}", (5, n), (0, 1, n),
                              "The agent's latest reports of its checks (verbatim, newest first):"))
        for n, f in enumerate([f for f in said if f.kind == FOLLOW_UP][:MAX_FOLLOW_UPS]):
            items.append(Item(f"- {self.shorten_paths(f.text)}", (2, n), (5, n),
                              "Follow-ups the agent listed (verbatim, newest first; may be done since):"))
        made = self.src.commits()
        for n, c in enumerate(reversed(made)):
            pushed = " (pushed)" if c.pushed else ""
            items.append(Item(f"- {c.hash} {c.subject}{pushed}", (1 if n == 0 else 2, n), (3, n),
                              "Commits (newest first):"))
        seen_issues: set[str] = set()
        for n, u in enumerate(reversed(self.tracker)):
            # An update every issue of which a newer update changed again (a claim its close
            # followed) says nothing the newer one does not: it ranks last.
            issues = {c.issue for c in u.changes}
            superseded = bool(issues) and issues <= seen_issues
            seen_issues |= issues
            order = (6, n) if superseded else (1 if n == 0 else 2, n)
            items.append(Item(f"- `{short_command(u.command, u.result)}` -> {u.result}", order,
                              (4, n), "Issue tracker updates (newest first):"))
        return items + self.carried_items(PROGRESS, group=CARRIED_GROUP)

    def current_work(self) -> list[Item]:
        work = current_work(self.messages, RECENT_CALLS)
        items: list[Item] = []
        if work.text:
            # Words the agent said many calls ago are no longer its current work: they come after
            # what those calls showed.
            since = sum(len(m.tool_calls) for m in self.messages[(work.index or 0) + 1:])
            rank: tuple[int, ...] = (0,) if since <= STALE_AFTER_CALLS else (2, -self.stale_rank(work.index or 0))
            items.append(self.capped(Item(f"Last assistant message (verbatim):\n{work.text}", rank, (0,),
                                          shrinkable=True), LAST_MESSAGE_SHARE))
        # The agent's reports the user answered (its words right before each of the user's newest
        # messages): a reply ("those are good, but I meant ...") reads against what it replies to.
        for n, (at, report) in enumerate(replied_reports(self.messages, REPLIED_REPORTS)):
            if at == work.index:
                continue
            items.append(self.capped(Item(f"- {report}", (2, -self.stale_rank(at)), (0, 1, n),
                                          "The agent's reports the user replied to (verbatim, newest first):",
                                          shrinkable=True), REPORT_SHARE))
        for n, label in enumerate(work.pending_calls):
            items.append(Item(f"- {self.shorten_paths(label)}", (1, n), (1, n), "Waiting on results of:"))
        # What the latest calls showed, newest first: the observation the agent was working from.
        # A failure is listed under Errors (or Tried) with its fix: its error line is not quoted twice.
        errors = {e.call_id: one_line(e.line, MAX_ERROR_CHARS) for e in self.errors_found}
        outcomes = [o for o in self.src.recent_outcomes(RECENT_OUTCOMES)
                    if o.call_id not in errors or errors[o.call_id] not in o.gist]
        # What the latest calls showed and what the latest edits added rank together, newest first:
        # the agent's latest observations and changes, whichever kind came last.
        for n, o in enumerate(outcomes):
            failed = " (failed)" if o.failed else ""
            items.append(Item(f"- {self.shorten_paths(o.label)}{failed} -> {o.gist}", (2, -o.index), (2, n),
                              "Latest tool calls and what they showed (newest first):", shrinkable=True))
        for n, edit in enumerate(self.src.recent_edits(MAX_EDITS)):
            items.append(Item(f"- {self.shorten_paths(edit.target)}: + `{edit.gist}`", (2, -edit.index), (3, -n),
                              "Latest edits (what each added first):"))
        return items

    def next_step(self, users: list[tuple[str, str]]) -> list[Item]:
        items: list[Item] = []
        if self.todos is not None:
            for status, what in (("in_progress", "Continue the in-progress item"), ("pending", "Next pending item")):
                item = next((it for it in self.todos.items if it.status == status), None)
                if item is not None:
                    items.append(Item(f"- {what}: {item.text}", (0,), (0,)))
                    break
        claimed = next((u for u in reversed(self.tracker) if IN_PROGRESS_RE.search(u.command)), None)
        if claimed is not None and not any(u.index > claimed.index for u in self.tracker):
            items.append(Item(f"- Finish the issue claimed with `{claimed.command}`", (0,), (0,)))
        runs = self.runs
        if runs and runs[-1].failed:
            last = runs[-1]
            items.append(Item(f"- Get the failing tests passing: `{first_line(last.command)}` -> {last.summary}",
                              (1,), (1,)))
        errors = self.errors_found
        if errors and not errors[-1].resolved:
            e = errors[-1]
            items.append(Item(f"- Unresolved: {self.shorten_paths(e.label)}: {e.line}", (2,), (2,)))
        if users:
            items.append(Item("- Carry on with the latest user request (quoted under Active request).", (3,), (3,)))
        return items

    def identifiers(self) -> list[Item]:
        ids = self.src.identifiers()
        items: list[Item] = []

        def add(kind: str, values: Sequence[str], head: int, fmt: str = "{}", filler: bool = False) -> None:
            # The first `head` values of every list come before the rest of any list: the newest
            # commit, the current issue and the working commands are worth more than a 15th hash.
            # A filler list (whole commands, urls: measured to carry least per token) comes last.
            for n, v in enumerate(values):
                rank = (3, n) if filler else (0, n) if n < head else (1, n - head)
                items.append(Item(fmt.format(v), rank, (len(items), n), f"{kind}:"))

        add("cwd", [ids.cwd] if ids.cwd else [], 9)
        add("branches", ids.branches, 2)
        add("worktrees", ids.worktrees, 2)
        # Command forms, most used first: the session's build, test, lint and sync steps in a few tokens.
        forms = [f"`{form}`" + (f" ({n})" if n > 1 else "") for form, n in command_forms(ids.commands)]
        add("command forms used (distinct runs)", forms, HEAD_COMMAND_FORMS)
        # Tools in use, busiest first: after a compaction the model should still know what it has
        # been working with (deferred and plan-mode tools especially).
        used = sorted(self.src.tools_used().items(), key=lambda kv: (-kv[1], kv[0]))
        add("tools used", [f"{name} ({calls})" for name, calls in used], HEAD_TOOLS)
        add("project scripts (package.json)", ids.scripts, 3, "`{}`")
        add("commits", ids.commits, 3)
        add("issues", ids.issues, 4)
        add("test results", ids.test_counts, 2)
        # Paths are listed under Files and artifacts; repeating them here carries nothing new.
        add("names defined in edits", ids.symbols, HEAD_SYMBOLS)
        add("commands", ids.commands, 0, "`{}`", filler=True)
        add("urls", ids.urls, 0, filler=True)
        for n, line in enumerate(self.carried.get(IDENTIFIERS, [])):
            kind, _, values = line.partition(": ")
            items.append(Item(values, (2, n), (len(items), n), f"{kind} (earlier):"))
        return items

    def declared(self, name: str, line: SummaryLine, after: int) -> list[Item]:
        """The lines of a kind that declares how it reads (`kinds.Kind.summary`): newest first, as filler,
        after the section's own `after` items."""
        records = self.src.records(name)[::-1]
        return [Item(line.text(r), (3, n), (after + n, 0), line.group, filler=True) for n, r in enumerate(records)]

    def stale_rank(self, index: int) -> int:
        """Where words said long ago rank among the recent results and edits (ranked by the index of
        their message, newest first): after the newest STALE_MESSAGE_AFTER_OUTCOMES of them."""
        newer = sorted((o.index for o in self.src.recent_outcomes(RECENT_OUTCOMES) if o.index > index), reverse=True)
        return newer[STALE_MESSAGE_AFTER_OUTCOMES] - 1 if len(newer) > STALE_MESSAGE_AFTER_OUTCOMES else index

    def capped(self, item: Item, share: float) -> Item:
        """A long verbatim item cut (start and end kept) to `share` of the budget: quoted whole it
        would take the room of every other section's next lines."""
        cap = max(MIN_CAPPED_TOKENS, int(self.request.budget_tokens * share))
        if len(get_encoding().encode_ordinary(item.text)) <= cap:
            return item
        return shrink(item, cap) or item

    def carried_items(self, heading: str, group: str = "") -> list[Item]:
        """Lines an earlier summary carried for this section, after this span's own items."""
        return [Item(text, (9, n), (9, n), group) for n, text in enumerate(self.carried.get(heading, []))]

    def shorten_paths(self, text: str) -> str:
        if not self.cwd:
            return text
        return text.replace(self.cwd.rstrip("/") + "/", "")


def fact_source(request: SummaryRequest) -> FactSource:
    """The session's ledger as of the first kept message, or the facts of the summarized messages."""
    if request.ledger is None:
        return Ledger.over(request.messages, request.queued_inputs).upto()
    positions = (request.ledger.position(m.id) for m in request.tail if m.origin is Origin.CONVERSATION)
    cut = next((p for p in positions if p is not None), None)
    return request.ledger.upto(cut)


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _in_any(text: str, folded_texts: Sequence[str]) -> bool:
    t = " ".join(text.lower().split())
    return any(t in f for f in folded_texts)


def _carried(summaries: Sequence[str]) -> dict[str, list[str]]:
    """Section -> lines carried by earlier worksurface summaries, oldest first, without repeats."""
    out: dict[str, list[str]] = {}
    for text in summaries:
        for section, lines in carried_lines(text).items():
            have = out.setdefault(section, [])
            have.extend(ln for ln in lines if ln not in have)
    return out
