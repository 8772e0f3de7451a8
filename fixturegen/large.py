"""Large synthetic Claude Code sessions for the large-input benchmark: many small messages, or one
huge tool result. Same arguments and seed, same bytes; written line by line, never held whole.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import IO, Any

from .records import Call, RecordWriter

CWD = "/home/dev/service"
# A small exchange: the user asks, the assistant runs one command and answers (4 messages).
MESSAGES_PER_EXCHANGE = 4


def _flush(writer: RecordWriter, out: IO[str]) -> None:
    """Write the records made so far and forget them (the writer keeps only its chain and clock)."""
    for record in writer.records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    writer.records.clear()


def write_many_messages(path: str | os.PathLike[str], messages: int, seed: int = 0) -> Path:
    """A session of about `messages` small messages: short requests, one short command each, short answers."""
    rng = random.Random(seed)
    writer = RecordWriter(rng, CWD, "main")
    with open(path, "w", encoding="utf-8") as out:
        for n in range(max(1, messages // MESSAGES_PER_EXCHANGE)):
            writer.user(f"step {n}: check worker {rng.randint(1, 64)} and tell me its state")
            output = f"worker {n % 64}: state={rng.choice(('idle', 'busy', 'draining'))} jobs={rng.randint(0, 999)}"
            writer.respond(calls=(Call("Bash", {"command": f"./status.sh --worker {n % 64}"}, output),))
            writer.respond(f"Worker {n % 64} reports {output.split(': ', 1)[1]}.")
            _flush(writer, out)
    return Path(path)


def write_huge_result(path: str | os.PathLike[str], megabytes: int, seed: int = 0) -> Path:
    """A short session whose one tool result is a log of about `megabytes` MB of distinct lines."""
    rng = random.Random(seed)
    writer = RecordWriter(rng, CWD, "main")
    lines, size, i = [], 0, 0
    while size < megabytes * 1_000_000:
        line = (f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 7} processed batch {i} "
                f"in 0.{rng.randint(0, 999):03d}s ok\n")
        lines.append(line)
        size += len(line)
        i += 1
    log: Any = "".join(lines)
    del lines
    with open(path, "w", encoding="utf-8") as out:
        writer.user("run the nightly job and tell me whether it passed")
        writer.respond("Running it.", calls=(Call("Bash", {"command": "./nightly.sh"}, log, kind="log"),))
        writer.respond("The job finished: every batch reported ok.")
        writer.user("thanks, commit the log summary")
        _flush(writer, out)
    return Path(path)
