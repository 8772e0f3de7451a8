"""A persistent session backend for tests that run on both: where a named session lives, as
`Session.open(location, session_id=...)` and `open_store` take it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worksurface import Session
from worksurface.session.locations import describe, open_store
from worksurface.session.store import Store


@dataclass
class Backend:
    name: str  # "disk" or "postgres"
    base: str  # a directory holding sessions by id, or a database URL
    prefix: str = field(default_factory=lambda: uuid.uuid4().hex[:10])  # keeps tests apart in one database

    @classmethod
    def disk(cls, base: Path) -> "Backend":
        return cls("disk", str(base), prefix="")

    @classmethod
    def postgres(cls, url: str) -> "Backend":
        return cls("postgres", url)

    def session_id(self, name: str) -> str:
        return f"{self.prefix}-{name}" if self.prefix else name

    def where(self, name: str) -> dict[str, Any]:
        """`location` and `session_id` keyword arguments for `Session.open`."""
        return {"location": self.base, "session_id": self.session_id(name)}

    def open(self, name: str, **config: Any) -> Session:
        return Session.open(self.base, session_id=self.session_id(name), **config)

    def store(self, name: str, **kwargs: Any) -> Store:
        return open_store(self.base, self.session_id(name), **kwargs)

    def label(self, name: str) -> str:
        """How the session's artifact markers name it (a directory's path; nothing for a database)."""
        return describe(self.base, self.session_id(name)) if self.name == "disk" else "<no path>"
