"""Large Claude Code sessions for the large-input benchmark: many small messages, one huge tool result
(synthetic), or real sessions repeated as one. Same arguments and seed, same bytes; written line by line.
"""

from __future__ import annotations

import json
import os
import random
import re
import uuid
from pathlib import Path
from typing import IO, Any, Sequence

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


# Records a repeated session drops: what splits a file into epochs (it is to be one long live chain),
# and sub-agents' records (their chains are apart from the main one).
_EPOCH_RECORDS = ("compact_boundary",)
_ID_PREFIXES = re.compile(r"\b(toolu_|msg_|srvtoolu_)([A-Za-z0-9]{8,})")
_RENAMED = uuid.UUID("6f1c3a52-9e0b-4d7c-8a41-2b5e9d0c7f13")


def write_repeated_sessions(path: str | os.PathLike[str], sources: Sequence[str | os.PathLike[str]],
                            copies: int) -> Path:
    """One long live Claude Code session made of real ones: the records of `sources` (their compaction
    boundaries and summaries and their sub-agent records left out), `copies` times over, as one
    `parentUuid` chain, every record uuid, tool-use id and API message id renamed per copy so no two
    records share one. Real content at a length no shared session has; same inputs, same bytes."""
    records: list[dict[str, Any]] = []
    for source in sources:
        with open(source, encoding="utf-8") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a damaged line of the source: not part of the repeated session
                if (isinstance(record, dict) and record.get("subtype") not in _EPOCH_RECORDS
                        and not record.get("isCompactSummary") and not record.get("isSidechain")):
                    records.append(record)
    session = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), str(_RENAMED))
    parent: str | None = None
    with open(path, "w", encoding="utf-8") as out:
        for copy in range(copies):
            for n, record in enumerate(records):
                text = _ID_PREFIXES.sub(lambda m: f"{m.group(1)}{m.group(2)}c{copy}", json.dumps(record, ensure_ascii=False))
                renamed = json.loads(text)
                if "sessionId" in renamed:
                    renamed["sessionId"] = session
                if "uuid" in renamed:
                    renamed["uuid"] = str(uuid.uuid5(_RENAMED, f"{copy}/{n}"))
                    if renamed.get("type") in ("user", "assistant", "system"):
                        renamed["parentUuid"], parent = parent, renamed["uuid"]
                out.write(json.dumps(renamed, ensure_ascii=False) + "\n")
    return Path(path)
