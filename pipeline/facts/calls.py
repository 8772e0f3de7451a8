"""Tool calls paired with their results, in transcript order: the raw material of most fact extractors.

Success and failure are judged the same way everywhere: the harness's error flag, a non-zero
`Exit code N` first line (Claude Code Bash), a non-zero code in the header Codex writes above a
command's output (`Process exited with code N`, apply_patch's `Exit code: N`; never a line below its
`Output:`), a `<tool_use_error>` or a refused patch, or a user rejection. A rejection is the
harness's own record (see provenance.py), never text a tool printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..core.cached import cached
from ..core.model import Message, ToolCall, ToolResult
from ..core.toolkinds import call_target, effective_kind, normalize_name, shell_command, tool_kind
from ..core.memo import per_message_list
from .provenance import is_harness_rejection
from .shell import first_line
from .fileviews import header_exit_code, split_header

# Claude Code prefixes a failed shell result with its exit code; OpenHands appends one.
EXIT_CODE_RE = re.compile(r"^\s*Exit code (\d+)|\[Command finished with exit code (\d+)\]")
# How Codex's apply_patch answers a patch it refused (nothing was written): its first words.
REFUSED_PATCH_PREFIXES = ("apply_patch verification failed",)
# A cascade failure of a parallel call, not a failure of the call itself.
SIBLING_ERROR = "Sibling tool call errored"
# Only the head of an output is searched for an exit code: it is printed first (or last, OpenHands).
EXIT_CODE_SCAN_CHARS = 300
# A call label longer than this is cut: it names the call, it does not replay it.
LABEL_CHARS = 160
# What the extractors read of one tool output (`CallRecord.output`): all of it up to SCAN_HEAD_CHARS +
# SCAN_TAIL_CHARS characters, else its first SCAN_HEAD_CHARS and last SCAN_TAIL_CHARS, cut at line ends,
# so a 200 MB log costs the extractors what a 1.2 MB one does. Real outputs are far below the bound
# (Claude Code keeps at most 30,000 characters of a Bash output and 25k tokens of a Read; the largest in
# the shared sessions is under 200k characters), so their facts are unchanged. Of a huge output, what
# appears only in its middle (a path, an error line, an identifier, a commit printed there) is lost
# knowingly: the head shows what a command started with, the tail its verdict. The output itself stays
# whole everywhere else (its tokens, its budget, its artifact; `CallRecord.full_output`).
SCAN_HEAD_CHARS = 1_000_000
SCAN_TAIL_CHARS = 200_000


@dataclass(frozen=True)
class CallRecord:
    """One tool call, where it is, and its result (None while it is still pending)."""

    call: ToolCall
    index: int
    message_id: str
    result: ToolResult | None
    result_index: int | None
    result_message_id: str | None
    result_message: Message | None = None  # the message carrying the result (its harness record)

    @property
    def name(self) -> str:
        return self.call.name

    @cached  # asked by most extractors of every call, and the call does not change
    def kind(self) -> str:
        return effective_kind(self.call)

    @property
    def target(self) -> str:
        """The exact command line for shell calls (not their description), else the path, pattern or URL."""
        if tool_kind(self.call) == "shell":
            command = shell_command(self.call)
            if command:
                return first_line(command)
        return call_target(self.call)

    @cached
    def command(self) -> str | None:
        """The command line of a shell call (None for other tools, even ones with a `command` argument)."""
        return shell_command(self.call) if tool_kind(self.call) == "shell" else None

    @property
    def full_output(self) -> str:
        """The whole result text (for what restores or counts it, not for what reads facts from it)."""
        return self.result.content if self.result is not None else ""

    @cached
    def output(self) -> str:
        """The result text as the extractors read it: bounded to its head and tail (see SCAN_HEAD_CHARS)."""
        return scanned(self.full_output)

    @cached
    def rejected(self) -> bool:
        """The harness says the user rejected or interrupted this call (its own record, not output text)."""
        return is_harness_rejection(self.result, self.result_message)

    @cached  # asked once per later call for each open error (errors.py)
    def failed(self) -> bool:
        """The call ran (or was refused) and did not succeed."""
        return result_failed(self.result) or self.rejected or self.refused_patch

    @property
    def refused_patch(self) -> bool:
        """Codex's own apply_patch refused the patch (it runs in the harness, so its answer is the
        harness's words, not a program's): nothing was written."""
        return (self.result is not None and normalize_name(self.name) == "apply_patch"
                and self.result.content.lstrip().startswith(REFUSED_PATCH_PREFIXES))

    @property
    def succeeded(self) -> bool:
        return self.result is not None and not self.failed


def scanned(text: str) -> str:
    """`text` whole when within SCAN_HEAD_CHARS + SCAN_TAIL_CHARS, else its head and tail joined by a
    newline, each cut at a line end (a line cut in two would read as two other lines)."""
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text
    head_end = text.rfind("\n", 0, SCAN_HEAD_CHARS)
    tail_start = text.find("\n", len(text) - SCAN_TAIL_CHARS)
    head = text[:head_end] if head_end > 0 else text[:SCAN_HEAD_CHARS]
    tail = text[tail_start + 1:] if 0 <= tail_start < len(text) - 1 else text[-SCAN_TAIL_CHARS:]
    return f"{head}\n{tail}"


def exit_code(text: str) -> int | None:
    """The exit code a shell result reports, if it reports one."""
    header = split_header(text[:EXIT_CODE_SCAN_CHARS])
    code = header_exit_code(header[0]) if header is not None else None
    if code is not None:
        return code
    for chunk in (text[:EXIT_CODE_SCAN_CHARS], text[-EXIT_CODE_SCAN_CHARS:]):
        m = EXIT_CODE_RE.search(chunk)
        if m:
            return int(m.group(1) or m.group(2))
    return None


def result_failed(result: ToolResult | None) -> bool:
    if result is None:
        return False
    if result.is_error:
        return True
    head = result.content.lstrip()[:EXIT_CODE_SCAN_CHARS]
    if head.startswith("<tool_use_error>"):
        return True
    code = exit_code(result.content)
    return code is not None and code != 0


def is_sibling_error(result: ToolResult | None) -> bool:
    return result is not None and SIBLING_ERROR in result.content[:200]


@per_message_list
def tool_calls(messages: Sequence[Message]) -> list[CallRecord]:
    """Every tool call with its result, in call order (a call with no result has result None)."""
    return _tool_calls(messages)


def _tool_calls(messages: Sequence[Message]) -> list[CallRecord]:
    results: dict[str, tuple[int, Message, ToolResult]] = {}
    for i, m in enumerate(messages):
        for r in m.tool_results:
            results.setdefault(r.call_id, (i, m, r))
    out: list[CallRecord] = []
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            found = results.get(c.id)
            if found is not None and found[0] >= i:
                out.append(CallRecord(c, i, m.id, found[2], found[0], found[1].id, found[1]))
            else:
                out.append(CallRecord(c, i, m.id, None, None, None))
    return out


def tool_label(record: CallRecord) -> str:
    """`Name target` for a call, as a summary shows it (the MCP prefix kept: it names the server);
    a call with no path, pattern or command shows its input instead."""
    target = record.target
    if not target and record.call.input:
        target = record.call.input_json
    return f"{record.name} {_clip(target)}".strip() if target else record.name


def _clip(text: str, limit: int = LABEL_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
