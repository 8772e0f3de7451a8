"""Stages that carry their reading of the view between calls (the session's scratch) decide exactly
what a fresh reading of the whole view decides, on every call of a session where they fire."""

from __future__ import annotations

from builders import Convo, words
from worksurface import Config, Session


def _session(steps: int) -> list:
    c = Convo().user("port the module, file by file")
    for i in range(steps):
        c.tool("Read", {"file_path": f"/repo/src/m{i % 23}.py"}, words(900 + 37 * (i % 5), seed=i))
        if i % 4 == 0:
            c.tool("Bash", {"command": f"pytest tests/test_m{i}.py"}, words(300, seed=100 + i))
        c.say(f"m{i} read; next")
    return c.messages


def _views(config: Config, full: list, fresh: bool) -> tuple[list[list[str]], int]:
    out, cleared = [], 0
    with Session.open(None, config=config) as session:
        for n in range(3, len(full) + 1):
            if full[n - 1].role != "user":
                continue
            if fresh:
                session._memories = tuple(type(m)() for m in session._memories)  # every stage reads anew
            prepared = session.prepare(full[:n], now=1_000.0 + 20 * n)
            out.append([m.digest for m in prepared.messages])
            cleared += next(s.items for s in prepared.report.stages if s.name == "microcompact")
    return out, cleared


def test_microcompact_and_snip_carried_walks_equal_fresh_ones_on_every_call():
    config = Config().with_overrides(microcompact={"trigger_tokens": 4_000})
    full = _session(60)
    (carried, cleared), (fresh, _) = _views(config, full, False), _views(config, full, True)
    assert carried == fresh
    assert cleared > 10  # microcompact cleared in batches, so walks continued past its own clearings
