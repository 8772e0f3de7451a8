"""A plain OpenAI-style tool loop: keep the full history, send worksurface's view each call.

Runs offline with a scripted stand-in for `openai.OpenAI().chat.completions.create`.
"""

import json

from worksurface import Session
from worksurface.integrations.sdk import prepare_openai


def create(model, messages, tools=None):
    """Stand-in for the SDK call: asks for a build once, then answers."""
    if not any(m["role"] == "tool" for m in messages):
        call = {"id": "call_1", "type": "function",
                "function": {"name": "build", "arguments": json.dumps({"target": "all"})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    sent = next(m for m in messages if m["role"] == "tool")
    return {"role": "assistant", "content": f"Build done (I was sent {len(sent['content'])} characters of log)."}


def build(target):
    return "\n".join(f"[{i:04d}] compiled {target}/module_{i}.c" for i in range(500)) + "\nBUILD OK"


TOOLS = {"build": build}
messages = [{"role": "system", "content": "You are a build assistant."},
            {"role": "user", "content": "Build everything."}]
# Memory-only session; use Session.open("path/to/dir") to keep it across runs. A small result
# budget so this short run shows a big result stored as an artifact and previewed.
session = Session.open(None, budget={"max_result_tokens": 200, "preview_head_tokens": 40,
                                     "preview_tail_tokens": 40})
while True:
    view, cache_edits = prepare_openai(messages, session)
    reply = create(model="gpt-4o-mini", messages=view)
    messages.append(reply)
    if not reply.get("tool_calls"):
        break
    for call in reply["tool_calls"]:
        output = TOOLS[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})

print(f"history keeps the full log: {len(messages[3]['content'])} characters")
print("answer:", messages[-1]["content"])
