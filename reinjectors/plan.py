"""Plan: the latest todo list with item states (and what each involves), the latest plan (approved or
only proposed), plan mode if the session is in it, and the plan documents the work goes through
(a plan file, a `.planning/` tree, review findings: see facts/plans.py), newest first."""

from __future__ import annotations

from typing import Sequence

from worksurface.core.config import ReinjectConfig
from worksurface.core.model import Message
from worksurface.core.escape import escape_tags
from worksurface.facts.files import FileFact
from worksurface.facts.plans import plan_documents
from worksurface.engine.reinject import FACTS_READS, MESSAGE_READS, facts_of, is_shown, reinjected, report, shown_text
from worksurface.engine.state import Reinjection, Reinjector, StageContext
from worksurface.core.tokens import truncate_to_tokens

NAME = "plan"
# A plan document shorter than this is not worth its framing once cut.
MIN_DOCUMENT_TOKENS = 60
DOCUMENT_MARKER = "\n[... plan document truncated; read the file for the rest]"
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
    documents, paths = _documents(src.file_activity(), shown, limit - ctx.counter.text(body) - 20, ctx, restored,
                                  skipped)
    body = "\n\n".join(part for part in (body, documents) if part)
    if not body:
        return Reinjection([], report(NAME, before, 0, [], skipped, [r["what"] for r in restored],
                                      "no plan or todo list in the session"))
    msg = reinjected(ctx, NAME, "0", f"<plan>\n{escape_tags(body, 'plan')}\n</plan>", paths=paths)
    return Reinjection([msg], report(NAME, before, ctx.counter.message(msg), restored, skipped, []))


def _documents(files: Sequence[FileFact], shown: str, room: int, ctx: StageContext,
               restored: list[dict[str, object]], skipped: list[dict[str, str]]) -> tuple[str, list[str]]:
    """The plan documents that fit in `room` tokens, newest first, each as its last content seen
    (cut from the end when long), and their paths."""
    parts: list[str] = []
    paths: list[str] = []
    for doc in plan_documents(files):
        content = doc.content or ""
        if is_shown(content[:2000], shown):
            skipped.append({"what": doc.path, "why": "the view already shows it"})
            continue
        actions = ", ".join(sorted(doc.actions))
        head = f"Plan document {doc.path} ({actions}; its last content seen, possibly stale):"
        left = room - ctx.counter.text(head) - 4
        if left < MIN_DOCUMENT_TOKENS:
            break
        text = truncate_to_tokens(content, left, marker=DOCUMENT_MARKER)
        parts.append(f"{head}\n{text}")
        paths.append(doc.path)
        room -= ctx.counter.text(parts[-1]) + 2
        restored.append({"what": "plan document", "path": doc.path})
    return "\n\n".join(parts), paths


REINJECTOR = Reinjector(NAME, run, reads=frozenset({"counter"}) | FACTS_READS | MESSAGE_READS)
