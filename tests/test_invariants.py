"""The view invariants, property-tested over generated transcripts in every writable format (the
numbers are the ones the checks below cite):

1. every tool call in the view has its result, and no result lacks its call;
2. system messages are never altered, order is kept, nothing is duplicated;
3. the latest user message and everything after the last assistant message are untouched (except
   the budget of a new oversized tool result);
4. the view fits under the threshold (or `ContextOverflowError` says why);
5. idempotent (preparing again changes nothing) and deterministic (same input, same bytes);
6. nothing is lost: removed or replaced content can be fetched back by id from the session;
7. worksurface's own messages are known by metadata alone.

Small windows make every stage fire on modest inputs; each example goes through an adapter (write
then read), one `prepare`, a second `prepare` (idempotence), a fresh session (determinism), and an
export back to the format (the view must still be a valid request).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import words
from worksurface import Session
from worksurface.formats import WRITABLE_FORMATS, Transcript, dumps, loads
from worksurface.formats.convert import TOOL_CALL_FORMATS
from worksurface.facts.requests import is_user_message
from worksurface.core.model import Message, Origin, Text, ToolCall, ToolResult, view_text
from worksurface.core.view import check_no_duplicates, pairing_problems

# Small enough that budget, snip, microcompact, collapse and autocompact all fire on generated input.
SMALL = dict(window=24_000, max_output=2_000, autocompact_buffer=2_000, post_compact_target_tokens=8_000,
             budget={"max_result_tokens": 2_500, "max_turn_tokens": 5_000},
             snip={"min_gain_tokens": 300},
             microcompact={"trigger_tokens": 9_000, "clear_at_least": 1_000, "protect_tokens": 2_000},
             autocompact={"keep_tail_tokens": 2_000, "summary_tokens": 2_000, "user_messages_tokens": 800})

TOOLS = [("Read", "file_path"), ("Bash", "command"), ("Grep", "pattern"), ("Edit", "file_path"), ("Skill", "skill")]


@st.composite
def transcripts(draw) -> list[Message]:
    msgs: list[Message] = [Message("sys", "system", (Text("You are a careful coding agent."),))]
    n_rounds = draw(st.integers(3, 28))
    k = 0
    for r in range(n_rounds):
        if r == 0 or draw(st.integers(0, 5)) == 0:
            msgs.append(Message(f"u{r}", "user", (Text(f"Request {r}: never edit vendor/{r}. " + words(20, r)),)))
        n_calls = draw(st.integers(0, 3))
        calls, results = [], []
        for _ in range(n_calls):
            name, key = draw(st.sampled_from(TOOLS))
            target = f"/repo/{draw(st.sampled_from(['a.py', 'b.py', 'c.py', 'tests']))}"
            size = draw(st.sampled_from([5, 60, 400, 1_500, 3_000]))
            repeat = draw(st.booleans())
            content = words(size, seed=0 if repeat else k)
            calls.append(ToolCall(f"t{k}", name, {key: target}))
            results.append(ToolResult(f"t{k}", content, is_error=draw(st.integers(0, 9)) == 0))
            k += 1
        text = (Text(f"Step {r}: " + words(draw(st.sampled_from([4, 40])), r)),)
        msgs.append(Message(f"a{r}", "assistant", text + tuple(calls)))
        if results:
            msgs.append(Message(f"r{r}", "user", tuple(results)))
    if msgs[-1].role == "assistant" and msgs[-1].tool_calls:
        msgs.append(Message("last-user", "user", (Text("continue"),)))
    return msgs


def _through(fmt: str, msgs: list[Message]) -> list[Message]:
    return loads(dumps(Transcript([], fmt), msgs), fmt).messages


def _check_view(live: list[Message], view: list[Message], threshold: int, session: Session) -> None:
    # 1. Pairs intact; 2. system prefix kept, order kept, nothing duplicated.
    assert not pairing_problems(view), pairing_problems(view)
    assert not check_no_duplicates(view)
    systems = [m for m in live if m.role == "system" and m.origin is Origin.CONVERSATION]
    assert view[: len(systems)] == systems
    order = {m.id: i for i, m in enumerate(live)}
    seen = [order[m.id] for m in view if m.id in order]
    assert seen == sorted(seen)
    # 3. The newest user message survives verbatim; everything after the last assistant message is
    #    untouched except for the budget of an oversized result.
    last_user = next((m for m in reversed(live) if is_user_message(m)), None)
    if last_user is not None:
        assert last_user in view or " ".join(last_user.text.split()) in " ".join(view_text(view).split())
    last_assistant = max((i for i, m in enumerate(live) if m.role == "assistant"), default=-1)
    shown = {m.id: m for m in view}
    for m in live[last_assistant + 1:]:
        assert m.id in shown
        if shown[m.id] != m:
            # Only a new result's reduction at ingestion or its budget may touch the last turn.
            assert set(shown[m.id].meta.get("edited_calls", {}).values()) <= {"ingest", "budget"}
    # 4. Under the threshold.
    assert session.counter.messages(view) <= threshold
    # 6. Nothing lost; 7. worksurface's messages known by origin alone.
    for m in live:
        if m.id not in shown or shown[m.id] != m:
            assert session.original(m.id) == m
    for m in view:
        if m.id not in order:
            assert m.origin is not Origin.CONVERSATION


def _property(fmt: str, msgs: list[Message], tmp_path) -> None:
    live = _through(fmt, msgs)
    session = Session.open(None, **SMALL)
    prepared = session.prepare(live, now=1_000.0)
    view = prepared.messages
    _check_view(live, view, session.config.threshold, session)
    # 5. Idempotent (same session, same transcript) and deterministic (fresh session).
    assert session.prepare(live, now=1_000.0).messages == view
    assert Session.open(None, **SMALL).prepare(live, now=1_000.0).messages == view
    # The view exports as a valid request of the same format.
    exported = loads(dumps(Transcript([], fmt), view), fmt).messages
    assert not pairing_problems(exported)


settings.register_profile("invariants", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])


def _make(fmt: str):
    @settings(settings.get_profile("invariants"))
    @given(msgs=transcripts())
    def test(msgs, tmp_path):
        _property(fmt, msgs, tmp_path)
    test.__name__ = f"test_invariants_hold_for_{fmt.replace('-', '_')}"
    return test


# Formats that hold any tool call as a call: in aider (no calls) and mini-swe-agent (bash only) the
# generated Read/Grep/Edit calls become text, which no stage may clear, so the property is not theirs;
# their round trips are tested in test_formats_write_logs.py.
for _fmt in (f for f in WRITABLE_FORMATS if f in TOOL_CALL_FORMATS):
    globals()[f"test_invariants_hold_for_{_fmt.replace('-', '_')}"] = _make(_fmt)


def test_the_small_config_makes_every_reducing_stage_fire():
    """The property above is only meaningful if the stages act at these sizes: a session shaped like
    the generated ones, grown call by call, sees every stage fire under SMALL."""
    msgs: list[Message] = [Message("sys", "system", (Text("You are a careful coding agent."),)),
                           Message("u0", "user", (Text("Port the parser. Never edit vendor/."),))]
    session = Session.open(None, **SMALL)
    fired: set[str] = set()
    for r in range(60):
        # Skill results are never microcompacted, so the view eventually needs an autocompact.
        name, key = TOOLS[4] if r % 4 == 3 and r > 4 else TOOLS[r % 3]
        size = 4_000 if r == 3 else (2_000 if name == "Skill" else (1_200 if r % 2 else 300))
        content = words(size, seed=0 if r in (5, 7) else r)
        msgs.append(Message(f"a{r}", "assistant", (Text(f"step {r}"), ToolCall(f"t{r}", name, {key: "/repo/a.py"}))))
        msgs.append(Message(f"r{r}", "user", (ToolResult(f"t{r}", content),)))
        prepared = session.prepare(msgs, now=float(r))
        fired |= {s.name for s in prepared.report.stages if s.items and not s.skipped}
        _check_view(msgs, prepared.messages, session.config.threshold, session)
    assert {"budget", "snip", "microcompact", "autocompact"} <= fired
