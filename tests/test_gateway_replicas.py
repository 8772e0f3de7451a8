"""Gateway replicas on one PostgreSQL store (issue 57): the usage the upstream reports for a call is
kept in the shared store (`Session.record_usage`), so two replicas taking alternate requests of one
conversation size it, compact it and forward it exactly as one gateway does."""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

pytest.importorskip("uvicorn")
anthropic = pytest.importorskip("anthropic")

from fake_anthropic import FakeAnthropic  # noqa: E402
from gateway_helpers import running_gateway  # noqa: E402
from test_gateway_api import SYSTEM, TOOLS, file_text, reader  # noqa: E402
from worksurface import Session  # noqa: E402
from worksurface.formats import ownmark  # noqa: E402
from worksurface.gateway import app as gateway_app  # noqa: E402
from worksurface.gateway.plan import plan_call  # noqa: E402
from worksurface.session.locations import list_sessions  # noqa: E402

TURNS = 24
# A provider's count runs above worksurface's (another tokenizer) and carries a fixed part the request
# does not show (the harness's system tools): the usage a replica must anchor on, not its own count.
USAGE_RATIO, USAGE_FIXED = 1.1, 3_000
SESSION = {"window": 10_000}
START = 1_800_000_000.0


class RealisticUsage(FakeAnthropic):
    """The fake API reporting input tokens as a provider would: counted x 1.1 + 3,000."""

    def measure(self, body: dict[str, Any]) -> int:
        return int(super().measure(body) * USAGE_RATIO) + USAGE_FIXED


@contextmanager
def _database(server: str) -> Iterator[str]:
    import psycopg

    from worksurface.session import pgstore

    name = f"ws_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{server.rsplit('/', 1)[0]}/{name}"
    try:
        yield url
    finally:
        for key in [k for k in pgstore._pools if k[1] == url]:
            pgstore._pools.pop(key).close()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _conversation(replicas: int, server: str) -> list[str]:
    """The bodies the upstream received for one conversation of TURNS calls, its call n sent to
    replica n % replicas (all on one new database)."""
    with _database(server) as store, RealisticUsage(cache=True, script=reader()) as fake, \
            _gateways(store, fake.url, replicas) as urls:
        clients = [anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) for url in urls]
        history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Refactor the repo."}]}]
        for turn in range(TURNS):
            with clients[turn % replicas].messages.stream(model="claude-test", max_tokens=256, system=SYSTEM,
                                                          tools=TOOLS, messages=history) as stream:
                reply = stream.get_final_message()
            history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
            calls = [b for b in reply.content if b.type == "tool_use"]
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": file_text(turn)} for c in calls]
                or [{"type": "text", "text": f"Continue with step {turn + 1}."}]})
        sent = fake.messages()
        # What the store keeps is what the upstream reported for the last call, all its input tokens.
        (session_id,) = list_sessions(store)
        with Session.open(store, session_id=session_id) as stored:
            kept = stored.store.get_meta("reported_usage")
        assert kept is not None and kept["tokens"] == sum(sent[-1].usage.values()) > USAGE_FIXED
        return [json.dumps(r.body, sort_keys=True) for r in sent]


@contextmanager
def _gateways(store: str, upstream: str, count: int) -> Iterator[list[str]]:
    with running_gateway(store, upstream, session=SESSION) as one:
        if count == 1:
            yield [one.url]
            return
        with running_gateway(store, upstream, session=SESSION) as two:
            yield [one.url, two.url]


def test_two_replicas_forward_what_one_gateway_forwards(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The marks' key is the session's random secret: fixed here so two runs can be compared byte for byte.
    monkeypatch.setattr(ownmark, "new_key", lambda: b"k" * 32)
    # So is the clock the status bar is dated by: call n of the conversation happens at minute n.
    planned: list[int] = []

    def planned_at_minute(*args: Any) -> Any:
        planned.append(len(planned))
        return plan_call(*args, now=START + 60 * planned[-1])
    monkeypatch.setattr(gateway_app, "plan_call", planned_at_minute)
    single = _conversation(1, postgres_url)
    planned.clear()
    alternate = _conversation(2, postgres_url)
    assert len(single) == len(alternate) == TURNS
    # The sizing mattered: the conversation was compacted (a later request smaller than an earlier one).
    assert any(len(b) < len(a) for a, b in zip(single, single[1:]))
    if single[0] != alternate[0]:
        import difflib; print("\n".join(list(difflib.unified_diff(single[0].split(", "), alternate[0].split(", "), lineterm=""))[:30]))
    differing = [n for n, (a, b) in enumerate(zip(single, alternate)) if a != b]
    assert differing == []
