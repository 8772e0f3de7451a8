"""What each message shows the status bar, read into typed observations on the ledger's walk: the
harness's per-message fields, the user's request line, each tool call and result (its kind, target,
whether it succeeded, the todo list, test run, git state and tracker changes the progress reader read
of it, a `cd`, the file an edit touched, a plan-mode change), the tasks and the measured context.

The parsing is here, below the status floor, done by the facts/ parsers; `status/derive.py` only
turns observations into events. A reader is stateful (open calls, the working directory, calls a
format conversion wrote as text) and reads messages in order, each once; the bar's fold keeps one
and feeds it the messages it reads, so what it skips is skipped here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..core.model import Message, Origin, ToolCall, ToolResult
from ..core.toolkinds import call_path, call_target, effective_kind, normalize_name, shell_command, tool_kind
from ..facts.git import GitFacts
from ..facts.meta import message_branch, message_cwd
from ..facts.provenance import CONVERTED_CALL, harness_tool
from ..facts.requests import is_user_message
from ..facts.commands import slash_command
from ..facts.reading import MessageProgress, ProgressReader, ResultFacts, TestRun
from ..facts.session_context import cd_directory, permission_mode, result_fingerprints, short_hash, stamp_date
from ..facts.subagents import AGENT, SubagentTask
from ..facts.text import strip_reminders
from ..facts.todos import TodoItem, normalize_status
from ..facts.tracker import IssueChange

# The vocabulary the status bar reads observations in (it imports none of facts/ itself).
__all__ = ["AGENT", "CallSeen", "GitFacts", "IssueChange", "MessageProgress", "MessageSeen", "ResultSeen", "StatusReader",
           "SubagentTask", "TestRun", "TodoItem", "normalize_status", "result_fingerprints"]

# A user turn that the harness wrote (task notifications, interruption notes) is not a request.
_HARNESS_TEXT = ("<", "[")
# A result the progress reader read nothing of.
_NOTHING_READ = ResultFacts("")
# The harness's own plan-mode tools, and the stage a successful call of each starts.
PLAN_STAGES = {"enterplanmode": "planning", "exitplanmode": "implementing"}


@dataclass(frozen=True)
class CallSeen:
    """A tool call: its id, name, effective kind and target (the path or command it acts on)."""

    call_id: str
    name: str
    kind: str
    target: str


@dataclass(frozen=True)
class ResultSeen:
    """A tool result. `answered`: a call before it says what produced it (without one, only the
    result's own fields are known). `tool_todo`: the result is the harness's todo tool's, with
    `todos` the list it left; `shell`: the harness's own shell ran it (only then do `git`, `issues`
    and `cwd` say anything); `touched`: the file a successful edit or write changed, relative to the
    working directory; `stage`: the plan-mode stage the harness's own plan tool started."""

    call_id: str
    name: str
    kind: str
    ok: bool
    output_hash: str | None
    result_hashes: tuple[str, ...] | None
    answered: bool = False
    tool_todo: bool = False
    todos: tuple[TodoItem, ...] = ()
    test: TestRun | None = None
    shell: bool = False
    git: GitFacts | None = None
    issues: tuple[IssueChange, ...] = ()
    updates_tracker: bool = False
    cwd: str | None = None
    touched: str | None = None
    stage: str | None = None


@dataclass(frozen=True)
class MessageSeen:
    """One message as the bar reads it. `summary`: the text of a compaction summary (worksurface's or
    the harness's), whose quoted request is the goal behind history the transcript no longer holds;
    the rest only for conversation messages. `tool_output`: a user message that is a tool's output a
    format conversion wrote as text (nothing after the harness fields is read of it)."""

    message_id: str
    conversation: bool
    summary: str | None = None
    cwd: str | None = None
    date: str | None = None
    branch: str | None = None
    mode: str | None = None
    todos: tuple[TodoItem, ...] | None = None   # the list the harness recorded with the message
    context_tokens: int | None = None
    tool_output: bool = False
    request: str | None = None                  # the first line of the user's request
    blocks: tuple[CallSeen | ResultSeen, ...] = ()
    tasks: Mapping[str, SubagentTask] | None = None


class StatusReader:
    """Reads messages in order into `MessageSeen`s. `read(m, progress)`: `progress` is what the
    ledger's progress reader read of `m` (None: read it with a reader of this one's own). The results
    of tools of the `fingerprinted` kinds carry their result lines' hashes (the bar's searches)."""

    def __init__(self, fingerprinted: frozenset[str] = frozenset()) -> None:
        self._fingerprinted = fingerprinted
        self._calls: dict[str, ToolCall] = {}
        self._reader: ProgressReader | None = None
        self._converted = 0   # tool outputs a format conversion wrote as text still to come
        self._cwd: str | None = None
        self._date: tuple[str, str | None] = ("", None)  # (a timestamp's first 10 characters, its day)

    def read(self, m: Message, progress: MessageProgress | None = None) -> MessageSeen:
        if progress is None:
            if self._reader is None:
                self._reader = ProgressReader()
            progress = self._reader.read(m, self._reader.seen)
        summary = m.text if m.origin is Origin.SUMMARY or m.meta.get("is_compact_summary") else None
        if m.origin is not Origin.CONVERSATION:
            return MessageSeen(m.id, False, summary)
        meta = m.meta
        cwd = message_cwd(m)
        if cwd is not None:
            self._cwd = cwd
        date, branch, mode = self._day(meta.get("timestamp")), message_branch(m), permission_mode(meta)
        if m.role == "assistant":
            said = m.text
            self._converted = (sum(1 for line in said.splitlines() if line.startswith(CONVERTED_CALL))
                               if CONVERTED_CALL in said else 0)
        elif self._converted and m.role == "user" and not m.tool_results:
            self._converted -= 1
            return MessageSeen(m.id, True, summary, cwd, date, branch, mode, progress.todos,
                               progress.context_tokens, tool_output=True)
        blocks: list[CallSeen | ResultSeen] = []
        if m.tool_calls or m.tool_results:
            found = {f.call_id: f for f in progress.results}
            for block in m.blocks:
                if isinstance(block, ToolCall):
                    self._calls[block.id] = block
                    blocks.append(CallSeen(block.id, block.name, effective_kind(block), call_target(block)))
                elif isinstance(block, ToolResult):
                    blocks.append(self._result(block, found.get(block.call_id)))
        return MessageSeen(m.id, True, summary, cwd, date, branch, mode, progress.todos, progress.context_tokens,
                           False, _request_line(m), tuple(blocks), progress.tasks)

    def _day(self, stamp: object) -> str | None:
        # Most messages carry the same day as the one before: no pattern to match for them.
        if not isinstance(stamp, str):
            return None
        if stamp[:10] != self._date[0]:
            self._date = (stamp[:10], stamp_date(stamp))
        return self._date[1]

    def _result(self, result: ToolResult, progress: ResultFacts | None) -> ResultSeen:
        call = self._calls.get(result.call_id)
        kind = effective_kind(call) if call else "other"
        ok = not result.is_error
        content = result.content
        output_hash = short_hash(content) if content and not content.isspace() else None
        hashes = result_fingerprints(content) if kind in self._fingerprinted else None
        if call is None:
            return ResultSeen(result.call_id, "unknown", kind, ok, output_hash, hashes)
        read = progress or _NOTHING_READ
        shell = tool_kind(call) == "shell" and harness_tool(call)  # an MCP `bash` is another program's text
        new = cd_directory(shell_command(call) or "", self._cwd) if shell and ok else None
        if new is not None:
            self._cwd = new
        path = call_path(call) if not shell and ok and kind in ("edit", "write") else None
        # Plan mode is the harness's: an MCP server's tool named like its plan tools changes no stage.
        stage = PLAN_STAGES.get(normalize_name(call.name)) if ok and harness_tool(call) else None
        shown = read if shell else _NOTHING_READ  # what only the harness's own shell's output says
        return ResultSeen(result.call_id, call.name, kind, ok, output_hash, hashes, answered=True,
                          tool_todo=read.todo is not None, todos=read.todo.items if read.todo else (),
                          test=read.test, shell=shell, git=shown.git, issues=shown.issues,
                          updates_tracker=shown.updates_tracker, cwd=new,
                          touched=self._relative(path) if path else None, stage=stage)

    def _relative(self, path: str) -> str:
        """A path under the working directory, relative to it (shorter, and how the agent names it)."""
        cwd = self._cwd
        if cwd and path.startswith(cwd.rstrip("/") + "/"):
            return path[len(cwd.rstrip("/")) + 1:]
        return path


def _request_line(message: Message) -> str | None:
    """The first line of what the user typed: a user message by the ledger's test (`is_user_message`:
    harness notes and outputs are not), read without its hook reminders; None for a slash command's
    markup (its request is the prompt it expands into) and for a line the harness tagged (`<...>`,
    `[...]`: notifications, interruption notes)."""
    if not is_user_message(message):
        return None
    text = strip_reminders(message.text)
    if slash_command(text) is not None:
        return None
    for line in text.splitlines():
        if line.strip():
            return None if line.strip().startswith(_HARNESS_TEXT) else line
    return None
