"""A TCP proxy on 127.0.0.1 between a session store and its PostgreSQL server, failing the link as an
operator's network does: the server's answer to a chosen commit lost (after the server committed, or
the commit never delivered), or the link stalled (no byte moves either way, nothing is closed).

It reads the client's side of PostgreSQL's protocol just enough to count commits: a statement
executed that bumps a session's revision (worksurface's commit, however psycopg sends it: by text or
as a prepared statement) or an explicit COMMIT.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

COMMIT_MARKERS = (b"revision = revision + 1", b"COMMIT")


@dataclass
class _ClientReader:
    """The client's messages, parsed as they stream: which executions are commits."""

    buffer: bytes = b""
    started: bool = False
    statements: dict[bytes, bool] = field(default_factory=dict)  # prepared name -> is a commit

    def feed(self, data: bytes) -> int:
        """How many commits `data` executes."""
        self.buffer += data
        commits = 0
        while True:
            if not self.started:  # SSLRequest / GSSENCRequest / StartupMessage: length, no type byte
                if len(self.buffer) < 8:
                    return commits
                length, code = struct.unpack("!II", self.buffer[:8])
                if len(self.buffer) < length:
                    return commits
                self.buffer = self.buffer[length:]
                if code not in (80877103, 80877104):  # not an SSL or GSS request: the startup itself
                    self.started = True
                continue
            if len(self.buffer) < 5:
                return commits
            kind, length = self.buffer[:1], struct.unpack("!I", self.buffer[1:5])[0]
            if len(self.buffer) < 1 + length:
                return commits
            body, self.buffer = self.buffer[5:1 + length], self.buffer[1 + length:]
            if kind == b"Q":
                commits += any(m in body for m in COMMIT_MARKERS)
            elif kind == b"P":
                name, _, rest = body.partition(b"\0")
                self.statements[name] = any(m in rest.partition(b"\0")[0] for m in COMMIT_MARKERS)
            elif kind == b"B":
                _portal, _, rest = body.partition(b"\0")
                commits += self.statements.get(rest.partition(b"\0")[0], False)


class FaultProxy:
    """Listens on 127.0.0.1 (`port`) and forwards to `upstream` (host, port). `lose_answers({n: landed})`:
    the n-th commit from now loses its answer, after the server committed (`landed`) or before the
    server saw it; `stall()` / `resume()`: no byte moves while stalled (closes wait too)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._moving = threading.Event()
        self._moving.set()
        self.commits = 0
        self._lose: dict[int, bool] = {}  # commit number -> whether it lands before its answer is lost
        self.lost: list[int] = []  # the commits whose answers were lost
        self._stall_at_commit = False
        self._links: list[_Link] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    # --- faults ---------------------------------------------------------------------------------

    def lose_answers(self, plan: dict[int, bool]) -> None:
        """Commit n from now (1: the next one) loses its answer, having landed (True) or not (False)."""
        with self._lock:
            self._lose = {self.commits + n: landed for n, landed in plan.items()}

    def stall(self) -> None:
        self._moving.clear()

    def stall_at_next_commit(self) -> None:
        """The link stalls as the next commit arrives, holding it: it reaches the server only after
        `resume()` (late, after its sender gave up)."""
        self._stall_at_commit = True

    def drop_links(self) -> None:
        """Cut every open connection (as a server that went down does)."""
        for link in list(self._links):
            link.close()

    def resume(self) -> None:
        self._moving.set()

    def close(self) -> None:
        self._closed = True
        self._moving.set()
        self._listener.close()

    # --- forwarding -----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._moving.wait()
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            self._links.append(link)
            threading.Thread(target=self._to_server, args=(link,), daemon=True).start()
            threading.Thread(target=self._to_client, args=(link,), daemon=True).start()

    def _to_server(self, link: "_Link") -> None:
        reader = _ClientReader()
        while True:
            data = _recv(link.client)
            self._moving.wait()
            if not data:
                return link.close()
            lose = False
            with self._lock:
                for _ in range(reader.feed(data)):
                    if self._stall_at_commit:
                        self._stall_at_commit = False
                        self._moving.clear()
                    self.commits += 1
                    if self.commits in self._lose:
                        lose, landed = True, self._lose.pop(self.commits)
                        self.lost.append(self.commits)
            if lose and not landed:
                return link.close()       # the commit never reaches the server
            if lose:
                link.lose_reply.set()     # the server commits; its answer goes nowhere
            self._moving.wait()
            try:
                link.server.sendall(data)
            except OSError:
                return link.close()

    def _to_client(self, link: "_Link") -> None:
        while True:
            data = _recv(link.server)
            self._moving.wait()
            if not data or link.lose_reply.is_set():
                return link.close()
            try:
                link.client.sendall(data)
            except OSError:
                return link.close()


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket
    lose_reply: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""
