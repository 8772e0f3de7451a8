"""Plan: the latest todo list with item states (and what each involves), the latest plan (approved or
only proposed), and plan mode if the session is in it.

A plan or todo comes only from the harness's plan and todo tools (the call's own input) and the
harness's plan-mode records: never from a file the agent read or a command's output, whatever it
holds (a `TODO.md` printed by `cat`, a dependency list, a JSON todo structure). A plan document the
work goes through (facts/plans.py) is a file: the files reinjector quotes it with its path, as an
observation of the workspace."""

from __future__ import annotations

from worksurface.core.config import ReinjectConfig
from worksurface.core.model import Message
from worksurface.core.escape import escape_tags
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, is_shown, reinjected, report, shown_text
from worksurface.engine.state import Reinjection, Reinjector, StageContext
from worksurface.core.tokens import truncate_to_tokens

NAME = "plan"
# Items in progress matter most after a compaction, then pending ones; done items least.
STATUS_ORDER = {"in_progress": 0, "pending": 1, "completed": 2}


def run(view: list[Message], config: ReinjectConfig, ctx: StageContext, budget: int) -> Reinjection:
    src = facts_of(ctx, view)
    before = ctx.counter.messages(view)
    todos = src.todo_state()
    mode = src.plan_mode()
    shown = shown_text(view)
    lines: list[str] = []
    restored, skipped = [], []
    if todos is not None:
        items = sorted(todos.items, key=lambda it: STATUS_ORDER.get(it.status, 3))
        visible = [it for it in items if is_shown(f"[{it.status}] {it.text}", shown)
                   and (not it.detail or is_shown(it.detail, shown))]
        if len(visible) == len(items):
            skipped.append({"what": "todo list", "why": "the view already shows every item with its state"})
        else:
            lines.append(f"Todo list (latest {todos.tool} call):")
            for it in items:
                lines.append(f"- [{it.status}] {it.text}")
                if it.detail:
                    lines.append(f"  ↳ {it.detail}")
            restored.append({"what": "todo list", "items": len(items)})
    if mode.active or mode.plan:
        head = ("Plan mode is ON: do not edit files until the plan is approved." if mode.active
                else "Approved plan (the user approved it with the state below; follow it):" if mode.approved
                else "Last proposed plan (not approved yet):")
        plan_text = mode.plan or ""
        if plan_text and is_shown(plan_text, shown):  # whole: a summary may quote only its start
            # The text is in the view already: only its state, file and title, so the model knows
            # which plan binds it without reading the text twice.
            lines.append(head)
            if mode.plan_path:
                lines.append(f"(saved at {mode.plan_path})")
            title = next((ln.strip() for ln in plan_text.splitlines() if ln.strip()), "")
            lines.append(f"{title}\n[the full text is quoted in the summary above]")
            restored.append({"what": "plan state", "why": "the view already shows the text"})
        else:
            lines.append(head)
            if mode.plan_path:
                lines.append(f"(saved at {mode.plan_path})")
            if plan_text:
                lines.append(plan_text)
            restored.append({"what": "plan mode" if mode.active else "plan"})
    # A long approved plan may take a quarter of the room left when that is more than the cap.
    limit = min(budget, max(config.plan_tokens, budget // 4))
    body = truncate_to_tokens("\n".join(lines), max(0, limit - 20), marker="\n[... plan truncated]") if lines else ""
    if not body:
        return Reinjection([], report(NAME, before, 0, [], skipped, [r["what"] for r in restored],
                                      "no plan or todo list in the session"))
    msg = reinjected(ctx, NAME, "0", f"<plan>\n{escape_tags(body, 'plan')}\n</plan>")
    return Reinjection([msg], report(NAME, before, ctx.counter.message(msg), restored, skipped, []))


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"counter"}) | FACTS_READS | MESSAGE_READS)
