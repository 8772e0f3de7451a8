"""Anthropic's context_management honoured by the gateway in front of an upstream that knows nothing of
it, and the fetch_artifact tool the gateway answers itself."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from fake_anthropic import Answer, FakeAnthropic, tool_use
from fake_chat import ChatReply, FakeChat
from fake_responses import FakeResponses, Reply, function_call, message
from gateway_helpers import running_gateway
from test_gateway_api import SYSTEM, TOOLS, file_text, reader

CLEAR = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 2000},
                    "keep": {"type": "tool_uses", "value": 2}}]}


def loop(client: anthropic.Anthropic, turns: int, extra: dict[str, Any], stream: bool = True) -> list[Any]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    replies = []
    for turn in range(turns):
        kwargs = dict(model="m", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=history,
                      betas=["context-management-2025-06-27"], **extra)
        if stream:
            with client.beta.messages.stream(**kwargs) as s:
                reply = s.get_final_message()
        else:
            reply = client.beta.messages.create(**kwargs)
        replies.append(reply)
        content = [b.model_dump(exclude_none=True) for b in reply.content]
        history.append({"role": "assistant", "content": content})
        calls = [b for b in reply.content if b.type == "tool_use"]
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id,
                                                      "content": file_text(turn, 20)} for c in calls]
                         or f"go on {turn}"})
    return replies


def test_clear_tool_uses_is_applied_and_reported(tmp_path: Path) -> None:
    with FakeAnthropic(script=reader(every=100)) as fake, running_gateway(tmp_path, fake.url) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
        replies = loop(client, 12, {"context_management": CLEAR})
        whole = loop(client, 1, {"context_management": CLEAR}, stream=False)
    assert all("context_management" not in r.body for r in fake.messages()), "not forwarded"
    applied = [r.context_management.model_dump() for r in replies]
    assert applied[0] == {"applied_edits": []}
    last = applied[-1]["applied_edits"]
    assert last and last[0]["type"] == "clear_tool_uses_20250919" and last[0]["cleared_tool_uses"] >= 5
    cleared = json.dumps(fake.messages()[-2].body["messages"])
    assert "cleared" in cleared
    assert whole[0].context_management is not None  # a whole body answers applied_edits too


@pytest.mark.parametrize("inputs", [True, ["Read"], ["Other"]], ids=["all", "named", "other-tool"])
def test_clear_tool_inputs_clears_the_inputs_of_cleared_calls(tmp_path: Path, inputs: Any) -> None:
    edit = {"edits": [{**CLEAR["edits"][0], "clear_tool_inputs": inputs}]}
    with FakeAnthropic(script=reader(every=100)) as fake, running_gateway(tmp_path, fake.url) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
        replies = loop(client, 12, {"context_management": edit})
    cleared_inputs = {True: True, "named": True, "other": False}[inputs if inputs is True else
                                                                 ("named" if inputs == ["Read"] else "other")]
    last = fake.messages()[-1].body["messages"]
    results = {b["tool_use_id"]: b for m in last if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"}
    uses = [b for m in last if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
    cleared = [u for u in uses if "line 0 of file" not in json.dumps(results[u["id"]]["content"])]
    kept = [u for u in uses if u not in cleared]
    assert len(cleared) >= 5 and kept, "results were cleared and the newest kept"
    assert all(u["input"] == ({} if cleared_inputs else {"file_path": u["input"].get("file_path")}) for u in cleared)
    assert all(u["input"]["file_path"] for u in kept), "the kept calls keep their inputs"
    if not cleared_inputs:
        assert all(u["input"]["file_path"] for u in cleared)
    # A call cleared once stays cleared on every later request (the same bytes are sent for it).
    for earlier in fake.messages()[-4:-1]:
        emptied = {b["id"] for m in earlier.body["messages"] if isinstance(m["content"], list) for b in m["content"]
                   if b.get("type") == "tool_use" and b["input"] == {}}
        assert emptied <= {u["id"] for u in uses if u["input"] == {}}
    applied = replies[-1].context_management.model_dump()["applied_edits"][0]
    assert applied["cleared_tool_uses"] == len(cleared)


def test_compact_answers_a_compaction_block_and_takes_it_back(tmp_path: Path) -> None:
    edits = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 3000},
                        "pause_after_compaction": True}]}
    with FakeAnthropic(script=reader(every=100)) as fake, running_gateway(tmp_path, fake.url) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
        history: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
        compacted = None
        for turn in range(30):
            reply = client.messages.create(model="m", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=history,
                                           extra_body={"context_management": edits})
            content = [b.model_dump(exclude_none=True) for b in reply.content]
            history.append({"role": "assistant", "content": content})
            if reply.stop_reason == "compaction":
                compacted = (turn, content)
                history.append({"role": "user", "content": "continue"})
                break
            calls = [b for b in reply.content if b.type == "tool_use"]
            history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id,
                                                          "content": file_text(turn, 20)} for c in calls]})
        assert compacted is not None, "the compaction trigger fired"
        assert compacted[1][0]["type"] == "compaction" and compacted[1][0]["content"]
        before = len(fake.messages())
        client.messages.create(model="m", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=history,
                               extra_body={"context_management": edits})
    sent = fake.messages()[before]
    assert '"compaction"' not in json.dumps(sent.body["messages"]), "the block is not sent upstream"
    assert compacted[1][0]["content"][:200] in json.dumps(sent.body["messages"]) or \
        len(json.dumps(sent.body["messages"])) < len(json.dumps(history)) / 2


def test_offer_fetch_answers_the_models_call_itself(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Answer:
        text = json.dumps(body["messages"])
        fetched = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
                   if b.get("type") == "tool_result" and str(b.get("tool_use_id", "")).startswith("fetch_")]
        if fetched:
            return Answer([{"type": "text", "text": "I read it back."}])
        found = re.search(r"artifact ([0-9a-f]{16})", text)
        if found and any(t["name"] == "fetch_artifact" for t in body.get("tools") or []):
            return tool_use("fetch_artifact", {"id": found.group(1)}, f"fetch_{n}")
        return tool_use("Read", {"file_path": f"f{n}"}, f"toolu_{n}")

    with FakeAnthropic(script=script) as fake, running_gateway(tmp_path, fake.url, session={"window": 6000},
                                                               offer_fetch=True) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
        history: list[dict[str, Any]] = [{"role": "user", "content": "Read."}]
        seen_fetch = False
        for turn in range(20):
            with client.messages.stream(model="m", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=history) as s:
                reply = s.get_final_message()
            assert all(b.name != "fetch_artifact" for b in reply.content if b.type == "tool_use")
            content = [b.model_dump(exclude_none=True) for b in reply.content]
            history.append({"role": "assistant", "content": content})
            if any(b.type == "text" and b.text == "I read it back." for b in reply.content):
                seen_fetch = True
                break
            calls = [b for b in reply.content if b.type == "tool_use"]
            history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id,
                                                          "content": file_text(turn, 150)} for c in calls]})
    assert seen_fetch, "the model's fetch was answered and it went on"
    results = [b for r in fake.messages() for m in r.body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result" and str(b.get("tool_use_id")).startswith("fetch_")]
    assert results, "the gateway sent the artifact back to the model"
    result = results[0]
    assert "line 0 of file" in result["content"], "the artifact's full content came back"


ARTIFACT = re.compile(r"artifact ([0-9a-f]{16})")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_offer_fetch_on_openai_chat(tmp_path: Path, stream: bool) -> None:
    def script(body: dict[str, Any], n: int) -> ChatReply:
        messages = body["messages"]
        if any(m["role"] == "tool" and m["tool_call_id"].startswith("fetch_") for m in messages):
            return ChatReply("I read it back.")
        found = ARTIFACT.search(json.dumps(messages))
        if found and any(t["function"]["name"] == "fetch_artifact" for t in body.get("tools") or []):
            return ChatReply(tool=("fetch_artifact", {"id": found.group(1)}, f"fetch_{n}"))
        return ChatReply(tool=("read_file", {"path": f"f{n}"}, f"call_{n}"))

    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    with FakeChat(script) as fake, running_gateway(tmp_path, fake.url, session={"window": 6000}, offer_fetch=True) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)
        history: list[dict[str, Any]] = [{"role": "system", "content": "You code."}, {"role": "user", "content": "Go."}]
        text = ""
        for turn in range(20):
            if stream:
                text, calls = "", []
                for chunk in client.chat.completions.create(model="m", messages=history, tools=tools, stream=True,
                                                            stream_options={"include_usage": True}):
                    for choice in chunk.choices:
                        text += choice.delta.content or ""
                        calls += [c.model_dump(exclude_none=True) for c in choice.delta.tool_calls or []]
            else:
                reply = client.chat.completions.create(model="m", messages=history, tools=tools).choices[0].message
                text = reply.content or ""
                calls = [c.model_dump(exclude_none=True) for c in reply.tool_calls or []]
            assert all(c["function"]["name"] != "fetch_artifact" for c in calls if c.get("function", {}).get("name"))
            if text == "I read it back.":
                break
            history.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": c["function"]} for c in calls]})
            history += [{"role": "tool", "tool_call_id": c["id"], "content": file_text(turn, 150)} for c in calls]
    assert text == "I read it back.", "the model's fetch was answered and it went on"
    assert all(t["function"]["name"] != "fetch_artifact" for m in history for t in m.get("tool_calls") or [])
    fetched = [m for r in fake.requests for m in r["messages"] if m["role"] == "tool" and m["tool_call_id"].startswith("fetch_")]
    assert fetched and "line 0 of file" in fetched[0]["content"], "the artifact's full content went to the model"
    assert any(t["function"]["name"] == "fetch_artifact" for t in fake.requests[0]["tools"])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_offer_fetch_on_openai_responses(tmp_path: Path, stream: bool) -> None:
    def script(body: dict[str, Any], seen: list[Any]) -> Reply:
        items = body["input"]
        n = len(seen)
        if any(i.get("type") == "function_call_output" and i["call_id"].startswith("fetch_") for i in items):
            return Reply([message("I read it back.", f"msg_{n}")])
        found = ARTIFACT.search(json.dumps(items))
        if found and any(t.get("name") == "fetch_artifact" for t in body.get("tools") or []):
            return Reply([function_call("fetch_artifact", {"id": found.group(1)}, f"fetch_{n}")])
        return Reply([function_call("shell", {"command": ["cat", f"f{n}"]}, f"c{n}")])

    tools = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    with FakeResponses(script) as fake, running_gateway(tmp_path, fake.base_url, session={"window": 6000},
                                                       offer_fetch=True) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)
        items: list[Any] = [{"role": "user", "content": "Fix the bug."}]
        text = ""
        for turn in range(20):
            if stream:
                with client.responses.stream(model="gpt-5.5", instructions="You code.", input=items, tools=tools) as s:
                    final = s.get_final_response()
            else:
                final = client.responses.create(model="gpt-5.5", instructions="You code.", input=items, tools=tools)
            assert all(getattr(o, "name", None) != "fetch_artifact" for o in final.output)
            text = final.output_text
            if text == "I read it back.":
                break
            for out in final.output:
                items.append(out.model_dump(exclude_none=True))
                if out.type == "function_call":
                    items.append({"type": "function_call_output", "call_id": out.call_id, "output": file_text(turn, 150)})
    assert text == "I read it back.", "the model's fetch was answered and it went on"
    fetched = [i for r in fake.requests for i in r.body["input"]
               if i.get("type") == "function_call_output" and i["call_id"].startswith("fetch_")]
    assert fetched and "line 0 of file" in fetched[0]["output"], "the artifact's full content went to the model"
