"""One size everywhere: the configuration and usage every offline command builds for a transcript.

`compact`, `report`, `replay`, `batch`, `probe check` and `probe curve` size a transcript through here,
so the same flags give the same compaction: `SizeFlags.config` is the configuration (the loaded file,
the flags over it, the window the transcript records when --window is not given), and
`prepare_once` is the one `prepare` of a saved transcript, anchored on the usage it records unless
`--no-usage` (the only switch between the two units: counted, or as the provider measures).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from ..core import progress
from ..core.clearing import HARNESS_STAGE
from ..core.config import Config
from ..core.edits import removed_refs
from ..core.errors import ContextOverflowError
from ..core.model import Message
from ..core.sizes import MeasuredUsage, measured_usage
from ..formats.base import Transcript

if TYPE_CHECKING:
    from ..session.session import Prepared, Session

log = logging.getLogger("worksurface")

# The smallest window a transcript's own record is taken for (the configuration's lower bound).
MIN_WINDOW = 1_000
# How the notice of a view left over the threshold begins (`prepare_once`).
OVERFLOW_NOTICE = "still over the threshold: "


@dataclass(frozen=True)
class SizeFlags:
    """The sizing flags every offline command takes (None: not given), and whether sizes are anchored
    on the usage the transcript records (`--no-usage` turns that off)."""

    window: int | None = None
    target: int | None = None
    max_output: int | None = None
    buffer: int | None = None
    strategy: str | None = None
    use_usage: bool = True

    def config(self, transcript: Transcript | Sequence[Message] | None = None, base: Config | None = None) -> Config:
        """`base` (default: the configuration file found from the current folder, `Config.load`) with
        these flags over it. Without --window the window is the one the transcript records (a Codex
        rollout's `model_context_window`), else the configured one."""
        window = self.window if self.window is not None else recorded_window(transcript)
        return (base or Config.load()).with_overrides(
            window=window, post_compact_target_tokens=self.target, max_output=self.max_output,
            autocompact_buffer=self.buffer, status_strategy=self.strategy)


def recorded_window(transcript: Transcript | Sequence[Message] | None) -> int | None:
    """The context window the transcript itself records (`Transcript.meta["context_window"]`), if any."""
    meta = transcript.meta if isinstance(transcript, Transcript) else {}
    window = meta.get("context_window")
    return window if isinstance(window, int) and not isinstance(window, bool) and window >= MIN_WINDOW else None


def transcript_usage(transcript: Transcript | Sequence[Message], counter: Any, use_usage: bool = True
                     ) -> MeasuredUsage | None:
    """The usage a command anchors on (None with --no-usage): fitted over the whole transcript as read
    (its earliest requests show the fixed part), anchored in its live part."""
    if not use_usage:
        return None
    messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
    return measured_usage(messages, counter)


def prepare_once(session: Session, transcript: Transcript | Sequence[Message], *, use_usage: bool = True,
                 force: bool = False, instructions: str | None = None) -> Prepared:
    """One `prepare` of a saved transcript as every command makes it: anchored on its recorded usage
    (unless `use_usage` is off), refused measurements named in the notices with the file, and the
    anchor in `report.sizes`. A view still over the threshold after compaction is returned with a
    notice (starting OVERFLOW_NOTICE): offline it is a finding about the file, and the session has
    committed that view; a live harness gets the `ContextOverflowError` from `Session.prepare`."""
    progress.phase("compacting" if force else "preparing the view")
    usage = transcript_usage(transcript, session.counter, use_usage)
    anchor = usage.anchor if usage is not None else None
    stale = anchor is not None and not _describes_view(session, transcript, anchor[0])
    try:
        prepared = session.prepare(transcript, usage=None if stale else anchor, force=force,
                                   instructions=instructions)
    except ContextOverflowError as exc:
        if exc.prepared is None:
            raise
        prepared = exc.prepared
        notice = (f"{OVERFLOW_NOTICE}{exc}: the compacted view is written all the same, since what keeps it "
                  "there must stay (the fixed part the recorded usage measures, the newest messages)")
        prepared.report.notices.append(notice)
        log.warning("%s", notice)  # as the session's own notices are
    describe_usage(prepared.report, usage, transcript)
    if stale and anchor is not None:
        if prepared.report.sizes is not None:
            prepared.report.sizes["anchor"] = None
        prepared.report.notices.append(
            f"the usage recorded at message {anchor[0]} measured the transcript before the edits this session "
            f"already holds ({session.store.location}: an earlier run's); it is not used, sizes are counted")
    return prepared


def _describes_view(session: Session, transcript: Transcript | Sequence[Message], anchor_id: str) -> bool:
    """A usage the transcript recorded measured the transcript as the harness sent it: it describes the
    session's view only while no stored edit (but the harness's own clearings) changed a message before
    the anchor, as a session reused from an earlier run's compaction of the same file has."""
    edits = [e for e in session.edits if e.stage != HARNESS_STAGE]
    if not edits:
        return True
    messages = transcript.messages if isinstance(transcript, Transcript) else list(transcript)
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].id == anchor_id), None)
    if at is None:
        return True
    before = removed_refs(messages[:at])
    return not any(before.intersection(e.refs) for e in edits)


def describe_usage(report: Any, usage: MeasuredUsage | None, transcript: Transcript | Sequence[Message]) -> None:
    """Add what a report says about the usage it was sized on: the anchor, and the measurements refused
    (naming the file)."""
    source = transcript.path if isinstance(transcript, Transcript) else None
    anchor = usage.anchor if usage is not None else None
    notices = usage.notices(source) if usage is not None else []
    # What the reader found in the file (preserved messages a boundary names but no record holds, ...).
    found = transcript.meta.get("notices", ()) if isinstance(transcript, Transcript) else ()
    read = [n for n in found if isinstance(n, str)]
    if report.sizes is not None:
        report.sizes["anchor"] = None if anchor is None else {"message": anchor[0], "tokens": anchor[1]}
        report.sizes["usage_notices"] = notices
    report.notices[:0] = read + notices
