"""What a format adapter is: a module with NAME, sniff, read and (for request formats) write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from ..core.model import Message


# What a streaming reader keeps of each message it reads (`read_records(..., keep)`): the message
# itself by default; a report that never writes the file back may keep less (offline/inspect.py).
Keep = Callable[[Message], Message]


@dataclass
class Transcript:
    """A transcript as read from one file.

    `messages` is what the model saw (in order). `extras` keeps what is not a message but must survive
    a round trip (Claude Code progress, file-history-snapshot, queue-operation records, ...), each as
    `(id of the message it follows or None, raw record)`. `meta` holds request-level fields (OpenAI
    `tools`/`model`, Anthropic `system` form, ...). `queued_inputs` is user text typed while the agent
    was busy (Claude Code `queue-operation` enqueue), as `(after message id, text)`: user input too.
    """

    messages: list[Message]
    format: str
    path: str | None = None
    extras: list[tuple[str | None, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    queued_inputs: list[tuple[str | None, str]] = field(default_factory=list)
    # The messages as the reader made them from their records: a writer writes the record of a
    # message that is still one of these as it was read, without decoding it again to compare.
    as_read: tuple[Message, ...] = field(default=(), repr=False, compare=False)
    # The line each record was read from, by id of the record object (held with it, so no other
    # object takes that id): a writer writes a record it did not change as that line, byte for byte,
    # instead of encoding it again.
    lines: dict[int, tuple[Any, str]] = field(default_factory=dict, repr=False, compare=False)


# Lines longer than this (a huge tool result) are encoded again when written rather than held twice.
MAX_VERBATIM_LINE = 1 << 20


def keeps_line(line: str) -> bool:
    """Whether a reader keeps a record's line (`Transcript.lines`), to write it back as read while the
    record is unchanged: a plain object line (nothing around the braces), short enough that holding
    it beside its record costs little."""
    return len(line) <= MAX_VERBATIM_LINE and line[:1] == "{" and line[-1:] == "}"


def line_of(lines: dict[int, tuple[Any, str]], record: Any) -> str | None:
    """The line `record` was read from, when it is that very record (unchanged); else None."""
    read = lines.get(id(record))
    return read[1] if read is not None and read[0] is record else None


class FormatAdapter(Protocol):
    NAME: str
    WRITABLE: bool

    def sniff(self, text: str, path: str | None) -> bool:
        """True when `text` looks like this format (cheap: looks at the first records only)."""

    def read(self, text: str, path: str | None = None) -> Transcript:
        """Parse; raise FormatError naming the path, line or record and the problem."""

    def write(self, transcript: Transcript, messages: Sequence[Message] | None = None) -> str:
        """Serialize `messages` (default: transcript.messages) using `transcript` for what is not a
        message; `read(write(t))` gives back equal messages. A JSONL adapter also has `write_chunks`, the
        same text as the lines it joins (`write_transcript` writes them as they are made)."""
