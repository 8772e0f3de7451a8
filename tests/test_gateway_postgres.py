"""`worksurface serve --store postgresql://...`: two gateway replicas sharing one database keep one
conversation's session, whichever replica a request reaches, and the /sessions endpoints list and
delete sessions in the database."""

from __future__ import annotations


import httpx
import pytest

pytest.importorskip("uvicorn")
anthropic = pytest.importorskip("anthropic")

from fake_anthropic import FakeAnthropic  # noqa: E402
from gateway_helpers import running_gateway  # noqa: E402
from test_gateway_api import SYSTEM, TOOLS, WINDOW, assert_paired, file_text, reader  # noqa: E402
from worksurface import Session  # noqa: E402
from worksurface.session.locations import list_sessions  # noqa: E402


def _turns(client_for, turns: int) -> None:
    """A Claude Code-shaped loop whose every call goes to the replica `client_for(turn)` gives."""
    history = [{"role": "user", "content": [{"type": "text", "text": "Refactor the repo."}]}]
    for turn in range(turns):
        reply = client_for(turn).messages.create(model="claude-test", max_tokens=256, system=SYSTEM, tools=TOOLS,
                                                 messages=history)
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        calls = [b for b in reply.content if b.type == "tool_use"]
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": file_text(turn)} for c in calls]
            or [{"type": "text", "text": f"Continue with step {turn + 1}."}]})


def test_two_replicas_share_a_conversation_through_the_database(fresh_database):
    """Every other request of one conversation reaches the other replica: both prepare the one session
    in the database (each continuing from what the other committed), every forwarded request is
    paired, the session's log holds each message once, and the /sessions endpoints of either replica
    list and delete it. (The input tokens the upstream reports are kept in the database too: see
    test_gateway_replicas.py for the same requests as one gateway's.)"""
    with FakeAnthropic(cache=True, script=reader()) as fake, \
            running_gateway(fresh_database, fake.url, session=WINDOW) as one, \
            running_gateway(fresh_database, fake.url, session=WINDOW) as two:
        clients = [anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0) for gw in (one, two)]
        _turns(lambda turn: clients[turn % 2], 24)
        sent = fake.messages()
        for r in sent:
            assert_paired(r.body)
        ids = {s["id"] for s in one.sessions()} & {s["id"] for s in two.sessions()}
        assert len(ids) == 1 and ids == set(list_sessions(fresh_database))
        session_id = next(iter(ids))
        with Session.open(fresh_database, session_id=session_id) as stored:
            log = [m.id for m in stored._log]
            assert len(log) == len(set(log)) and len(log) >= 2 * 24 - 1  # every turn, none twice
            assert stored.store.get_meta("generation") >= 24  # one commit per call, from both replicas
        detail = httpx.get(f"{two.url}/sessions/{session_id}", timeout=10).json()
        assert detail["api"] == "anthropic" and detail["view_messages"] > 0
        assert httpx.delete(f"{one.url}/sessions/{session_id}", timeout=30).json()["deleted"] is True
        assert list_sessions(fresh_database) == []
