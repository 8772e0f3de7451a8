"""A throwaway PostgreSQL cluster for the tests and benchmarks: `initdb` in a temp dir, `pg_ctl` on a
loopback port, stopped and removed at the end. Not part of the installed package.

initdb and postgres refuse to run as root, so under root (CI runs as root) the cluster belongs to an
unprivileged account: `postgres` where the Debian package created it, else `nobody`; its data
directory is a fresh temp dir handed to that account, and every server command runs as it
(`subprocess` with `user=`, the same as `runuser -u ACCOUNT`). Clients connect over TCP on
127.0.0.1 with trust authentication, so the tests themselves run as whoever started them.

`python -m pgcluster start` prints the shell lines `.ci/run` evaluates; the pytest fixture and the
store benchmark use `Cluster` directly.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Where Debian's postgresql-NN packages put the server binaries (not on PATH by default).
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
# The role initdb creates and the clients connect as (trust authentication on loopback).
SUPERUSER = "worksurface"
# Settings of a cluster that only tests use: nothing must survive a power cut, so skip the fsyncs.
FAST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")
START_TIMEOUT_SECONDS = 60


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or the cluster would not start; the message says why."""


def find_bin_dir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres: from PATH (symlinks resolved, since pg_ctl
    looks for postgres beside its real file), else the newest Debian package's."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob(DEBIAN_BIN_GLOB), key=lambda p: int(Path(p).parent.name)
                        if Path(p).parent.name.isdigit() else 0)
    for candidate in reversed(candidates):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ClusterUnavailable("running as root and neither a 'postgres' nor a 'nobody' account exists to run "
                             "the server as (initdb and postgres refuse to run as root)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running throwaway cluster; `url` is a libpq URL for its `postgres` database."""

    directory: Path
    bin_dir: Path
    port: int
    account: pwd.struct_passwd | None

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @classmethod
    def start(cls, *, durable: bool = False, directory: Path | None = None) -> "Cluster":
        """initdb and start a cluster in a new temp dir (or `directory`, which must not exist yet).
        `durable` keeps PostgreSQL's default fsync settings (benchmarks); tests skip the fsyncs."""
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise ClusterUnavailable("no PostgreSQL server binaries (initdb not on PATH, nothing at "
                                     f"{DEBIAN_BIN_GLOB}); install Debian's postgresql package")
        account = _server_account()
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="worksurface-pg-"))
        else:
            directory.mkdir(parents=True)
        cluster = cls(directory, bin_dir, _free_port(), account)
        try:
            if account is not None:
                os.chown(directory, account.pw_uid, account.pw_gid)
            cluster._run("initdb", "-D", str(cluster.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
                         "--locale=C", "--no-sync")
            settings = [f"-c {s}" for s in (() if durable else FAST_SETTINGS)]
            options = " ".join([f"-p {cluster.port}", "-c listen_addresses=127.0.0.1",
                                f"-c unix_socket_directories={directory}", *settings])
            cluster._run("pg_ctl", "-D", str(cluster.data), "-l", str(directory / "server.log"), "-o", options,
                         "-w", "-t", str(START_TIMEOUT_SECONDS), "start")
        except BaseException:
            cluster.remove()
            raise
        return cluster

    def _run(self, tool: str, *args: str) -> None:
        account = self.account
        command = [str(self.bin_dir / tool), *args]
        result = subprocess.run(command, capture_output=True, text=True, cwd=self.directory,
                                user=None if account is None else account.pw_uid,
                                group=None if account is None else account.pw_gid,
                                extra_groups=None if account is None else [])
        if result.returncode != 0:
            log = self.directory / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ClusterUnavailable(f"{tool} failed ({result.returncode}): {result.stderr.strip()[-2000:]} {tail}")

    def stop(self) -> None:
        """Stop the server (immediately: nothing in it is worth keeping) and remove its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    @classmethod
    def attach(cls, directory: Path) -> "Cluster":
        """The cluster `start` made in `directory` (for `python -m pgcluster stop`)."""
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise ClusterUnavailable("no PostgreSQL server binaries")
        return cls(directory, bin_dir, 0, _server_account())


def wait_ready(url: str, timeout: float = 30.0) -> None:
    """Wait until the server accepts a connection on `url`."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def database_for_example(argv: list[str], variable: str = "WORKSURFACE_POSTGRES") -> str:
    """The database an example uses: the URL on its command line, else `variable`, else a throwaway
    cluster stopped when the process exits. Without server binaries it exits 2 with one line saying
    what to pass, so an example never dies with a traceback for want of a database."""
    import atexit

    if len(argv) > 1:
        return argv[1]
    if os.environ.get(variable):
        return os.environ[variable]
    try:
        cluster = Cluster.start()
    except ClusterUnavailable as exc:
        print(f"{Path(argv[0]).name}: pass a database URL (python {argv[0]} postgresql://USER@HOST/DB) or set "
              f"{variable}; no throwaway cluster could start: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    atexit.register(cluster.stop)
    return cluster.url
