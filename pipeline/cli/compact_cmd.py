"""`worksurface compact`: compact a saved transcript offline and write it back in its format."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.table import Table

from ..core.errors import WorksurfaceError
from ..core.model import Origin
from ..core.fileio import STDIN, STDOUT, display_name, output_file, read_text, replace_unchanged
from ..formats import WRITABLE_FORMATS, Dropped, Transcript, claude_code, dumps_report, loads, write_transcript
from ..formats.claude_code_projects import (Target, content_hash, file_hash, new_session_id, projects_target,
                                            write_target)
from ..formats.claude_code_projects import session_id as claude_projects_session_id
from ..offline.sizing import SizeFlags, prepare_once
from ..probes.cut import cut, cut_transcript
from ..session import homes
from ..session.locations import describe
from ..session.pgstore import is_postgres_url, redacted
from .output import console, echo, markup, shown
from .app import (AGENT_HELP, BUFFER_HELP, InputFormat, MAX_OUTPUT_HELP, OutputFormat, PIN_HELP, SESSION_ID_HELP,
                  STRICT_HELP, WINDOW_HELP, app, fail, settle_input, with_pins)

# Inputs in a format that cannot be written are written as OpenAI chat messages unless told otherwise.
DEFAULT_EXPORT_FORMAT = "openai"


@app.command()
def compact(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    out: Optional[Path] = typer.Option(None, "-o", "--out",
                                       help="Where to write the compacted transcript "
                                            "(default: <name>.compacted<ext> in the current directory). "
                                            "Never a directory, FIFO or symlink; the input only with --in-place."),
    in_place: bool = typer.Option(False, "--in-place",
                                  help="Replace the input file with the compacted transcript (atomically)."),
    format: InputFormat = typer.Option("auto", "--format", help="Input format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    at: Optional[str] = typer.Option(None, "--at",
                                     help="Compact the transcript as it stood at a point: 'boundary' (just "
                                          "before its first compaction marker) or a number of messages."),
    out_format: Optional[OutputFormat] = typer.Option(None, "--out-format",
                                             help="Output format (default: the input's). Another format than the "
                                                  "input's is converted; the report says what it dropped."),
    window: Optional[int] = typer.Option(None, "--window", help=WINDOW_HELP),
    max_output: Optional[int] = typer.Option(None, "--max-output", help=MAX_OUTPUT_HELP),
    buffer: Optional[int] = typer.Option(None, "--buffer", help=BUFFER_HELP),
    target: Optional[int] = typer.Option(None, "--target",
                                         help="Post-compact target in tokens (default 20% of the window)."),
    force: bool = typer.Option(False, "--force", help="Compact now, as a manual /compact would."),
    pin: List[str] = typer.Option([], "--pin", help=PIN_HELP),
    session: Optional[str] = typer.Option(
        None, "--session",
        help="Keep the session (log, decisions, artifacts) in this directory, or in a postgresql:// database "
             "with --session-id (default: <OUT>.worksurface beside the output, or <session-id>/worksurface in "
             "the Claude Code session's folder)."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help=SESSION_ID_HELP),
    no_session: bool = typer.Option(False, "--no-session",
                                    help="Keep the session in memory only: the artifact markers the output holds "
                                         "then point at nothing."),
    no_usage: bool = typer.Option(False, "--no-usage",
                                  help="Count the text only; by default the size is anchored on the input "
                                       "tokens the transcript records the provider measured."),
    claude_projects: Optional[Path] = typer.Option(
        None, "--claude-projects",
        help="Write a Claude Code session into this projects folder (e.g. ~/.claude/projects), as "
             "<escaped cwd>/<session-id>.jsonl, where `claude --resume <session-id>` finds it; refuses to "
             "replace a session file that changed after it was read."),
    as_new_session: bool = typer.Option(False, "--as-new-session",
                                        help="Claude Code: write under a new session id (records and file "
                                             "name), leaving the original session as it is."),
    agent: Optional[str] = typer.Option(None, "--agent", help=AGENT_HELP + " Default: read from the transcript "
                                        "(a Claude Code sidechain is a sub-agent, typed by its parent's call)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Run the staged pipeline once on a saved transcript and write the resulting view."""
    from ..session.session import Session  # LangGraph is slow to import; only commands that compact pay for it
    from ..subagents.agents import agent_of

    if no_session and session is not None:
        raise fail("--session and --no-session exclude each other")
    home: Path | str | None = None  # a session directory, or a database URL (with session_id)
    created = False
    try:
        settle_input()  # before reading: re-enabled after the read, the collector would scan all it made
        text = read_text(path, "transcript")
        read_hash = content_hash(text)  # what was compacted: a session file must still be this when replaced
        transcript = loads(text, format.value, display_name(path), strict=strict)
        del text  # the transcript holds what it needs of it
        instructions = None  # a manual compaction's, when compacting at its boundary
        if at is not None:
            point = cut(transcript.messages, at)
            before = cut_transcript(transcript, point.before)
            assert isinstance(before, Transcript)  # a Transcript in, a Transcript out
            transcript, instructions = before, point.instructions
        flags = SizeFlags(window, target, max_output, buffer, use_usage=not no_usage)
        config = with_pins(flags.config(transcript), pin)
        fmt = out_format.value if out_format is not None else (
            transcript.format if transcript.format in WRITABLE_FORMATS else DEFAULT_EXPORT_FORMAT)
        output = _Output.resolve(path, out, in_place, claude_projects, as_new_session, at, transcript, fmt,
                                 read_hash)
        home, session_id = _session_home(session, session_id, no_session, output)
        created = isinstance(home, Path) and not home.exists()
        with Session.open(home, session_id=session_id, config=config,
                          agent=agent if agent is not None else agent_of(transcript)) as kept:
            prepared = prepare_once(kept, transcript, use_usage=flags.use_usage, force=force,
                                    instructions=instructions)
            if _nothing_new(transcript, prepared.report):
                # An already compacted file with nothing new: written back as it was, not grown by a
                # second status bar (the session it is read into has not seen the first one).
                prepared = dataclasses.replace(prepared, messages=list(transcript.messages))
                prepared.report.notices.append("nothing new to compact since the last compaction: "
                                               "the transcript is written as it was")
            artifacts = len(kept.store.artifact_ids())
        if not prepared.messages:
            raise fail(f"{path}: nothing to write (the transcript has no messages)")
        text_out, dropped = output.write(transcript, prepared.messages, fmt, path, read_hash)
    except WorksurfaceError as exc:
        _discard(home if created else None)
        raise fail(str(exc)) from None
    except BaseException:
        _discard(home if created else None)
        raise
    destination = output.destination
    where = _say_where(home, session_id, destination, artifacts)
    report = prepared.report
    if output.to_stdout:
        typer.echo(text_out, nl=False)
        console(stderr=True).print(f"compacted {report.tokens_before:,} -> {report.tokens_after:,} tokens "
                                   f"({fmt}, to standard output)", highlight=False)
        return
    if as_json:
        typer.echo(json.dumps({**report.to_json(), "output": str(destination), "format": fmt,
                               "conversion": dropped.to_json(), "artifacts": where,
                               **({"session_id": output.new_id} if output.new_id else {})}, indent=2))
        return
    _print_report(report, destination, fmt, dropped)
    _print_sizes(report.sizes or {})


@dataclasses.dataclass(frozen=True)
class _Output:
    """Where the compacted transcript goes: a file, standard output, the input in place, or a Claude Code
    session file (`goal`, in a projects folder or under a new session id)."""

    destination: Path
    to_stdout: bool
    in_place: bool
    goal: Target | None
    new_id: str | None

    @classmethod
    def resolve(cls, path: Path, out: Path | None, in_place: bool, claude_projects: Path | None,
                as_new_session: bool, at: str | None, transcript: Transcript, fmt: str, read_hash: str) -> "_Output":
        """Where the options send the output, refusing combinations that cannot be written."""
        out = path if in_place and out is None else out
        to_stdout = _check_combination(path, out, in_place, claude_projects, as_new_session, transcript, fmt)
        new_id = None
        if as_new_session:
            old_id = claude_projects_session_id(transcript)
            if old_id is None:
                raise fail(f"{path}: --as-new-session needs a Claude Code session (records with a sessionId)")
            new_id = new_session_id(old_id, read_hash)
        goal: Target | None = None
        if claude_projects is not None:
            goal = projects_target(claude_projects, transcript, path, new_id, read_hash)
            if at is not None and new_id is None and goal.path.resolve() == path.resolve():
                raise fail(f"refusing to replace {path} with its state at --at {at}: the records after the "
                           "cut would be lost; add --as-new-session")
            destination = goal.path
        elif new_id is not None:
            destination = out or Path.cwd() / f"{new_id}.jsonl"
            goal = Target(destination, new_id, file_hash(destination), path)
        else:
            destination = out or _default_destination(path, fmt, transcript.format)
        return cls(destination, to_stdout, in_place, goal, new_id)

    def write(self, transcript: Transcript, messages: list[Any], fmt: str, path: Path,
              read_hash: str) -> tuple[str, Dropped]:
        """Writes the compacted messages; returns the text for standard output (else "") and what the
        format conversion dropped."""
        if self.goal is not None:
            return "", write_target(transcript, messages, self.goal)
        if self.to_stdout:
            return dumps_report(transcript, messages, fmt)
        if self.in_place and self.destination.resolve() == path.resolve():
            text_out, dropped = dumps_report(transcript, messages, fmt)
            # Replaced only if it still holds what was compacted: records a harness appended meanwhile
            # are never dropped (core.fileio.replace_unchanged).
            replace_unchanged(path, text_out, read_hash, inputs=[path])
            return text_out, dropped
        return "", write_transcript(transcript, self.destination, messages, fmt, inputs=[path])


def _check_combination(path: Path, out: Path | None, in_place: bool, claude_projects: Path | None,
                       as_new_session: bool, transcript: Transcript, fmt: str) -> bool:
    """Refuses output options that exclude each other, or an output file that may not be written, before
    any work is done (nothing is computed only to fail at the write); True when writing to standard output."""
    if in_place and str(path) == STDIN:
        raise fail("--in-place needs a file, not standard input")
    if str(path) == STDIN and out is None and claude_projects is None:
        raise fail("reading standard input: give the output file with -o (- for standard output)")
    to_stdout = out is not None and str(out) == STDOUT and not in_place
    if to_stdout and (claude_projects is not None or as_new_session):
        raise fail("-o - (standard output) cannot be combined with --claude-projects or --as-new-session")
    if claude_projects is None and not to_stdout and (out is not None or not as_new_session):
        output_file(out or _default_destination(path, fmt, transcript.format), inputs=[path], in_place=in_place)
    if (claude_projects or as_new_session) and fmt != claude_code.NAME:
        raise fail(f"--claude-projects and --as-new-session write Claude Code sessions, not {fmt}")
    return to_stdout


def _session_home(session: str | None, session_id: str | None, no_session: bool,
                  output: _Output) -> tuple[Path | str | None, str | None]:
    """Where the session (log, decisions, artifacts) is kept, and the id within it: a database URL with
    its id, a directory (beside the output, or in the Claude Code session's folder, by default), or
    nothing (memory only: --no-session, or standard output without --session)."""
    if session is not None and is_postgres_url(session):
        return session, session_id
    if no_session or (output.to_stdout and session is None):
        return None, session_id
    if session is not None:
        # A directory's subdirectory is named by the home itself.
        return (Path(session) / session_id if session_id else Path(session)), None
    home = (homes.claude_session_folder(output.destination) if output.goal is not None
            else homes.beside(output.destination)).absolute()
    homes.check_home(home)
    return home, None


def _nothing_new(transcript: Transcript, report: Any) -> bool:
    """A compacted transcript no stage found anything in: no compaction, no edit of any stage."""
    return (report.boundary is None and not any(s.items for s in report.stages)
            and any(m.origin in (Origin.BOUNDARY, Origin.SUMMARY) for m in transcript.messages))


def _discard(home: Path | str | None) -> None:
    """Remove a session directory this run created when the run failed: nothing is left half-made (a
    database session is never half-made: each prepare commits whole or not at all)."""
    if isinstance(home, Path) and home.is_dir():
        shutil.rmtree(home, ignore_errors=True)


def _say_where(home: Path | str | None, session_id: str | None, destination: Path, artifacts: int) -> dict[str, Any]:
    """One line on stderr saying where the artifacts the output's markers name are kept (or that they
    are not); the same as JSON for --json."""
    if home is None:
        if artifacts:
            echo(f"worksurface: warning: {artifacts} artifacts were kept in memory only (--no-session): "
                 f"the markers in {shown(destination)} point at nothing", err=True)
        return {"session": None, "count": artifacts}
    if isinstance(home, Path):
        session, fetch = str(home), f"worksurface artifact {destination} ID"
    else:
        session, fetch = describe(home, session_id), f"worksurface artifact {redacted(home)} ID --session-id {session_id}"
    count = f"{artifacts} artifact{'' if artifacts == 1 else 's'}"
    echo(f"worksurface: session kept in {shown(session)} ({count}; `{shown(fetch)}` prints one)", err=True)
    return {"session": session, "count": artifacts, "fetch": fetch}


def _default_destination(path: Path, fmt: str, source_format: str) -> Path:
    """<name>.compacted<ext> in the current directory (.json when the format changes)."""
    return Path.cwd() / f"{path.stem}.compacted{path.suffix if fmt == source_format else '.json'}"


def _print_sizes(sizes: dict[str, Any]) -> None:
    """Both figures: worksurface's text count, and the size as the provider measures it."""
    echo(describe_sizes(sizes))


def describe_sizes(sizes: dict[str, Any]) -> str:
    """One line with both units of a report's sizes, and which one the compaction acted on."""
    before, after, anchor = sizes["before"], sizes["after"], sizes.get("anchor")
    calibration = sizes.get("calibration")
    source = (f"anchored on the usage measured at {anchor['message']} ({anchor['tokens']:,} tokens)" if anchor
              else "no measured usage: text count only (--no-usage, none recorded, or none that describes "
                   "the view: see the notices)")
    fit = (f"; fixed part {calibration['fixed']:,}, ratio {calibration['ratio']:.3f}"
           if calibration and anchor else "")
    return (f"size: counted {before['counted']:,} -> {after['counted']:,} tokens; as the provider measures "
            f"{before['measured']:,} -> {after['measured']:,} tokens ({source}{fit}); the target and "
            f"thresholds were applied to the {sizes['unit']} size")


def _print_report(report: Any, destination: Path, fmt: str, dropped: Dropped) -> None:
    table = Table(title="worksurface compact")
    for col, justify in (("stage", "left"), ("tokens before", "right"), ("tokens after", "right"),
                         ("items", "right"), ("ms", "right"), ("note", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in report.stages + report.reinjected:
        table.add_row(markup(s.name), f"{s.tokens_before:,}", f"{s.tokens_after:,}", str(s.items), f"{s.ms:.1f}",
                      markup(s.skipped or ""))
    out = console()
    out.print(table)
    out.print(f"transcript {report.tokens_before:,} tokens -> view {report.tokens_after:,} tokens "
              f"in {report.ms:.0f} ms")
    if report.boundary:
        b = report.boundary
        out.print(f"boundary: {markup(b['trigger'])}, epoch {b['epoch']}, {b['pre_tokens']:,} -> "
                  f"{b['post_tokens']:,} tokens, {len(b['covered_ids'])} messages summarized by "
                  f"{markup(b['summarizer'])}")
    else:
        out.print("no compact boundary written (under the threshold; use --force to compact anyway)")
    out.print(f"billed for sending this view: ${report.cost:.4f} (session total ${report.cost_total:.4f})")
    for notice in getattr(report, "notices", ()):     # breaker paused, summarizer fallback, ...
        out.print(f"notice: {shown(notice)}", markup=False, highlight=False)
    out.print(f"wrote {markup(destination)} ({fmt})", highlight=False)
    if dropped.source != dropped.target or not dropped.empty or dropped.carried:
        out.print(shown(dropped.describe(), lines=True), markup=False, highlight=False)
