"""`core.cached`: a value worked out once per object, also on frozen dataclasses."""

from __future__ import annotations

import dataclasses
import threading

from worksurface.core.cached import cached
from worksurface.core.model import Message, Text, ToolCall


@dataclasses.dataclass(frozen=True)
class _Counted:
    n: int
    computed: list[int] = dataclasses.field(default_factory=list, compare=False)

    @cached
    def doubled(self) -> int:
        """Twice n."""
        self.computed.append(self.n)
        return 2 * self.n


def test_a_value_is_computed_once_per_object_and_kept_on_it() -> None:
    a, b = _Counted(2), _Counted(3)
    assert (a.doubled, a.doubled, b.doubled) == (4, 4, 6)
    assert a.computed == [2] and b.computed == [3]
    assert dataclasses.replace(a, n=5).doubled == 10  # a new object works its own value out
    assert isinstance(_Counted.doubled, cached) and _Counted.doubled.__doc__ == "Twice n."


def test_threads_reading_one_value_all_get_it() -> None:
    obj, seen = _Counted(7), []
    threads = [threading.Thread(target=lambda: seen.append(obj.doubled)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [14] * 8 and 1 <= len(obj.computed) <= 8


def test_a_messages_derived_parts_follow_its_blocks() -> None:
    call = ToolCall("c1", "Read", {"file_path": "a.py"})
    m = Message("m1", "assistant", (Text("reading"), call))
    assert m.tool_calls == (call,) and m.tool_results == ()
    edited = dataclasses.replace(m, blocks=(Text("reading"),))
    assert edited.tool_calls == () and edited.digest != m.digest
