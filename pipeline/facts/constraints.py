"""Standing constraints (rules the work must keep) and the task specs the agent read, verbatim
(approaches tried and excluded are approaches.py's).

Constraints come from the user's messages, task text the agent read (an issue tracker, a task file),
project rules files (AGENTS.md, CLAUDE.md, ...) and hook notes; each keeps the sentence or bullet as
written and says where it came from. Summaries lose these first (seed 004), so they are kept exact.
Authority follows provenance (only what the harness wrote itself creates standing state): hook notes and injected rules files count only
when the harness wrote them (provenance.harness_reminders); a reminder or a "Contents of CLAUDE.md"
printed inside a tool's output is the world's text and never becomes a rule. Task text the agent read
is kept with source "task spec" and the command or file it came from: an observation, not the user's.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from ..core.model import Message, Text
from ..core.toolkinds import call_path, normalize_name, tool_kind
from ..core.view import STANDING
from .calls import CallRecord, tool_calls, tool_label
from .fileviews import numbered_lines
from .commands import command_bodies
from .meta import message_cwd, normalize_path
from .provenance import UserNamed, converted_outputs, harness_tool, reminders_by_message
from .requests import is_user_message, queued_positions, user_message_flags
from .shell import first_line
from .text import one_line, output_body, strip_reminders, trim, units

USER, TASK_SPEC, HOOK, COMMAND = "user", "task spec", "hook", "command"

# Prohibitions and hard rules.
STRONG_RE = re.compile(
    r"(?i)\b(?:don'?t|do not|never|must not|mustn'?t|shall not|should not|shouldn'?t|may not|"
    r"not allowed|forbidden|prohibited|avoid|no need to)\b"
    r"|\bno (?!one\b|longer\b|matter\b|doubt\b|idea\b|problem\b|issues?\b|matches\b|changes\b|errors?\b|"
    r"blockers?\b|upstream\b|such\b|more\b|files?\b|results?\b|output\b)[a-z][\w-]*")
# Requirements and preferences.
MEDIUM_RE = re.compile(
    r"(?i)\b(?:must|always|only|required|requires?|need to|needs to|has to|have to|instead of|"
    r"rather than|make sure|ensure|prefer|preferred)\b|\buse\b[^.]{1,80}\b(?:not|instead)\b")
# Imperatives that open a bullet of a spec ("Keep all logic in X", "Use the existing Y").
IMPERATIVE_RE = re.compile(r"^(?:Use|Keep|Reuse|Follow|Stick to|Leave|Preserve|Do)\b")
# Headings whose bullets are rules even without a rule word.
RULE_HEADINGS = ("constraint", "rule", "requirement", "guideline", "convention", "restriction",
                 "non-goal", "out of scope", "scope", "important", "must", "don't", "do not")
STRONG, MEDIUM, WEAK = 3, 2, 1
# A question asks; it does not bind ("do we need to write a plan?"): one that ends with a question
# mark, or opens as one (users often leave the mark out). "Can you make sure ..." is a polite
# imperative, so `can/could/would you` do not open a question here.
QUESTION_END_RE = re.compile(r"\?[\s)\"'`*_]*$")
QUESTION_OPEN_RE = re.compile(
    r"(?i)^(?:(?:do|does|did|is|are|was|were|have|has|should|shall|will|can|could|would)\s+"
    r"(?:we|i|it|they|there|this|that|these|those)\b|(?:what|why|how|where|when|which|who|whether)\b)")

# Commands that print an issue or task (beads, GitHub, GitLab, Jira, Linear).
TASK_COMMAND_RE = re.compile(
    r"\b(?:bd|beads|br)\s+show\b|\bgh\s+(?:issue|pr)\s+view\b|\bglab\s+(?:issue|mr)\s+view\b"
    r"|\bjira\s+(?:issue\s+)?view\b|\blinear\s+issue\b")
# Of those, the ones that print a pull or merge request: its description reports work done (what it
# changed, the checks it passed), so it is task text to read, and states no rule of the task.
REVIEW_COMMAND_RE = re.compile(r"\bgh\s+pr\s+view\b|\bglab\s+mr\s+view\b")
# MCP or custom tools that fetch an issue or ticket.
TASK_TOOL_RE = re.compile(r"(?i)(?:get|view|read|fetch|show)_?(?:issue|ticket|task|story)|issue_read")
# The argument of such a tool that names the issue (what the user's words must name too).
ISSUE_KEYS = ("issue_number", "number", "issue_id", "issue", "id", "key", "identifier", "ticket", "url")
# Files that hold a task description (a pip requirements file is a dependency list, not a task).
TASK_FILE_RE = re.compile(r"(?i)^(?!requirements[\w.-]*\.txt$)(?:task|issue|ticket|spec|requirements?|prd|todo)"
                          r"[\w.-]*\.(?:md|txt|rst)$")
# Project rules files (source named by the file).
RULES_FILES = {"agents.md", "claude.md", "claude.local.md", "gemini.md", ".cursorrules", ".windsurfrules",
               ".clinerules", "conventions.md", "copilot-instructions.md"}
RULES_DIRS = ("/.cursor/rules/", "/.claude/rules/")
# Folders whose rules file is the rules of the folder above (`.github/copilot-instructions.md`).
CONFIG_FOLDERS = (".github",)
# Rules files a harness loads from the user's home whatever the working directory.
HOME_RULES = ("~/.claude/CLAUDE.md", "~/.codex/AGENTS.md", "~/.gemini/GEMINI.md")
# Claude Code's injected memory: "Contents of /path/CLAUDE.md (project instructions, ...):".
CONTENTS_OF_RE = re.compile(r"Contents of (\S+) \([^)]*\):\s*\n")
# Codex's injected rules files, in a standing message the harness wrote (the format reader says which):
# "# AGENTS.md instructions for /project\n\n<INSTRUCTIONS>...</INSTRUCTIONS>", and older versions
# "<user_instructions>...</user_instructions>" (the user's and the project's instructions together).
INJECTED_RULES_RE = re.compile(r"(?s)\A\s*# (\S+) instructions for ([^\n]+)\n\s*<INSTRUCTIONS>\n?(.*?)(?:</INSTRUCTIONS>|\Z)")
USER_INSTRUCTIONS_RE = re.compile(r"(?s)\A\s*<user_instructions>\n?(.*?)(?:</user_instructions>|\Z)")
USER_INSTRUCTIONS = "user instructions"
# Harness boilerplate in reminders: not the project's rules.
BOILERPLATE = ("malware", "todowrite", "todo list", "the file exists but", "shorter than the provided offset",
               "task tools haven't been used", "this is a reminder")

MAX_TITLE_CHARS = 200


@dataclass(frozen=True)
class Constraint:
    """A rule, verbatim, with its source ("user", "task spec", a rules file name, "hook"), where it
    came from (`origin`: the command or path that showed it), and how hard it is (3 strongest)."""

    text: str
    source: str
    message_id: str
    index: int
    origin: str = ""
    strength: int = MEDIUM
    # Said in a message every compaction carries verbatim (the harness's standing start, such as
    # Codex's injected AGENTS.md): a summary need not restate it, a fresh agent's brief must.
    carried: bool = False


def rule_strength(text: str, heading: str = "", bullet: bool = False) -> int | None:
    """How strongly a sentence or bullet states a rule (3, 2, 1), or None when it states none (a
    question states none, whatever words it uses)."""
    if is_question(text):
        return None
    if STRONG_RE.search(text):
        return STRONG
    if bullet and any(h in heading for h in RULE_HEADINGS):
        return STRONG
    if MEDIUM_RE.search(text):
        return MEDIUM
    if bullet and IMPERATIVE_RE.match(text):
        return WEAK
    return None


def is_question(text: str) -> bool:
    """The sentence asks something rather than stating it."""
    stripped = text.strip()
    return bool(QUESTION_END_RE.search(stripped) or QUESTION_OPEN_RE.match(stripped))


def rules_in(text: str) -> list[tuple[str, int]]:
    """(sentence or bullet verbatim, strength) for every rule in a text."""
    out = []
    for unit in units(text):
        strength = rule_strength(unit.text, unit.heading, unit.bullet)
        if strength is not None and len(unit.text) >= 8:
            out.append((unit.text, strength))
    return out


# Claude Code 2.1.2xx attachment records that carry a hook's output to the model (the harness's own
# record: `{"type": "attachment", "attachment": {"type": ..., "content": ...}}`, in Transcript.extras).
HOOK_ATTACHMENTS = ("hook_additional_context", "hook_success")
# worksurface's own hook output (hooks/run.py HEADER) comes back the same way: it restates rules already
# folded from where they were said, so it is not read for rules again.
OWN_SURFACE_PREFIX = "[worksurface]"


def attachment_constraints(extras: Sequence[tuple[int, Any]]) -> list[Constraint]:
    """The rules in the hook context Claude Code attached (HOOK_ATTACHMENTS), as `(index of the message
    they follow, record)` pairs: the harness produced them, so they bind as a hook's reminder does
    (source HOOK, origin the hook's event), oldest first (the ledger keeps each rule once)."""
    out: list[Constraint] = []
    for index, record in extras:
        att = record.get("attachment") if isinstance(record, dict) and record.get("type") == "attachment" else None
        if not isinstance(att, dict) or att.get("type") not in HOOK_ATTACHMENTS:
            continue
        content = att.get("content")
        texts = [content] if isinstance(content, str) else [t for t in content if isinstance(t, str)] \
            if isinstance(content, list) else []
        event = att.get("hookEvent") if isinstance(att.get("hookEvent"), str) else ""
        ident = str(record.get("uuid") or f"attachment-{index}")
        for text in texts:
            if text.lstrip().startswith(OWN_SURFACE_PREFIX):
                continue
            out += [Constraint(rule, HOOK, ident, index, str(event), strength) for rule, strength in rules_in(text)]
    return out


def rules_source(path: str, cwd: str | None) -> str | None:
    """The source name for a project rules file the harness itself would load, or None.

    A harness loads its rules files from the session's working directory and the folders above it
    (Claude Code's CLAUDE.md chain, Codex's AGENTS.md chain) and from the user's home; the same name
    anywhere else (a dependency's `node_modules/x/CLAUDE.md`, a download in /tmp) is a file the agent
    read, not the project's rules. Without a known working directory only the home ones are."""
    if path in HOME_RULES:
        return posixpath.basename(path)
    if not cwd:
        return None
    full = normalize_path(path, cwd)
    folder = posixpath.dirname(full)
    if posixpath.basename(full).lower() in RULES_FILES:
        if posixpath.basename(folder) in CONFIG_FOLDERS:
            folder = posixpath.dirname(folder)
    else:
        at = next((i for i in ((folder + "/").rfind(d) for d in RULES_DIRS) if i >= 0), -1)
        if at < 0:
            return None
        folder = folder[:at] or "/"  # the project a rules folder belongs to
    root = posixpath.normpath(cwd)
    if folder == root or root.startswith(folder.rstrip("/") + "/"):
        return posixpath.basename(full)
    return None


def task_spec_origin(rec: CallRecord, named: UserNamed | None = None) -> str | None:
    """The command, tool or file that makes this call's output task text, or None.

    By who produced the text: the project's tracker run in the harness's own shell (`bd show`,
    `gh issue view` ...), or a page, issue tool or task file the user's own words pointed at
    (`named`). A page, an MCP server's issue or a file nobody asked for is what it says, not a task."""
    if rec.result is None or rec.failed:
        return None
    if tool_kind(rec.call) == "shell" and rec.command and harness_tool(rec.call) \
            and TASK_COMMAND_RE.search(rec.command):
        return one_line(first_line(rec.command), 120)
    if named is None:
        return None
    if TASK_TOOL_RE.search(normalize_name(rec.name)):
        keys = [str(rec.call.input[k]) for k in ISSUE_KEYS if isinstance(rec.call.input.get(k), (str, int))
                and not isinstance(rec.call.input.get(k), bool)]
        return one_line(tool_label(rec), 120) if any(named(_bare_url(k)) for k in keys) else None
    # The kind first: a shell call's path is read by tokenizing its command line.
    path = call_path(rec.call) if rec.kind == "read" else None
    if path and TASK_FILE_RE.match(posixpath.basename(path)):
        return path if named(path) or named(posixpath.basename(path)) else None
    if rec.kind == "fetch" and re.search(r"/(?:issues|pull|browse)/", rec.target) and named(_bare_url(rec.target)):
        return rec.target
    return None


def _bare_url(value: str) -> str:
    """A URL without its scheme and trailing slash (how a user pastes or types it)."""
    return re.sub(r"^[a-z][a-z0-9+.-]*://", "", value.strip(), flags=re.I).rstrip("/")


# The fields of a tracker's JSON output (`gh issue view --json title,body,comments`) that hold its text,
# the title first; other strings (states, URLs, logins, dates) are not task text.
JSON_TITLE_KEYS = ("title", "name", "summary")


def spec_text(output: str) -> str:
    """A task text as its words: a tracker's JSON output (`--json`) read as the strings it holds (the
    title, then every string with a space in it: the body, the comments), each on its own lines, so a
    rule or a heading in the body is found as it is in plain output; any other output as it is."""
    body = output_body(output)
    stripped = body.strip()
    if not stripped.startswith(("{", "[")):
        return body
    try:
        value = json.loads(stripped)
    except ValueError:
        return body
    titles: list[str] = []
    texts: list[str] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and node.strip():
            if key.lower() in JSON_TITLE_KEYS:
                titles.append(node.strip())
            elif " " in node.strip():
                texts.append(node.strip())
    walk(value)
    return "\n\n".join(titles[:1] + texts) if titles or texts else body


def user_named(messages: Sequence[Message], queued_inputs: Sequence[tuple[str | None, str]] = (),
               earlier: Iterable[str] = ()) -> UserNamed:
    """What the user said, by message index (`earlier`: said before `messages`), to ask whether
    the user named a source before a call (`task_spec_origin`)."""
    def said() -> Iterator[tuple[int, str]]:
        index = {m.id: i for i, m in enumerate(messages)}
        yield from ((-1, t) for t in earlier)
        yield from ((i, strip_reminders(m.text)) for i, m in enumerate(messages) if is_user_message(m))
        yield from ((index[after], text) for after, text in queued_inputs if after in index)
    return UserNamed(said())


# Headings whose items say what done looks like, even when none is worded as a rule.
CRITERIA_HEADINGS = ("acceptance", "success criteria", "criteria", "definition of done", "done when",
                     "deliverable", "output", "expected", "test plan", "verification", "requirement", "spec",
                     "edge case", "behavio", "fallback")
# The order criteria are kept in, by heading: edge cases and behaviour (specific, and what a first
# implementation misses), then what done looks like, then specifications; anything else (output
# file lists) last.
CRITERIA_ORDER = (("edge case", "behavio", "fallback"),
                  ("acceptance", "success criteria", "definition of done", "done when", "criteria", "expected",
                   "test plan", "verification"),
                  ("requirement", "spec", "deliverable"))
# A line naming a file the task must produce ("write the report to out/summary.md").
OUTPUT_FILE_RE = re.compile(r"(?i)\b(?:output|write|save|produce|generate|create|emit)s?\b[^.\n]{0,80}?"
                            r"\b(?:to|in|into|as|at)\s+`?[\w./-]+\.[A-Za-z0-9]{1,6}`?")
# An issue's header line in tracker output (beads: `○ id [EPIC] · Title   [● P2 · OPEN]`).
ISSUE_HEADER_RE = re.compile(r"^\S (\w[\w-]*-\w+(?:\.\d+)*)(?: \[\w+\])? · .+$", re.M)
# A separator an agent printed between two issues (`echo "==="`), at the end of a part.
SEPARATOR_TAIL_RE = re.compile(r"\n\s*(?:={3,}|-{3,})\s*$")
# Task text kept per spec: the description of one issue, not a whole epic tree.
MAX_SPEC_CHARS = 4000
MAX_CRITERIA = 20


@dataclass(frozen=True)
class TaskSpec:
    """Task text the agent read: where from (`origin`), its first line (usually the title), what done
    looks like (`criteria`: acceptance / success criteria, output files, verbatim) and the text itself
    (`text`, capped). An observation the agent read, with its source: not the user's words."""

    origin: str
    title: str
    message_id: str
    index: int
    criteria: tuple[str, ...] = ()
    text: str = ""
    issue: str = ""  # the tracker issue the text describes, when its header names one


def task_criteria(text: str) -> tuple[str, ...]:
    """Acceptance / success criteria and output-file lines of a task text, verbatim: edge cases first,
    then what done looks like (acceptance, definition of done), then specs, then the list of files to
    touch (the summary lists files apart), each group in text order."""
    out: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for n, unit in enumerate(units(text)):
        if (unit.bullet and any(h in unit.heading for h in CRITERIA_HEADINGS)) or OUTPUT_FILE_RE.search(unit.text):
            if unit.text not in seen:
                seen.add(unit.text)
                group = next((g for g, heads in enumerate(CRITERIA_ORDER) if any(h in unit.heading for h in heads)),
                             len(CRITERIA_ORDER))
                out.append((group, n, unit.text))
    return tuple(t for _, _, t in sorted(out)[:MAX_CRITERIA])


def task_specs(messages: Sequence[Message], queued_inputs: Sequence[tuple[str | None, str]] = (),
               earlier_user_words: Iterable[str] = ()) -> list[TaskSpec]:
    """Task texts read (issue tracker output, task files the user named), newest first, one per
    origin; an output that shows several issues (`bd show a; bd show b`) gives one text per issue, so
    each keeps its whole text and can be told apart from the others (open or closed).
    `earlier_user_words`: what the user said before `messages` (a ledger folds in windows)."""
    found: dict[str, TaskSpec] = {}
    named = user_named(messages, queued_inputs, earlier_user_words)
    for rec in tool_calls(messages):
        origin = task_spec_origin(rec, named.at(rec.index))
        if origin is None:
            continue
        lines = numbered_lines(rec.output) if rec.kind == "read" else None
        body = "\n".join(lines[n] for n in sorted(lines)) if lines else spec_text(rec.output)
        at = rec.result_index if rec.result_index is not None else rec.index
        parts = issue_parts(body)
        for issue, part in parts:
            key = f"{origin} ({issue})" if len(parts) > 1 else origin
            title = next((ln.strip() for ln in part.splitlines() if ln.strip()), "")
            found[key] = TaskSpec(key, one_line(title, MAX_TITLE_CHARS), rec.result_message_id or rec.message_id, at,
                                  task_criteria(part), trim(part.strip(), MAX_SPEC_CHARS), issue)
    return sorted(found.values(), key=lambda t: (-t.index, t.origin))


def issue_parts(body: str) -> list[tuple[str, str]]:
    """(issue id, text) for each issue a tracker output shows, split at each issue's header line
    (the text before the first header goes with it); [("", body)] when no header names an issue."""
    heads = list(ISSUE_HEADER_RE.finditer(body))
    if not heads:
        return [("", body)]
    out = []
    for n, m in enumerate(heads):
        start = 0 if n == 0 else m.start()
        end = heads[n + 1].start() if n + 1 < len(heads) else len(body)
        part = SEPARATOR_TAIL_RE.sub("", body[start:end])
        out.append((m.group(1), part))
    return out


def injected_rules_files(message: Message) -> list[tuple[str, str, str]]:
    """(source, origin, text) of each rules file the harness injected into one of its standing
    messages (meta STANDING, set by the format reader from who wrote the record): Codex's AGENTS.md
    chain. A message anyone else wrote, or text merely shaped like it inside one, gives none."""
    if _harness_standing(message):
        out = []
        for block in message.blocks:
            if not isinstance(block, Text):
                continue
            if found := INJECTED_RULES_RE.match(block.text):
                out.append((found.group(1), found.group(2).strip(), found.group(3)))
            elif found := USER_INSTRUCTIONS_RE.match(block.text):
                out.append((USER_INSTRUCTIONS, "", found.group(1)))
        return out
    return []


def _harness_standing(message: Message) -> bool:
    """The harness's own standing instructions (a format reader's verdict on who wrote the record)."""
    return message.role == "system" and bool(message.meta.get(STANDING))


def _hook_texts(bodies: Iterable[str]) -> Iterable[tuple[str, str]]:
    """(source, text) for each harness reminder: injected rules files by name, other non-boilerplate
    as hook."""
    for body in bodies:
        parts = CONTENTS_OF_RE.split(body)
        if len(parts) > 1:
            for path, content in zip(parts[1::2], parts[2::2]):
                yield posixpath.basename(path), content
            continue
        if not any(b in body.lower() for b in BOILERPLATE):
            yield HOOK, body


def standing_constraints(messages: Sequence[Message],
                         queued_inputs: Sequence[tuple[str | None, str]] = (),
                         earlier_user_words: Iterable[str] = ()) -> list[Constraint]:
    """Every rule found, in order of first appearance, each text once. `earlier_user_words`: what
    the user said before `messages` (see task_specs)."""
    found: list[Constraint] = []
    seen: set[str] = set()

    def add(text: str, source: str, m_id: str, index: int, origin: str = "", only: int | None = None,
            carried: bool = False) -> None:
        for rule, strength in rules_in(text):
            key = re.sub(r"\s+", " ", rule).strip().casefold()
            if key not in seen:
                seen.add(key)
                found.append(Constraint(rule, source, m_id, index, origin, only or strength, carried))

    records = {(r.result_index, r.call.id): r for r in tool_calls(messages) if r.result_index is not None}
    named = user_named(messages, queued_inputs, earlier_user_words)
    queued_after = queued_positions(messages, queued_inputs)
    outputs = converted_outputs(messages)
    # The prompt a slash command the user ran expanded into: its rules bind like the user's own.
    expanded = {index: name for name, _, index in command_bodies(messages)}
    said_by_harness = reminders_by_message(messages)
    typed = user_message_flags(messages)
    for i, m in enumerate(messages):
        if m.role == "system":
            # The system prompt is the stable prefix: never removed, never restated. The rules files
            # a harness injected into its standing start are the project's rules all the same: kept,
            # marked as carried by every view (a brief for a fresh agent needs them).
            for source, folder, body in injected_rules_files(m):
                add(body, source, m.id, i, folder, carried=True)
            continue
        if i in outputs:
            continue  # a tool's output written as a user message by a format conversion
        if typed[i]:
            add(strip_reminders(m.text), USER, m.id, i)
        elif i in expanded:
            add(strip_reminders(m.text), COMMAND, m.id, i, expanded[i])
        if m.role == "user":
            for source, body in _hook_texts(said_by_harness[i]):
                add(body, source, m.id, i)
        for r in m.tool_results:
            rec = records.get((i, r.call_id))
            if rec is None:
                continue
            origin = task_spec_origin(rec, named.at(rec.index))
            path = call_path(rec.call) if rec.kind == "read" and rec.succeeded else None
            rules = rules_source(path, message_cwd(m) or message_cwd(messages[rec.index])) if path else None
            if rules or origin:
                lines = numbered_lines(r.content) if rec.kind == "read" else None
                body = "\n".join(lines[n] for n in sorted(lines)) if lines else r.content
                if rules:
                    add(body, rules, m.id, i, path or "")
                elif not REVIEW_COMMAND_RE.search(origin or ""):
                    add(body if lines else spec_text(r.content), TASK_SPEC, m.id, i, origin or "")
        for text in queued_after.get(i, ()):
            add(text, USER, m.id, i)
    return found
