"""Real clients through the gateway against the loopback fakes: Claude Code (ANTHROPIC_BASE_URL at the
gateway), Codex CLI (a model_provider pointing at it) and LangChain's ChatAnthropic / ChatOpenAI. Each
runs a multi-turn session that crosses worksurface's compaction threshold (a small window): the
requests reaching the upstream are reduced, paired and cache-stable, and the client never compacts
on its own. The request logs (sizes before and after, cached share) are printed."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import Answer, FakeAnthropic, tool_use
from fake_chat import CHARS_PER_TOKEN, ChatReply, FakeChat, prompt_text
from fake_responses import (FakeResponses, Recorded, Reply, find_codex, function_call, message, rollouts,
                            write_codex_config)
from gateway_helpers import running_gateway
from test_client_codex import run_codex
from test_gateway_api import assert_paired, cached_share, file_text
from worksurface.core.view import pairing_problems
from worksurface.formats import read_transcript

CLIENTS = Path(os.environ.get("WORKSURFACE_CLIENTS", Path.home() / ".cache" / "worksurface" / "clients"))
CLAUDE = CLIENTS / "claude-code" / "node_modules" / ".bin" / "claude"
DEAD_PROXY = "http://127.0.0.1:9"
CLIENT_TIMEOUT = 180
README_GATEWAY = "http://127.0.0.1:8788"     # where README.md says `worksurface serve` listens


def _log(name: str, sizes: list[int], share: float, kinds: list[str]) -> None:
    print(f"\n{name}: {len(sizes)} requests; forwarded bytes first {sizes[0]}, max {max(sizes)}, last {sizes[-1]}; "
          f"cached share {share:.2f}; kinds {sorted(set(kinds))}")


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.skipif(not CLAUDE.exists(), reason=f"Claude Code is not installed at {CLAUDE}")
def test_claude_code_through_the_gateway(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for n in range(40):
        (work / f"m{n}.txt").write_text(file_text(n, 200), encoding="utf-8")

    def script(body: dict[str, Any], n: int) -> Answer:
        if not body.get("tools"):                     # Claude Code's side requests (titles ...)
            return Answer([{"type": "text", "text": "Title"}])
        last = body["messages"][-1]
        fresh = isinstance(last.get("content"), list) and any(
            b.get("type") == "text" and "WSGW" in b.get("text", "") for b in last["content"])
        reads = sum(1 for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])
                    if b.get("type") == "tool_use")
        if not fresh and reads % 8 == 7:
            return Answer([{"type": "text", "text": f"Read {reads + 1} files."}])
        return tool_use("Read", {"file_path": str(work / f"m{reads % 40}.txt")}, f"toolu_{uuid.uuid4().hex[:12]}")

    session_id = str(uuid.uuid4())
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-ant-cc",
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "HTTPS_PROXY": DEAD_PROXY, "HTTP_PROXY": DEAD_PROXY,
           "NO_PROXY": "127.0.0.1,localhost"}
    # A window the four turns pass the threshold of (27,000 - 2,700 - 1,755 = 22,545 tokens as the fake
    # measures, Claude Code's ~7.5k of system prompt and tools included): with those fixed tokens a
    # post-compact target of 20% leaves the text less than its floor, so worksurface never compacts
    # early and must at the threshold.
    with FakeAnthropic(cache=True, script=script) as fake, \
            running_gateway(tmp_path / "store", fake.url, session={"window": 27000}) as gw:
        env["ANTHROPIC_BASE_URL"] = gw.url
        for turn in range(4):
            args = ["--session-id", session_id] if turn == 0 else ["--resume", session_id]
            done = subprocess.run([str(CLAUDE), "-p", f"WSGW turn {turn}: read the files.", *args,
                                   "--allowedTools", "Read"], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=CLIENT_TIMEOUT)
            assert done.returncode == 0, done.stderr[-2000:]
        sessions = gw.sessions()
    main = [r for r in fake.messages() if r.body.get("tools")]
    assert len(main) >= 24
    assert all(r.kind != "summarize" for r in fake.messages()), "Claude Code never compacted on its own"
    sizes = [len(json.dumps(r.body["messages"])) for r in main]
    assert any(b < a * 0.8 for a, b in zip(sizes, sizes[1:])), "worksurface compacted the view"
    for r in main:
        assert_paired(r.body)
    share = cached_share(main)
    assert share > 0.5, share
    assert any(s["source"] == "harness+prefix" for s in sessions)
    _log("claude code", sizes, share, [r.kind for r in fake.messages()])
    # Claude Code's own session file holds the whole conversation, valid, with no compaction.
    files = list((tmp_path / ".claude" / "projects").rglob(f"{session_id}.jsonl"))
    assert files, "Claude Code wrote its session file"
    transcript = read_transcript(files[0])
    assert not pairing_problems(transcript.messages)
    assert not any(m.meta.get("compact_boundary") for m in transcript.messages)
    assert sum(1 for m in transcript.messages for _ in m.tool_results) >= 24


@pytest.mark.slow
def test_langchain_chat_models_through_the_gateway(tmp_path: Path) -> None:
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    def anthropic_script(body: dict[str, Any], n: int) -> Answer:
        return Answer([{"type": "text", "text": "ok"}]) if n % 5 == 4 else tool_use("read", {"path": f"f{n}"}, f"t{n}")

    def chat_script(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply("ok") if n % 5 == 4 else ChatReply(tool=("read", {"path": f"f{n}"}, f"c{n}"))

    tool = {"name": "read", "description": "read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    with FakeAnthropic(cache=True, script=anthropic_script) as fa, FakeChat(chat_script) as fc, \
            running_gateway(tmp_path, fa.url, session={"window": 6000}, openai_upstream=fc.url) as gw:
        gw.gateway.config = gw.gateway.config.model_copy(update={"upstream": None, "anthropic_upstream": fa.url})
        models = [langchain_anthropic.ChatAnthropic(model="claude-test", base_url=gw.url, api_key="sk-ant-lc",
                                                    max_retries=0).bind_tools([tool]),
                  langchain_openai.ChatOpenAI(model="gpt-test", base_url=f"{gw.url}/v1", api_key="sk-lc",
                                              max_retries=0).bind_tools([tool])]
        for model in models:
            history: list[Any] = [SystemMessage("You read files."), HumanMessage("Read them all.")]
            for turn in range(30):
                reply = model.invoke(history)
                history.append(reply)
                if isinstance(reply, AIMessage) and reply.tool_calls:
                    history += [ToolMessage(file_text(turn), tool_call_id=c["id"]) for c in reply.tool_calls]
                else:
                    history.append(HumanMessage(f"next {turn}"))
        sessions = gw.sessions()
    assert {s["api"] for s in sessions} == {"anthropic", "openai-chat"}
    a_sizes = [len(json.dumps(r.body["messages"])) for r in fa.messages()]
    c_sizes = [len(json.dumps(r["messages"])) for r in fc.requests]
    for r in fa.messages():
        assert_paired(r.body)
    assert any(b < a * 0.8 for a, b in zip(a_sizes, a_sizes[1:])) and c_sizes[-1] < max(c_sizes)
    # ChatAnthropic sets no cache breakpoint, so nothing is cached: the prefix is stable all the same.
    bodies = [r.body["messages"] for r in fa.messages()]
    stable = sum(1 for a, b in zip(bodies, bodies[1:]) if b[:len(a) - 1] == a[:-1]) / (len(bodies) - 1)
    assert stable > 0.7, stable
    _log("langchain ChatAnthropic", a_sizes, stable, ["message (share: calls extending the previous prefix)"])
    _log("langchain ChatOpenAI", c_sizes, sum(u["cached"] for u in fc.usages) / sum(u["prompt"] for u in fc.usages),
         ["message"])


CODEX = find_codex()
CODEX_TURNS = 4
READS_PER_TURN = 6


def readme_codex_provider() -> str:
    """The provider table README.md's Codex lines append to ~/.codex/config.toml (so they are tested)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    found = re.search(r"printf '([^']*)' >> ~/\.codex/config\.toml", readme)
    assert found, "README.md shows the lines that point Codex at the gateway"
    table = found.group(1).encode().decode("unicode_escape")
    assert README_GATEWAY in table
    return table


@pytest.mark.client
@pytest.mark.slow
@pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed: run .ci/install-codex.sh")
def test_codex_through_the_gateway(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex CLI with a model_provider at the gateway, four `codex exec` turns (the last three resuming
    the session), each reading six files: worksurface compacts the view in front of the fake Responses
    API, so Codex (whose own limit the whole history would cross) never compacts; its rollout holds
    the whole conversation and resumes."""
    home = tmp_path / "home"
    work = home / "work"
    work.mkdir(parents=True)
    for n in range(CODEX_TURNS * READS_PER_TURN):
        (work / f"m{n}.txt").write_text(file_text(n, 200), encoding="utf-8")
    reads = [0]
    in_turn = [0]
    turn_seen = [-1]

    def script(body: dict[str, Any], seen: list[Recorded]) -> Reply:
        asked = [int(t) for t in re.findall(r"WSGW turn (\d+)", json.dumps(body.get("input")))]
        if max(asked, default=-1) > turn_seen[0]:
            turn_seen[0], in_turn[0] = max(asked), 0
        if in_turn[0] == READS_PER_TURN:
            return Reply([message(f"Read {reads[0]} files.", f"msg_done_{len(seen)}")])
        in_turn[0] += 1
        reads[0] += 1
        return Reply([function_call("exec_command", {"cmd": f"cat m{reads[0] - 1}.txt", "yield_time_ms": 5000},
                                    f"call_{uuid.uuid4().hex[:10]}")])

    caplog.set_level(logging.INFO, logger="worksurface.gateway")
    # An in-process CLI run earlier in the suite stops the package logger's propagation to the root.
    monkeypatch.setattr(logging.getLogger("worksurface"), "propagate", True)
    with FakeResponses(script, measure=True) as fake, \
            running_gateway(tmp_path / "store", fake.base_url, session={"window": 40000}) as gw:
        # Past this many tokens Codex compacts on its own: the whole history (about 100k) crosses it,
        # the views worksurface forwards (under its 33k threshold) never do. Codex reaches the gateway
        # through the provider README.md tells users to add, chosen as README says (-c model_provider).
        write_codex_config(home, f"{gw.url}/v1", extra="model_auto_compact_token_limit = 60000",
                           tables=readme_codex_provider().replace(README_GATEWAY, gw.url))
        session_id = ""
        for turn in range(CODEX_TURNS):
            args = [f"WSGW turn {turn}: read the next files."]
            if turn:
                args = ["resume", session_id, *args]
            done = run_codex(home, ["-c", "model_provider=worksurface", *args])
            assert f"Read {(turn + 1) * READS_PER_TURN} files." in done.stdout
            if not turn:
                session_id = json.loads(rollouts(home)[0].read_text(encoding="utf-8").split("\n", 1)[0])["payload"]["id"]
        sessions = gw.sessions()
    turns = [r for r in fake.requests if r.kind == "turn"]
    assert fake.kinds() == ["turn"] * len(turns), "Codex never compacted on its own"
    assert len(turns) == CODEX_TURNS * (READS_PER_TURN + 1)
    # Each record once (a handler the CLI left on the package logger can hand caplog a record twice).
    records = list({(r.created, r.getMessage(), repr(getattr(r, "fields", None))): r for r in caplog.records}.values())
    forwarded = [r.fields for r in records if r.getMessage() == "forwarded" and hasattr(r, "fields")]
    assert len(forwarded) == len(turns) and all(f["outcome"] == "prepared" for f in forwarded)
    assert max(f["tokens_in"] for f in forwarded) > 60000 > max(f["tokens_out"] for f in forwarded)
    # Reduced (tool results budgeted and cleared; a compaction only where it pays, which on these
    # uniform reads it need not): what Codex sends keeps growing, what the provider gets does not.
    last = forwarded[-1]
    assert last["tokens_out"] < last["tokens_in"] / 3, last
    sizes = [len(json.dumps(r.body["input"])) for r in turns]
    for r in turns:
        items = r.body["input"]
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert set(outputs) <= set(calls) and set(calls) - set(outputs) <= {calls[-1]} if calls else not outputs
        assert r.body["tools"] == turns[0].body["tools"], "Codex's tools are forwarded as sent"
    totals = [len(json.dumps(r.body.get("instructions")) + prompt_text(r.body)) // CHARS_PER_TOKEN for r in turns]
    share = sum(fake.cached) / sum(totals)
    assert share > 0.5, share
    assert [s["source"] for s in sessions] == ["harness+prefix"]
    print(f"\ncodex: {len(turns)} requests; tokens sent by Codex {forwarded[0]['tokens_in']}..{forwarded[-1]['tokens_in']}, "
          f"forwarded {forwarded[0]['tokens_out']}..max {max(f['tokens_out'] for f in forwarded)}, last "
          f"{forwarded[-1]['tokens_out']}; forwarded bytes first {sizes[0]}, max {max(sizes)}, last {sizes[-1]}; "
          f"cached share {share:.2f}")
    # Codex's rollout holds the whole conversation, paired, with no compaction of its own.
    transcript = read_transcript(rollouts(home)[0])
    assert not pairing_problems(transcript.messages)
    assert not any(m.meta.get("compact_boundary") for m in transcript.messages)
    assert sum(1 for m in transcript.messages for _ in m.tool_results) == CODEX_TURNS * READS_PER_TURN

