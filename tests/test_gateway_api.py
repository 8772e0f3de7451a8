"""The gateway with the official SDKs against the loopback fakes: each API is prepared, reduced, paired
and cache-stable; conversations are recognised and kept apart; the gateway's own endpoints."""

from __future__ import annotations

import json
import os
import random
import stat
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from fake_anthropic import Answer, FakeAnthropic, LoggedRequest, tool_use
from fake_chat import ChatReply, FakeChat
from fake_responses import FakeResponses, Reply, Steps, function_call, message
from gateway_helpers import running_gateway

WINDOW = {"window": 6000}
SYSTEM = [{"type": "text", "text": "You are a careful coding agent. " * 40, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]


# English-like words: the fakes estimate tokens as characters / 4, about what worksurface counts for
# such text (digit runs would count several times more, as if the provider measured less than it).
WORDS = "the module reads its input parses every record and returns what the caller asked for".split()


def file_text(turn: int, lines: int = 60) -> str:
    rnd = random.Random(turn)
    return "\n".join(f"line {i} of file {turn}: " + " ".join(rnd.choice(WORDS) for _ in range(12)) for i in range(lines))


def reader(every: int = 4) -> Any:
    """A model that reads a file per turn and says something every `every` turns."""
    def script(body: dict[str, Any], n: int) -> Answer:
        if n % every == every - 1:
            return Answer([{"type": "text", "text": f"Step {n} done."}])
        return tool_use("Read", {"file_path": f"src/m{n}.py"}, f"toolu_{n:04d}")
    return script


def run_anthropic_session(client: anthropic.Anthropic, turns: int, stream: bool,
                          extra: dict[str, Any] | None = None) -> list[Any]:
    """A Claude Code-shaped loop: the full history every call, one breakpoint on the last message."""
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Refactor the repo."}]}]
    answers = []
    for turn in range(turns):
        for m in history:
            for b in m["content"]:
                b.pop("cache_control", None)
        history[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        kwargs: dict[str, Any] = dict(model="claude-test", max_tokens=256, system=SYSTEM, tools=TOOLS,
                                      messages=history, **(extra or {}))
        if stream:
            with client.messages.stream(**kwargs) as s:
                reply = s.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        answers.append(reply)
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        calls = [b for b in reply.content if b.type == "tool_use"]
        if calls:
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": file_text(turn)} for c in calls]})
        else:
            history.append({"role": "user", "content": [{"type": "text", "text": f"Continue with step {turn + 1}."}]})
    return answers


def assert_paired(body: dict[str, Any]) -> None:
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    for i, m in enumerate(messages):
        content = m["content"] if isinstance(m["content"], list) else []
        calls = {b["id"] for b in content if b.get("type") == "tool_use"}
        if calls and i + 1 < len(messages):
            nxt = messages[i + 1]["content"]
            answered = {b.get("tool_use_id") for b in nxt if isinstance(b, dict)} if isinstance(nxt, list) else set()
            assert calls <= answered, f"message {i}: unanswered {calls - answered}"
        results = {b["tool_use_id"] for b in content if b.get("type") == "tool_result"}
        if results:
            prev = messages[i - 1]["content"] if i else []
            made = {b.get("id") for b in prev if isinstance(b, dict)} if isinstance(prev, list) else set()
            assert results <= made, f"message {i}: results without calls {results - made}"


def breakpoints(body: dict[str, Any]) -> int:
    count = sum(1 for b in body.get("system") or [] if isinstance(b, dict) and b.get("cache_control"))
    for m in body["messages"]:
        if isinstance(m["content"], list):
            count += sum(1 for b in m["content"] if b.get("cache_control"))
    return count


def cached_share(requests: list[LoggedRequest]) -> float:
    total = sum(r.usage["input_tokens"] + r.usage["cache_read_input_tokens"] + r.usage["cache_creation_input_tokens"]
                for r in requests)
    return sum(r.usage["cache_read_input_tokens"] for r in requests) / total


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_anthropic_session_is_reduced_paired_and_cache_stable(tmp_path: Path, stream: bool) -> None:
    with FakeAnthropic(cache=True, script=reader()) as fake, running_gateway(tmp_path, fake.url, session=WINDOW) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="sk-ant-test", max_retries=0)
        answers = run_anthropic_session(client, 36, stream)
        sessions = gw.sessions()
    sent = fake.messages()
    assert len(sent) == 36 and len(sessions) == 1 and sessions[0]["calls"] == 36
    assert all(a.content for a in answers)
    client_sizes = [len(json.dumps(r.body["messages"])) for r in sent]
    for r in sent:
        assert_paired(r.body)
        assert 1 <= breakpoints(r.body) <= 4
        last = r.body["messages"][-1]["content"]
        assert any(b.get("cache_control") == {"type": "ephemeral"} for b in last), "the client's breakpoint stays"
        assert "sk-ant-test" in json.dumps(r.headers)  # the provider key is forwarded
    # Compaction happened: a later request is smaller than an earlier one and carries the summary.
    assert any(b < a for a, b in zip(client_sizes, client_sizes[1:]))
    assert any("<summary" in json.dumps(r.body["messages"]) or "Summary" in json.dumps(r.body["messages"]) for r in sent[-5:])
    assert cached_share(sent) > 0.6, cached_share(sent)
    print(f"\nanthropic {'stream' if stream else 'whole'}: sizes {client_sizes[0]}..{max(client_sizes)} -> "
          f"{client_sizes[-1]} bytes, cached share {cached_share(sent):.2f}")


def test_quiet_calls_forward_a_byte_identical_prefix(tmp_path: Path) -> None:
    with FakeAnthropic(cache=True, script=reader(every=100)) as fake, running_gateway(tmp_path, fake.url) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
        run_anthropic_session(client, 8, stream=True)
    sent = [r.body["messages"] for r in fake.messages()]
    for before, after in zip(sent, sent[1:]):
        strip = lambda ms: json.dumps([{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"}
                                                         for b in m["content"]]} for m in ms])
        assert strip(after[:len(before)]).startswith(strip(before)[:-1])


def test_conversations_are_recognised_and_never_mixed(tmp_path: Path) -> None:
    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url) as gw:
        def call(first: str, *, more: int = 0, user_id: str | None = None, header: str | None = None) -> httpx.Response:
            messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
            for k in range(more):
                messages += [{"role": "assistant", "content": f"answer {k}"}, {"role": "user", "content": f"more {k}"}]
            body: dict[str, Any] = {"model": "m", "max_tokens": 10, "system": "sys", "messages": messages}
            if user_id:
                body["metadata"] = {"user_id": json.dumps({"device_id": "d", "session_id": user_id})}
            headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
            if header:
                headers["x-worksurface-session"] = header
            return httpx.post(f"{gw.url}/v1/messages", json=body, headers=headers, timeout=30)

        a1, a2 = call("task A"), call("task A", more=2)
        b = call("task B")
        c1, c2 = call("task A", user_id="cc-1"), call("task A", user_id="cc-2")
        h1, h2 = call("task A", header="mine"), call("something else", header="mine")
        ids = [r.headers["x-worksurface-session"] for r in (a1, a2, b, c1, c2, h1, h2)]
        assert all(r.headers["x-worksurface"] == "prepared" for r in (a1, a2, b, c1, c2, h1))
        assert ids[0] == ids[1] and len({ids[0], ids[2], ids[3], ids[4], ids[5]}) == 5 and ids[5] == ids[6] == "s-mine"
        listed = {s["id"]: s for s in gw.sessions()}
        assert listed[ids[0]]["calls"] == 2 and listed[ids[3]]["source"] == "harness+prefix"

        detail = httpx.get(f"{gw.url}/sessions/{ids[0]}", timeout=10).json()
        assert "<agent-status" in (detail["status"] or "") and detail["ledger"] and detail["last_report"]
        assert httpx.delete(f"{gw.url}/sessions/{ids[2]}", timeout=10).json()["deleted"] is True
        assert ids[2] not in {s["id"] for s in gw.sessions()}
        assert httpx.get(f"{gw.url}/sessions/{ids[2]}", timeout=10).status_code == 404
        assert httpx.get(f"{gw.url}/sessions/../etc", timeout=10).status_code in (400, 404)
    root = tmp_path
    assert stat.S_IMODE(os.stat(root / ids[0]).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(root / ids[0] / "gateway.json").st_mode) == 0o600


def test_openai_chat_stream_is_prepared_and_paired(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply("done") if n % 5 == 4 else ChatReply(tool=("read_file", {"path": f"f{n}.py"}, f"call_{n}"))
    with FakeChat(script) as fake, running_gateway(tmp_path, fake.url, session=WINDOW) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-openai-test", max_retries=0)
        history: list[dict[str, Any]] = [{"role": "system", "content": "You code."}, {"role": "user", "content": "Go."}]
        for turn in range(30):
            stream = client.chat.completions.create(model="gpt-test", messages=history, stream=True,
                                                    stream_options={"include_usage": True},
                                                    tools=[{"type": "function", "function": {"name": "read_file",
                                                                                             "parameters": {"type": "object"}}}])
            text, calls = "", []
            for chunk in stream:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    calls += [c.model_dump(exclude_none=True) for c in choice.delta.tool_calls or []]
            if calls:
                history.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": c["id"], "type": "function", "function": c["function"]} for c in calls]})
                history += [{"role": "tool", "tool_call_id": c["id"], "content": file_text(turn)} for c in calls]
            else:
                history += [{"role": "assistant", "content": text}, {"role": "user", "content": "next"}]
        sessions = gw.sessions()
    assert len(sessions) == 1 and sessions[0]["api"] == "openai-chat"
    sizes = [len(json.dumps(r["messages"])) for r in fake.requests]
    assert sizes[-1] < len(json.dumps(history)) / 2, "the forwarded view is reduced"
    for r in fake.requests:
        calls = {c["id"] for m in r["messages"] for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in r["messages"] if m["role"] == "tool"}
        assert results <= calls and calls - results <= {c["id"] for c in r["messages"][-1].get("tool_calls") or []}
    share = sum(u["cached"] for u in fake.usages) / sum(u["prompt"] for u in fake.usages)
    assert share > 0.5, share
    print(f"\nopenai chat: {sizes[0]}..{max(sizes)} -> {sizes[-1]} bytes (client {len(json.dumps(history))}), cached {share:.2f}")


@pytest.mark.slow
def test_responses_full_input_is_prepared_and_server_side_state_passes_through(tmp_path: Path) -> None:
    steps = Steps([Reply([function_call("shell", {"command": ["cat", f"f{n}"]}, f"c{n}")]) for n in range(24)])
    with FakeResponses(steps, measure=True) as fake, running_gateway(tmp_path, fake.base_url, session=WINDOW) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-openai-test", max_retries=0)
        items: list[Any] = [{"role": "user", "content": "Fix the bug."}]
        for turn in range(24):
            with client.responses.stream(model="gpt-5.5", instructions="You are Codex.", input=items) as s:
                final = s.get_final_response()
            for out in final.output:
                items.append(out.model_dump(exclude_none=True))
                if out.type == "function_call":
                    items.append({"type": "function_call_output", "call_id": out.call_id, "output": file_text(turn)})
        chained = httpx.post(f"{gw.url}/v1/responses", json={"model": "gpt-5.5", "previous_response_id": "resp_1",
                                                               "input": [{"role": "user", "content": "and?"}]},
                             headers={"authorization": "Bearer sk-openai-test"}, timeout=30)
    assert chained.headers["x-worksurface"] == "passthrough; reason=previous_response_id"
    assert fake.requests[-1].body["previous_response_id"] == "resp_1"
    sent = [r.body for r in fake.requests[:-1]]
    assert all(b["instructions"] == "You are Codex." for b in sent)
    assert len(json.dumps(sent[-1]["input"])) < len(json.dumps(items)) / 2
    for body in sent:
        calls = {i["call_id"] for i in body["input"] if i.get("type") == "function_call"}
        outputs = {i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"}
        assert outputs <= calls
    assert sum(fake.cached) > 0


def test_unreadable_requests_are_forwarded_unchanged_and_the_token_is_checked(tmp_path: Path) -> None:
    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url, token="gw-secret") as gw:
        headers = {"x-api-key": "k", "x-worksurface-token": "gw-secret"}
        assert httpx.get(f"{gw.url}/sessions", timeout=10).status_code == 401
        assert httpx.post(f"{gw.url}/v1/messages", json={"messages": []}, timeout=10).status_code == 401
        broken = b'{"model": "m", "messages": [{"role": "user", "content": 5}]}'
        r = httpx.post(f"{gw.url}/v1/messages", content=broken, headers=headers, timeout=10)
        assert r.status_code == 200 and r.headers["x-worksurface"] == "unparsed"
        assert fake.requests[-1].body == json.loads(broken)
        assert "x-worksurface-token" not in {k.lower() for k in fake.requests[-1].headers}
        metrics = httpx.get(f"{gw.url}/metrics", headers=headers, timeout=10).text
        assert 'worksurface_gateway_requests_total{api="anthropic",outcome="unparsed"} 1.0' in metrics


def test_count_tokens_counts_what_would_be_sent(tmp_path: Path) -> None:
    with FakeAnthropic(script=reader(every=100)) as fake, running_gateway(tmp_path, fake.url, session=WINDOW) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
        run_anthropic_session(client, 12, stream=False)
        history = fake.messages()[-1].body
        counted = client.messages.count_tokens(model="m", system=SYSTEM, tools=TOOLS, messages=history["messages"])
    assert counted.input_tokens > 0
    assert fake.requests[-1].path.endswith("/count_tokens")
