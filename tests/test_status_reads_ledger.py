"""The status bar is a projection of the ledger's reading (issue 53): status/ parses nothing and
imports none of facts/; the ledger's status reader (`ledger.walk`) reads each message into typed
observations, and the bar's fold turns them into events."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from hypothesis import given, settings, strategies as st

from status_helpers import Chat
from worksurface.core.model import Message, Origin, Text
from worksurface.facts.reading import ProgressReader
from worksurface.facts.session_context import cd_directory, stamp_date
from worksurface.ledger import Ledger
from worksurface.ledger.walk import CallSeen, ResultSeen, StatusReader
from worksurface.status import EnvironmentChanged, TaskUpdated, derive_events, reduce
from worksurface.status.derive import DerivedStatus
from worksurface.status.display import bar_text
from worksurface.status.events import StatusEventError, VerificationFinished, is_runner_name
from worksurface.summarizers.sections import summary_request

REPO = Path(__file__).resolve().parents[1]


def _stage(messages: list[Message]) -> str | None:
    field = reduce(derive_events(messages)).sections.get("task", {}).get("stage")
    return field.value if field is not None else None


# ------------------------------------------------------------------------------ authority

def test_an_mcp_tool_named_like_a_plan_tool_sets_no_stage():
    """Plan mode is the harness's: before, `mcp__srv__ExitPlanMode` (normalized to `exitplanmode`) set
    the stage to implementing; the server's tool is another program's and says nothing of the stage."""
    chat = Chat()
    chat.user("plan the payment fix")
    chat.tool("mcp__srv__EnterPlanMode", {}, "entered")
    chat.tool("mcp__srv__ExitPlanMode", {"plan": "1. fix"}, "User has approved your plan")
    assert _stage(chat.messages) is None


def test_the_harness_s_own_plan_tools_set_the_stage():
    chat = Chat()
    chat.user("plan the payment fix")
    chat.tool("EnterPlanMode", {}, "entered plan mode")
    assert _stage(chat.messages) == "planning"
    chat.tool("ExitPlanMode", {"plan": "1. fix"}, "User has approved your plan")
    assert _stage(chat.messages) == "implementing"
    chat.tool("EnterPlanMode", {}, "denied", is_error=True)  # a failed call starts nothing
    assert _stage(chat.messages) == "implementing"


# ------------------------------------------------------------------------------ one vocabulary

def test_cwd_and_branch_are_read_under_the_ledger_s_keys():
    """The bar reads a message's working directory and branch where the ledger does (the adapter's
    field, or the source record it keeps), so both name the same directory and branch."""
    chat = Chat()
    chat.user("hi", raw={"cwd": "/work/pay", "gitBranch": "fix-sig"})
    chat.assistant("ok")
    snap = reduce(derive_events(chat.messages))
    assert snap.sections["environment"]["cwd"].value == "/work/pay"
    assert snap.sections["repository"]["branch"].value == "fix-sig"
    assert Ledger.over(chat.messages).upto().main_cwd() == "/work/pay"


def test_a_cd_moves_the_bar_s_directory_and_paths_are_shown_under_it():
    chat = Chat()
    chat.user("fix it", cwd="/work")
    chat.bash("cd pay && ls", "sign.py")
    chat.tool("Edit", {"file_path": "/work/pay/sign.py", "old_string": "a", "new_string": "b"}, "ok")
    events = derive_events(chat.messages)
    assert [e.cwd for e in events if isinstance(e, EnvironmentChanged) and e.cwd] == ["/work", "/work/pay"]
    snap = reduce(events)
    assert "sign.py" in str(snap.sections["repository"]["changed_files"].value)


def test_an_mcp_shell_s_cd_moves_nothing():
    chat = Chat()
    chat.user("fix it", cwd="/work")
    chat.tool("mcp__box__bash", {"command": "cd /etc"}, "")
    assert [e.cwd for e in derive_events(chat.messages) if isinstance(e, EnvironmentChanged) and e.cwd] == ["/work"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["/a", "/work/x", "/"]), st.sampled_from(["b", "../c", "./d/e", "/abs/p", "'q r'", '"s"']),
       st.sampled_from(["", " && ls", "; make", " | cat"]))
def test_cd_directory_is_the_target_made_absolute(cwd, target, tail):
    import posixpath
    got = cd_directory(f"cd {target}{tail}", cwd)
    if tail == " | cat":
        assert got is None  # `cd x | cat` runs in a subshell: it moves nothing
    else:
        assert got == posixpath.normpath(posixpath.join(cwd, target.strip("'\"")))
    assert cd_directory(f"cd {target}", None) == (posixpath.normpath(target) if target.startswith("/") else None)


@given(st.sampled_from(["~", "~/x", "$HOME", "-", "${D}"]), st.one_of(st.none(), st.just("/w")))
def test_cd_to_a_place_the_text_does_not_name_is_unknown(target, cwd):
    assert cd_directory(f"cd {target}", cwd) is None


@given(st.text(max_size=12))
def test_stamp_date_is_a_day_or_none(stamp):
    day = stamp_date(stamp)
    assert day is None or (day == stamp[:10] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", day))
    assert stamp_date("2026-12-07T11:00:00Z") == "2026-12-07" and stamp_date(None) is None


# ------------------------------------------------------------------------------ one reading

def _session_events(messages: list[Message]) -> list:
    """The events a session's bar reads: the ledger's progress reader's reading of each message."""
    reader, derived = ProgressReader(), DerivedStatus()
    out = []
    for i, m in enumerate(messages):
        out += derived.deriver.derive(m, reader.read(m, i))
    return out


_STEPS = st.lists(st.sampled_from([
    ("user", "fix the signature check"), ("user", "<task-notification>done</task-notification>"),
    ("user", "[Request interrupted by user]"), ("user", "now run the tests"),
    ("bash", "cd /work/pay && pytest", "1 failed, 3 passed in 0.2s"), ("bash", "git status", "On branch main\nnothing to commit, working tree clean"),
    ("bash", "cd sub", ""), ("tool", "Grep", {"pattern": "sig"}, "Found 1 file\npay/sign.py"),
    ("tool", "Edit", {"file_path": "/work/pay/sign.py", "old_string": "a", "new_string": "b"}, "ok"),
    ("tool", "TodoWrite", {"todos": [{"content": "fix", "status": "in_progress"}]}, "ok"),
    ("tool", "ExitPlanMode", {"plan": "1."}, "approved"), ("tool", "mcp__x__ExitPlanMode", {}, "approved"),
    ("assistant", "done"),
]), max_size=14)


def _chat(steps) -> list[Message]:
    chat = Chat()
    for n, step in enumerate(steps):
        meta = {"cwd": "/work", "timestamp": f"2026-12-{1 + n % 3:02d}T10:00:00Z"}
        if step[0] == "user":
            chat.user(step[1], **meta)
        elif step[0] == "assistant":
            chat.assistant(step[1], **meta)
        elif step[0] == "bash":
            chat.bash(step[1], step[2], **meta)
        else:
            chat.tool(step[1], step[2], step[3], **meta)
    return chat.messages


@settings(max_examples=60, deadline=None)
@given(_STEPS)
def test_the_bar_reads_the_same_with_the_ledger_s_reading_or_its_own(steps):
    """A session's bar takes each result as the ledger's progress reader read it; a saved transcript's
    is read by the bar's own reader: the events are the same."""
    messages = _chat(steps)
    assert _session_events(messages) == derive_events(messages)


@settings(max_examples=60, deadline=None)
@given(_STEPS)
def test_each_block_is_observed_once_in_order(steps):
    """The reader's observations carry every call and result of a conversation message, in block order."""
    messages = _chat(steps)
    reader = StatusReader()
    for m in messages:
        seen = reader.read(m)
        ids = [b.call_id for b in seen.blocks]
        assert ids == [getattr(b, "id", None) or getattr(b, "call_id") for b in m.blocks
                       if type(b).__name__ in ("ToolCall", "ToolResult")]
        assert all(isinstance(b, (CallSeen, ResultSeen)) for b in seen.blocks)


def test_own_messages_are_not_observed():
    reader = StatusReader()
    seen = reader.read(Message("s1", "user", (Text("<agent-status/>"),), Origin.STATUS, {"cwd": "/x"}))
    assert not seen.conversation and seen.cwd is None and seen.blocks == ()


# ------------------------------------------------------------------------------ summary goal

def test_the_goal_behind_a_compaction_is_the_request_its_summary_quotes():
    cc = Message("s", "user", (Text("This session is being continued.\n1. Primary Request and Intent:\n"
                                    "   - Fix the signature check\n2. Key Technical Concepts:\n"),),
                 meta={"is_compact_summary": True})
    assert summary_request(cc.text) == "Fix the signature check"
    goals = [e.goal for e in derive_events([cc]) if isinstance(e, TaskUpdated) and e.goal]
    assert goals == ["Fix the signature check"]
    assert summary_request("no summary here") is None


# ------------------------------------------------------------------------------ no parsing in status/

# The old control-character pattern, kept here as the specification of what bar_text drops.
_OLD_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60),
       st.integers(min_value=2, max_value=80))
def test_bar_text_drops_what_the_pattern_did(text, limit):
    spec = " ".join(_OLD_CONTROL.sub("", text).split())
    spec = spec if len(spec) <= limit else spec[: limit - 1] + "…"
    assert bar_text(text, limit) == spec


@given(st.text(alphabet="abcxyz019_.-A \n", max_size=40))
def test_runner_names_are_the_safe_alphabet(name):
    assert is_runner_name(name) == bool(re.fullmatch(r"[a-z][a-z0-9_.-]{0,31}", name))


def test_a_runner_name_with_a_trailing_newline_is_refused():
    """The old pattern's `$` let `pytest\\n` through into an attribute name."""
    try:
        VerificationFinished(source="harness", runner="pytest\n")
    except StatusEventError:
        return
    raise AssertionError("accepted a runner name ending in a newline")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def test_status_modules_import_no_facts_and_no_re():
    for path in sorted((REPO / "pipeline" / "status").glob("*.py")):
        names = _imports(path)
        assert not {n for n in names if n in ("re", "re2") or n.startswith(("..facts", "worksurface.facts"))}, path


def test_summarizers_import_no_facts():
    for path in sorted((REPO / "pipeline" / "summarizers").glob("*.py")):
        names = _imports(path)
        assert not {n for n in names if n.startswith(("..facts", "worksurface.facts")) or n == "...facts"}, path


def test_the_contract_forbids_facts_to_status_and_summarizers():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["id"] == "status-summarizers-read-the-ledger")
    assert contract["type"] == "forbidden"
    assert set(contract["source_modules"]) == {"worksurface.status", "worksurface.summarizers"}
    assert contract["forbidden_modules"] == ["worksurface.facts"]


# ------------------------------------------------------------------------------ the user's requests

def _goal_and_request(messages: list[Message]) -> tuple[str | None, str | None]:
    task = reduce(derive_events(messages)).sections.get("task", {})
    return tuple(task[k].value if k in task else None for k in ("goal", "request"))  # type: ignore[return-value]


def test_a_request_after_a_hook_reminder_is_the_user_s():
    """The ledger reads a user turn without its `<system-reminder>` blocks; before, the bar took the
    reminder's `<` for a harness note and lost the request."""
    chat = Chat()
    chat.user("<system-reminder>a hook's note</system-reminder>\nFix the signature check")
    assert _goal_and_request(chat.messages)[0] == "Fix the signature check"


def test_harness_notes_in_the_user_role_are_not_requests():
    """A local command's caveat and a harness's tool output are not the user's words (the ledger's
    test); before, the caveat became the session's goal."""
    chat = Chat()
    chat.user("Caveat: The messages below were generated by the user while running local commands. DO NOT respond")
    chat.user("aider ran the tests", kind="tool_output")
    chat.user("Fix the signature check")
    chat.user("<task-notification>job done</task-notification>")
    assert _goal_and_request(chat.messages) == ("Fix the signature check", None)
