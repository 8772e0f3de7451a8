"""The ingest stage: a new tool result is reduced before it is first sent; a sent one never is."""

from __future__ import annotations

from typing import Any

from builders import Convo, words
from worksurface.core.config import Config
from worksurface.core.model import Message
from worksurface.engine.pricing import unsent_ids
from worksurface.engine.state import Artifact, StageContext
from worksurface.stages import ingest
from worksurface.core.tokens import TokenCounter

BAR = "".join(f"\r{p:3d}%|{'█' * (p // 10):<10}| {p}/100" for p in range(0, 101, 10))  # one line, redrawn
NOISY = "\n".join(["\x1b[32mPASS\x1b[0m tests/test_a.py", BAR]
                  + [f"\x1b[2K{p:3d}%|{'█' * (p // 10):<10}| {p}/100" for p in range(0, 101, 5)]
                  + ["Retrying connection..."] * 40 + ["FAILED tests/test_b.py::test_total - assert 3 == 4",
                                                      "1 failed, 41 passed in 2.31s"])
HUGE_LOG = "\n".join([f"[{i:05d}] step {i} ok" for i in range(3_000)][:1500]
                     + ["ERROR: migration 0042 failed: relation \"orders\" does not exist"]
                     + [f"[{i:05d}] step {i} ok" for i in range(1500, 3_000)])


class Sink:
    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def put_artifact(self, content: str, *, kind: str, meta: dict[str, Any] | None = None) -> Artifact:
        artifact_id = f"art{len(self.stored)}"
        self.stored[artifact_id] = content
        return Artifact(artifact_id, f"/tmp/artifacts/{artifact_id}.txt", len(content) // 4)


def _run(messages: list[Message], config: Config | None = None, unsent: frozenset[str] | None = None):
    config = config or Config()
    sink = Sink()
    ctx = StageContext(config=config, counter=TokenCounter(), artifacts=sink, now=0.0, idle_seconds=5.0,
                       transcript=tuple(messages), unsent_ids=unsent)
    state: Any = {"view": messages, "tokens": ctx.counter.messages(messages), "edits": [], "reports": [],
                  "cache_edits": [], "compacted": False}
    return ingest.run(state, config.ingest, ctx), sink


def _results(edits) -> dict[str, str]:
    return {e.call_id: e.content for e in edits}


def test_a_new_noisy_result_is_cleaned_and_keeps_its_failures():
    c = Convo().user("run the tests")
    call = c.tool("Bash", {"command": "pytest"}, NOISY)
    result, sink = _run(c.messages)
    text = _results(result.edits)[call]
    assert "\x1b" not in text and "\r" not in text
    lines = text.split("\n")
    assert lines.count("100%|██████████| 100/100") == 1 and not any(l.startswith(" 50%|") for l in lines)
    assert text.count("Retrying connection...") == 1 and "repeated 39 more times" in text
    assert "FAILED tests/test_b.py::test_total - assert 3 == 4" in text and "1 failed, 41 passed in 2.31s" in text
    assert not sink.stored  # nothing left out that only the original holds: no artifact needed
    assert result.report.tokens_after < result.report.tokens_before


def test_a_huge_log_keeps_head_tail_and_the_error_and_stores_the_whole():
    c = Convo().user("migrate")
    call = c.tool("Bash", {"command": "make migrate"}, HUGE_LOG)
    result, sink = _run(c.messages)
    edit = result.edits[0]
    assert edit.call_id == call and edit.artifact in sink.stored and sink.stored[edit.artifact] == HUGE_LOG
    text = edit.content
    assert text.startswith(f"[Output of Bash make migrate reduced on arrival (log): ")
    assert f"stored as artifact {edit.artifact} at /tmp/artifacts/{edit.artifact}.txt (open that file to read it)" in text
    assert "[00000] step 0 ok" in text and "[02999] step 2999 ok" in text
    assert 'ERROR: migration 0042 failed: relation "orders" does not exist' in text
    assert "[01499] step 1499 ok" in text  # the line before the error, for context
    assert edit.tokens_freed > 20_000


def test_a_result_already_sent_is_never_touched():
    c = Convo().user("run the tests")
    c.tool("Bash", {"command": "pytest"}, NOISY)
    c.say("one failure; fixing")
    new = c.tool("Bash", {"command": "pytest -x"}, NOISY + "\n")
    result, _ = _run(c.messages)
    assert set(_results(result.edits)) == {new}
    # The session's own record of what was sent wins over the transcript's shape.
    result, _ = _run(c.messages, unsent=frozenset())
    assert not result.edits and result.report.skipped


def test_file_reads_keep_their_content_and_small_gains_are_left_alone():
    blob = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk" * 6
    c = Convo().user("look")
    read = c.tool("Read", {"file_path": "/repo/fixture.json"}, f'{{"signature": "{blob}"}}\n' + words(500))
    small = c.tool("Bash", {"command": "ls"}, "\x1b[34mdir\x1b[0m  file.txt")
    result, _ = _run(c.messages, unsent=unsent_ids(c.messages) | {m.id for m in c.messages})
    assert read not in _results(result.edits) and small not in _results(result.edits)


def test_disabled_ingest_does_nothing():
    c = Convo().user("run")
    c.tool("Bash", {"command": "pytest"}, NOISY)
    result, _ = _run(c.messages, Config.from_mapping({"ingest": {"enabled": False}}))
    assert not result.edits and result.report.skipped == "disabled"
