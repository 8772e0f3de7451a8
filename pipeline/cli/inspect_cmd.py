"""`worksurface inspect`: what a transcript is made of, as tables or as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from ..core.errors import WorksurfaceError
from ..offline.inspect import inspect_file
from .output import console, markup, text
from .app import InputFormat, app, fail, settle_input, STRICT_HELP

CATEGORY_LABELS = {"stable_prefix": "stable prefix (leading system)", "dialogue": "dialogue (text, thinking)",
                   "tool_calls": "tool calls", "observations": "observations (tool results)",
                   "other": "other (framing, images, opaque)"}


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="Transcript file (any supported format), or - for standard input."),
    format: InputFormat = typer.Option("auto", "--format", "-f", help="Input format, or auto to detect."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (keys below)."),
) -> None:
    """Show tokens by role, category and tool, the largest tool results and the compactions in it.

    With --json, one object with these keys (tokens are cl100k counts):

    path, format, messages, tokens

    by_role: role -> {messages, tokens}

    by_category: stable_prefix, dialogue, tool_calls, observations, other (they add up to tokens)

    by_tool: tool name -> {calls, call_tokens, results, result_tokens}, largest first

    largest_results: up to 10 of {call_id, message_id, tool, target, tokens, is_error}

    compaction: {count, boundaries: list of {message_id, index, by, made_by (claude-code, codex,
    worksurface, ...), trigger, pre_tokens, post_tokens (from the boundary's metadata), counted_after
    (tokens given at the first call after it), reported_after (that call's recorded usage),
    summary_id}, compact_summaries: list of message ids, worksurface: origin -> count}

    live: {from_message, messages, tokens}, from the last compact boundary on, after the harness's own
    clearings

    harness_clearings: list of {message_id, index, trigger, pre_tokens, tokens_saved, cleared_results,
    tokens_cleared} (Claude Code's microcompact)

    damaged_lines: list of {line, problem, cut}: lines that are not records, read around (see --strict)

    unanswered_calls, orphan_results, queued_inputs: counts

    subagents: {folder, agents: list of {call_id, agent_type, description, goal (in full), state, mode,
    task_id, result, sidechain: {path, agent_id, goal, messages, tokens, ...} or null, matched_by},
    unlinked: sidechain files no call launched (agent-acompact-* are Claude Code's compaction calls)}
    """
    try:
        settle_input()      # reading and counting a file hold no cycles for the collector to find
        report = inspect_file(path, format.value, strict=strict)
    except WorksurfaceError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{path}: {exc.strerror or exc}") from None
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        _print(report, console())


def _sizes(b: dict[str, Any]) -> str:
    """Tokens before -> after one compaction, saying where each figure comes from."""
    before = f"{b['pre_tokens']:,} tokens before" if isinstance(b["pre_tokens"], int) else "size before unknown"
    after = [f"{b['counted_after']:,} counted after"]
    if isinstance(b["post_tokens"], int):
        after.insert(0, f"{b['post_tokens']:,} after (metadata)")
    if isinstance(b["reported_after"], int):
        after.append(f"{b['reported_after']:,} reported by the next call")
    return f"{before} -> {', '.join(after)}"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _print(report: dict[str, Any], console: Console) -> None:
    total = report["tokens"]
    # Paths, ids and targets come from the transcript: escaped, so "[...]" in them is not rich markup.
    console.print(f"[bold]{markup(str(report['path']))}[/bold]  format [cyan]{report['format']}[/cyan]  "
                  f"{report['messages']:,} messages  {total:,} tokens")
    live = report["live"]
    if live["from_message"] is not None:
        console.print(f"live (after the last compact boundary): {live['messages']:,} messages, "
                      f"{live['tokens']:,} tokens")

    roles = Table(title="By role")
    for col in ("role", "messages", "tokens", "share"):
        roles.add_column(col, justify="left" if col == "role" else "right")
    for role, row in report["by_role"].items():
        if row["messages"]:
            roles.add_row(markup(role), f"{row['messages']:,}", f"{row['tokens']:,}", _pct(row["tokens"], total))
    console.print(roles)

    cats = Table(title="By category")
    for col in ("category", "tokens", "share"):
        cats.add_column(col, justify="left" if col == "category" else "right")
    for key, tokens in report["by_category"].items():
        cats.add_row(CATEGORY_LABELS[key], f"{tokens:,}", _pct(tokens, total))
    console.print(cats)

    if report["by_tool"]:
        tools = Table(title="By tool")
        for col in ("tool", "calls", "call tokens", "results", "result tokens"):
            tools.add_column(col, justify="left" if col == "tool" else "right")
        for name, row in report["by_tool"].items():
            tools.add_row(text(name), f"{row['calls']:,}", f"{row['call_tokens']:,}", f"{row['results']:,}",
                          f"{row['result_tokens']:,}")
        console.print(tools)

    if report["largest_results"]:
        big = Table(title="Largest tool results")
        for col in ("call id", "tool", "target", "tokens"):
            big.add_column(col, justify="right" if col == "tokens" else "left", overflow="fold")
        for row in report["largest_results"]:
            big.add_row(text(row["call_id"]), text(row["tool"] + (" (error)" if row["is_error"] else "")),
                        text(row["target"]),
                        f"{row['tokens']:,}")
        console.print(big)

    comp = report["compaction"]
    if not (comp["boundaries"] or comp["compact_summaries"] or comp["worksurface"]):
        console.print("compaction markers: none")
    if comp["boundaries"]:
        console.print(f"compactions: {comp['count']}")
    for n, b in enumerate(comp["boundaries"], 1):
        console.print(markup(f"  #{n} at message {b['index']} [{b['message_id']}] by {b['made_by']}, "
                             f"trigger {b['trigger'] or '?'}: {_sizes(b)}"))
    if comp["compact_summaries"]:
        console.print(markup(f"compact summaries: {', '.join(comp['compact_summaries'])}"))
    if comp["worksurface"]:
        console.print("worksurface messages: " + ", ".join(f"{k} {v}" for k, v in comp["worksurface"].items()))
    for c in report["harness_clearings"]:
        console.print(markup(f"harness clearing after message {c['index']} [{c['message_id']}], trigger "
                             f"{c['trigger'] or '?'}: {c['cleared_results']} tool results cleared, "
                             f"{c['tokens_cleared']:,} tokens counted"
                             + (f" ({c['tokens_saved']:,} by the harness's figure)"
                                if isinstance(c["tokens_saved"], int) else "")))
    damaged = report["damaged_lines"]
    if damaged:
        console.print(markup(f"{len(damaged)} damaged line(s) read around and kept in the file: "
                             + "; ".join(f"line {d['line']}: {d['problem']}" for d in damaged)))
    notes = [f"{report[k]} {k.replace('_', ' ')}" for k in ("unanswered_calls", "orphan_results", "queued_inputs")
             if report[k]]
    if notes:
        console.print("; ".join(notes))
    _print_subagents(report.get("subagents"), console)
    if report.get("estimated_texts"):
        console.print(f"{report['estimated_texts']} huge text(s) counted on a sample: their token figures "
                      "are estimates")


def _print_subagents(tree: dict[str, Any] | None, console: Console) -> None:
    """The sub-agent tree: each parent call -> its sidechain file, with goal, state, result, size."""
    if not tree or not (tree["agents"] or tree["unlinked"]):
        return
    console.print(f"sub-agents: {len(tree['agents'])}" + (f" (sidechains in {markup(tree['folder'])})"
                                                          if tree["folder"] else ""))
    for a in tree["agents"]:
        side = a["sidechain"]
        where = (f"-> {markup(side['path'])} ({side['messages']:,} messages, {side['tokens']:,} tokens"
                 f"{', ' + markup(side['model']) if side['model'] else ''}; linked by {a['matched_by']})"
                 if side else "-> no sidechain file")
        console.print(markup(f"  {a['call_id']} at message {a['index']}: {a['agent_type']} "
                             f"\"{a['description']}\" [{a['state']}, {a['mode']}]") + f" {where}")
        console.print(text("    goal: " + a["goal"].replace("\n", "\n          "), lines=True))
        if a["result"]:
            console.print(text("    result: " + a["result"].split("\n", 1)[0][:200]
                               + (" …" if len(a["result"]) > 200 or "\n" in a["result"] else "")))
    for side in tree["unlinked"]:
        what = "compaction call" if side["compaction"] else "no parent call found"
        console.print(markup(f"  unlinked {side['path']}: {what}, {side['messages']:,} messages, "
                             f"{side['tokens']:,} tokens") + (f" (unreadable: {markup(side['error'])})"
                                                              if side["error"] else ""))
