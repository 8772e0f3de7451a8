"""The one call-by-call replay the tests drive a session with: where the calls fall and the clock are
arguments, so each test keeps the calls it made before (the replay of a saved transcript as a harness
runs it, with its usage and message clock, is `worksurface.offline.replay.replay`)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from worksurface.offline.replay import call_points

__all__ = ["after_each_assistant", "before_each_assistant", "call_points", "replay_all", "replay_calls"]


def after_each_assistant(messages: Sequence[Any], first: int = 2) -> list[int]:
    """Prefix lengths that end with an assistant message, from `first` messages on."""
    return [n for n in range(first, len(messages) + 1) if messages[n - 1].role == "assistant"]


def before_each_assistant(messages: Sequence[Any]) -> list[int]:
    """Right before each assistant message (each record of a split turn too), and after the last one."""
    return [n for n in range(1, len(messages)) if messages[n].role == "assistant"] + [len(messages)]


def replay_calls(session: Any, messages: Sequence[Any], points: Iterable[int] | None = None,
                 now: Callable[[int, int], float] = lambda step, end: float(end), start: int = 0,
                 **prepare: Any) -> Iterator[tuple[int, Any]]:
    """`session.prepare(messages[:end])` at each of `points` (default: `call_points`, where a harness
    calls the model) past `start`, yielding (end, prepared) as it goes; `now(step, end)` is the call's
    clock (step counts the calls made, from 1), `prepare` more keyword arguments of each call."""
    step = 0
    for end in (call_points(messages) if points is None else points):
        if end <= start:
            continue
        step += 1
        yield end, session.prepare(messages[:end], now=now(step, end), **prepare)


def replay_all(session: Any, messages: Sequence[Any], points: Iterable[int] | None = None,
               now: Callable[[int, int], float] = lambda step, end: float(end), start: int = 0) -> Any:
    """Every call of `replay_calls`; the last prepared view (None when no call was made)."""
    prepared = None
    for _, prepared in replay_calls(session, messages, points, now, start):
        pass
    return prepared
