"""The `worksurface` command: one typer app; each command lives in its own module.

Every error a user can act on is one line, `worksurface: error: <file>[:<line>]: <problem>`, and exit
code 2: worksurface's own errors through `fail`, command-line usage errors and OS errors through
`run`. Logging goes to stderr through the `worksurface` logger: notices (warnings) always, what
worksurface decided and why with `-v`.
"""

from __future__ import annotations

import gc
import inspect
import logging
import sys
from contextlib import contextmanager, nullcontext
from enum import Enum
from importlib.metadata import PackageNotFoundError, version as package_version
from typing import TYPE_CHECKING, Any, Iterable, Iterator, NoReturn, Sequence

import typer
from typer.core import TyperGroup

try:                                    # typer 0.2x carries its own copy of click
    from typer._click import exceptions as _click_errors
except ImportError:                     # pragma: no cover - older typer uses click itself
    from click import exceptions as _click_errors  # type: ignore[no-redef]

from ..core.memo import forget_all
from ..formats import FORMAT_NAMES, WRITABLE_FORMATS
from .output import TerminalFormatter, shown

# Exit codes: 2 for anything the user can fix (bad input, usage, paths), as click does for usage.
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
ERROR_PREFIX = "worksurface: error: "
LOGGER = "worksurface"
# Notices (WARNING: damaged lines read around, a compaction over its target, a summarizer that
# fell back) always reach stderr; -v adds what worksurface decided and why (INFO: fallbacks,
# breakers, skipped stages); -vv DEBUG.
_LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)
# The commands whose work can run past a couple of seconds on a large session (batch draws its own).
PROGRESS_COMMANDS = frozenset({"compact", "replay", "report", "probe", "inspect", "status", "brief"})

class _OneLineErrors(TyperGroup):
    """The command group: usage and OS errors become one `worksurface: error:` line and exit 2, the
    same as worksurface's own errors, whether run as a script or through a test runner."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _flags_without_type(self)
        _help_as_paragraphs(self)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        with _collector_restored():
            if not standalone_mode:
                return super().main(args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra)
            self._standalone(args, prog_name, complete_var, windows_expand_args, **extra)

    def _standalone(self, args: Sequence[str] | None, prog_name: str | None, complete_var: str | None,
                    windows_expand_args: bool, **extra: Any) -> NoReturn:
        argv = list(sys.argv[1:] if args is None else args)
        from .progress import on_terminal
        try:
            # Offline commands that can take long show their progress on a terminal's stderr; the
            # servers and hooks never do (their stderr is a log, and their work is per request).
            with on_terminal() if argv[:1] and argv[0] in PROGRESS_COMMANDS else nullcontext():
                result = super().main(argv, prog_name, complete_var, False, windows_expand_args, **extra)
        except _click_errors.NoArgsIsHelpError as exc:
            # Rich help is printed while the error is made; plain help is its message.
            if exc.format_message():
                typer.echo(exc.format_message())
            sys.exit(0)
        except _click_errors.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _exit(_one_line(exc.format_message()).replace("Value error, ", "") + where, EXIT_USAGE)
        except _click_errors.ClickException as exc:
            _exit(_one_line(exc.format_message()), exc.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            _exit("interrupted", EXIT_INTERRUPTED)
        except OSError as exc:      # the environment, not worksurface: a full disk, a vanished folder
            _exit(f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc.strerror or exc),
                  EXIT_USAGE)
        sys.exit(result if isinstance(result, int) else 0)


def _flags_without_type(command: Any) -> None:
    """A flag (`--json`) or a counted option (`-v`, `-vv`) takes no value, so its help shows no
    `<bool>` or `<int>` beside it, in every command and sub-command."""
    for param in getattr(command, "params", ()):
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
    make_help = command.get_help_option

    def help_option(ctx: Any) -> Any:
        option = make_help(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        _flags_without_type(sub)


def _help_as_paragraphs(command: Any) -> None:
    """Help texts are written as wrapped docstrings; rich keeps a paragraph's line breaks after the
    first paragraph, so `--help` showed them as broken lines at any width. Each paragraph becomes one
    line that rich wraps to the terminal (a paragraph opening with click's `\\b` keeps its lines), and
    brackets are escaped so `[tool.worksurface]` is shown, not taken for rich markup."""
    from rich.markup import escape

    def reflow(text: str | None) -> str | None:
        if not text:
            return text
        paragraphs = [p.strip("\n") for p in inspect.cleandoc(text).split("\n\n")]
        return "\n\n".join(escape(p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines()))
                           for p in paragraphs)

    if not getattr(command, "_help_reflowed", False):
        command.help = reflow(command.help)
        for param in getattr(command, "params", ()):
            if getattr(param, "help", None):
                param.help = reflow(param.help)
        command._help_reflowed = True
    for sub in getattr(command, "commands", {}).values():
        _help_as_paragraphs(sub)


def _exit(message: str, code: int) -> NoReturn:
    typer.echo(ERROR_PREFIX + shown(message), err=True)
    sys.exit(code)


app = typer.Typer(
    cls=_OneLineErrors,
    name="worksurface",
    help="Keep an LLM agent's context healthy: inspect, compact, probe and replay transcripts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# --session on the commands that keep a session: a directory, or a database.
SESSION_HELP = ("Keep the session here: a directory, or a postgresql:// URL (with --session-id) to keep it in "
                "a PostgreSQL database shared by several machines.")
SESSION_ID_HELP = ("The session's id: required with a postgresql:// --session (it names the session in the "
                   "database); with a directory, the session is kept in that subdirectory of it.")


def choices(name: str, values: Iterable[str]) -> Any:
    """A str Enum for a typer option, so help lists the values and a typo is a usage error."""
    return Enum(name, {v: v for v in values}, type=str)


if TYPE_CHECKING:     # members come from the registered adapters at run time; to mypy, str Enums
    from ..core.config import Config

    class InputFormat(str, Enum): ...
    class OutputFormat(str, Enum): ...
else:
    InputFormat = choices("InputFormat", ("auto", *FORMAT_NAMES))
    OutputFormat = choices("OutputFormat", WRITABLE_FORMATS)


# Set by `run`: this process ends with its command (the `worksurface` script), so the collector is
# left as the command set it; restoring it would have the interpreter's exit walk all the command read.
_process_ends_with_command = False


@contextmanager
def _collector_restored() -> Iterator[None]:
    """The garbage collector as it was before a command (settle_input changes it for the command's
    length): a process that runs commands in turn, a test runner, keeps its own; and the memos
    dropped, so what the command read is freed with it."""
    enabled = gc.isenabled()
    try:
        yield
    finally:
        forget_all()
        if not _process_ends_with_command:
            gc.unfreeze()
            if enabled:
                gc.enable()


def settle_input() -> None:
    """A one-shot command's input, just read, lives until the command ends: its objects are moved out
    of the garbage collector's sight (gc.freeze), and the cyclic collector stays off for the rest of
    the command, whose work allocates per message too (ledger records, status events, written lines)
    and holds few cycles; reference counting frees the rest. On a 100k-message transcript the
    collections were a quarter of a compaction; the process's peak memory did not change."""
    gc.freeze()
    gc.disable()


def fail(message: str, code: int = EXIT_USAGE) -> "typer.Exit":
    """Print a one-line error to stderr and return the Exit to raise (no traceback for user errors)."""
    # Errors name files and quote values: a control character in them is shown, never acted on.
    typer.echo(ERROR_PREFIX + shown(_one_line(message)), err=True)
    return typer.Exit(code)


def _one_line(message: str) -> str:
    """Messages from parsers and pydantic can span lines; an error stays one line."""
    # Split on newlines only: a carriage return or another control inside a name is shown (`shown`).
    return " ".join(part.strip() for part in str(message).split("\n") if part.strip())


class _StderrHandler(logging.StreamHandler):
    """Writes each record to the stderr of the moment: a test runner swaps sys.stderr per command,
    and a handler holding the stream it started with would write to a closed one."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(verbosity: int) -> None:
    """Send the `worksurface` logger to stderr at the level `-v` asked for (notices only by default)."""
    logger = logging.getLogger(LOGGER)
    for handler in list(logger.handlers):
        if getattr(handler, "_worksurface_cli", False):
            logger.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(TerminalFormatter("worksurface: %(levelname)s: %(message)s"))
    handler._worksurface_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(_LEVELS[min(verbosity, len(_LEVELS) - 1)])
    logger.propagate = False


def installed_version() -> str:
    try:
        return package_version("worksurface")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"worksurface {installed_version()}")
        raise typer.Exit()


@app.callback()
def _global_options(
    verbose: int = typer.Option(0, "-v", "--verbose", count=True, show_default=False,
                                help="Log what worksurface decides to stderr (-v: fallbacks, breakers, "
                                     "skipped stages; -vv: debug)."),
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print the version and exit."),
) -> None:
    """Keep an LLM agent's context healthy: inspect, compact, probe and replay transcripts."""
    _tolerant_streams()
    configure_logging(verbose)


def _tolerant_streams() -> None:
    """Print a lone surrogate (half an emoji from a JSON `\\ud83d` escape in a transcript) as that
    escape instead of dying on UnicodeEncodeError: output stays valid UTF-8 and nothing is lost."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def run(args: list[str] | None = None) -> NoReturn:
    """Run the command line (the `worksurface` script and `python -m worksurface`)."""
    global _process_ends_with_command
    _process_ends_with_command = True
    app(args=args, prog_name="worksurface")
    sys.exit(0)     # pragma: no cover - app() always exits in standalone mode


WINDOW_HELP = ("Context window in tokens (default: the window the transcript records, as Codex rollouts do, "
               "else the configured one, 200000).")
MAX_OUTPUT_HELP = "Tokens kept free for the model's answer (default: 10% of the window, at most 20000)."
BUFFER_HELP = "Safety margin under the window (default: 6.5% of the window, at most 13000)."
PIN_HELP = ("Content every compaction must keep verbatim (repeatable): TEXT, re:REGEX, or @PATH (the file's "
            "text); added to the configured pins. A compaction that cannot keep one says so.")
AGENT_HELP = ("Which agent's settings apply (config `agents`): main, subagent, or a sub-agent's type "
              "(merged over subagent).")
THRESHOLD_HELP = ("Compact automatically above this many tokens (default: window - max output - buffer); "
                  "higher or lower than the default.")
NO_AUTOCOMPACT_HELP = "Never compact automatically (the view may pass the threshold); --force still compacts."


def with_pins(config: "Config", pins: Sequence[str]) -> "Config":
    """The configuration with `--pin` values added to its pins (`@PATH`: the text of a regular file of
    at most `pin_file_max_bytes`); a file that cannot be a pin, or a `re:` pattern google-re2 cannot
    compile, is a one-line error naming the pin (exit 2)."""
    if not pins:
        return config
    from ..core.errors import ConfigError, FormatError
    from ..core.fileio import read_small_text

    resolved = []
    for pin in pins:
        if pin.startswith("@"):
            try:
                resolved.append(read_small_text(pin[1:], config.pin_file_max_bytes, "pin file").strip())
            except FormatError as exc:
                raise fail(f"--pin {pin}: cannot read {exc}") from None
        else:
            resolved.append(pin)
    try:
        return config.with_overrides(pins=(*config.pins, *resolved))
    except ConfigError as exc:
        raise fail(f"--pin: {exc}") from None


STRICT_HELP = ("Refuse a session file with a damaged line (not a JSON record, or a cut last line) instead of "
               "reading around it with a notice.")
