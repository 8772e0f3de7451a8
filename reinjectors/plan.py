"""Plan: the latest todo list or plan with item states, and plan mode if the session is in it."""

from __future__ import annotations

from typing import Sequence

from worksurface.config import ReinjectConfig
from worksurface.facts.progress import plan_mode, todo_state
from worksurface.model import Message
from worksurface.reinject import is_shown, report, reinjected, shown_text
from worksurface.state import StageContext, StageReport
from worksurface.tokens import truncate_to_tokens

NAME = "plan"
# Items in progress matter most after a compaction, then pending ones; done items least.
STATUS_ORDER = {"in_progress": 0, "pending": 1, "completed": 2}


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> tuple[list[Message], StageReport]:
    transcript: Sequence[Message] = ctx.extras.get("transcript", view)
    before = ctx.counter.messages(view)
    todos = todo_state(transcript)
    mode = plan_mode(transcript)
    shown = shown_text(view)
    lines: list[str] = []
    restored, skipped = [], []
    if todos is not None:
        items = sorted(todos.items, key=lambda it: STATUS_ORDER.get(it.status, 3))
        visible = [it for it in items if is_shown(f"[{it.status}] {it.text}", shown)]
        if len(visible) == len(items):
            skipped.append({"what": "todo list", "why": "the view already shows every item with its state"})
        else:
            lines.append(f"Todo list (latest {todos.tool} call):")
            lines += [f"- [{it.status}] {it.text}" for it in items]
            restored.append({"what": "todo list", "items": len(items)})
    if mode.active or (mode.plan and not mode.approved):
        head = "Plan mode is ON: do not edit files until the plan is approved." if mode.active else "Last proposed plan:"
        plan_text = mode.plan or ""
        if plan_text and is_shown(plan_text[:200], shown):
            skipped.append({"what": "plan", "why": "the view already shows it"})
        else:
            lines.append(head)
            if mode.plan_path:
                lines.append(f"(saved at {mode.plan_path})")
            if plan_text:
                lines.append(plan_text)
            restored.append({"what": "plan mode" if mode.active else "plan"})
    if not lines:
        return [], report(NAME, before, 0, [], skipped, [], "no plan or todo list in the session")
    limit = min(budget, config.plan_tokens)
    body = truncate_to_tokens("\n".join(lines), max(0, limit - 20), marker="\n[... plan truncated]")
    if not body:
        return [], report(NAME, before, 0, [], skipped, [r["what"] for r in restored])
    msg = reinjected(NAME, "0", f"<plan>\n{body}\n</plan>")
    return [msg], report(NAME, before, ctx.counter.message(msg), restored, skipped, [])
