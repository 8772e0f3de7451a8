"""LangGraph applications keeping worksurface's sessions in their checkpointer's PostgreSQL database
(`PostgresSessions`), against a real server: the pool is shared, another worker (process) continues a
thread exactly where the first left it, and deleting a thread removes only its sessions."""

from __future__ import annotations

import os
import re
import uuid

import pytest

pytest.importorskip("langgraph.checkpoint.postgres")
pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402

from builders import words  # noqa: E402
from worksurface.integrations.langgraph import make_pre_model_hook  # noqa: E402
from worksurface.integrations.postgres import PostgresSessions  # noqa: E402
from worksurface.session.locations import list_sessions  # noqa: E402

BUDGET = {"budget": {"max_result_tokens": 300}}


def _history(turns: int) -> list:
    messages: list = [HumanMessage("Fix the flaky scheduler test. Never touch the queue API.", id="h0")]
    for i in range(turns):
        messages.append(AIMessage("", id=f"a{i}", tool_calls=[{"name": "run", "args": {"n": i}, "id": f"c{i}"}]))
        messages.append(ToolMessage(words(900, seed=i), tool_call_id=f"c{i}", id=f"t{i}"))
    return messages


def _pool(url: str):
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool
    # The pool LangGraph's documentation gives PostgresSaver.
    return ConnectionPool(url, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                          open=True)


def _view(hook, messages: list, thread: str) -> list[str]:
    """The view the hook gives, with the wall-clock time the status bar stamps taken out."""
    out = hook({"messages": messages}, {"configurable": {"thread_id": thread}})["llm_input_messages"]
    return [re.sub(r'generated-at="[^"]*"', "", f"{m.type}:{m.content}") for m in out]


def test_sessions_share_the_checkpointers_pool_and_database(postgres_url):
    from langgraph.checkpoint.postgres import PostgresSaver
    with _pool(postgres_url) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        sessions = PostgresSessions.beside(saver, **BUDGET)
        assert sessions.pool is pool
        thread = f"t-{uuid.uuid4().hex[:8]}"
        hook = make_pre_model_hook(sessions)
        view = _view(hook, _history(3), thread)
        assert len([v for v in view if v.startswith("tool:")]) == 3
        assert thread in list_sessions(postgres_url)
        with pool.connection() as conn:  # the checkpointer's tables and worksurface's, one database
            tables = {r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables")}
        assert {"checkpoints", "worksurface_sessions"} <= tables
        hook.sessions.close()
    with PostgresSaver.from_conn_string(postgres_url) as single:  # a saver on one connection
        other = PostgresSessions.beside(single)
        assert other.pool is not None and thread in list_sessions(postgres_url)
        with other.session(thread) as session:
            assert [f"{m.role}" for m in session.view()][:2] == ["user", "assistant"]
            assert len(session.view()) == len(view)


def test_another_worker_continues_a_thread_where_the_first_left_it(postgres_url):
    """Worker A (this process) answers turn 1; worker B (a forked process with its own pool) turn 2;
    then A again. The views equal those of one worker doing everything."""
    thread, alone = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    history = _history(6)
    turns = [history[:3], history[:5], history[:7], history[:9]]
    with _pool(postgres_url) as pool:
        one = make_pre_model_hook(PostgresSessions(pool, **BUDGET))
        expected = [_view(one, t, alone) for t in turns]
        one.sessions.close()
        a = make_pre_model_hook(PostgresSessions(pool, **BUDGET))
        got = [_view(a, turns[0], thread)]
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # worker B
            code = 1
            try:
                b = make_pre_model_hook(PostgresSessions(postgres_url, **BUDGET))
                os.write(write_end, repr(_view(b, turns[1], thread)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        data = b""
        while chunk := os.read(read_end, 1 << 16):
            data += chunk
        os.close(read_end)
        assert os.waitpid(pid, 0)[1] == 0
        got.append(eval(data.decode()))
        got += [_view(a, t, thread) for t in turns[2:]]  # A reloads at the generation B committed
        a.sessions.close()
    assert got == expected


def test_deleting_a_thread_removes_its_sessions_only(postgres_url):
    sessions = PostgresSessions(postgres_url)
    thread, other = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    for name, agent in ((thread, None), (thread, "researcher"), (other, None)):
        with sessions.session(name, agent) as session:
            session.prepare([], now=1.0)
    assert sessions.delete_thread(thread) == 2
    left = list_sessions(postgres_url)
    assert thread not in left and not any(s.startswith(thread + "+") for s in left) and other in left


def test_a_postgres_url_is_a_session_source(postgres_url):
    thread = f"t-{uuid.uuid4().hex[:8]}"
    hook = make_pre_model_hook(postgres_url, **BUDGET)
    assert len([v for v in _view(hook, _history(2), thread) if v.startswith("tool:")]) == 2
    hook.sessions.close()
    assert thread in list_sessions(postgres_url)
