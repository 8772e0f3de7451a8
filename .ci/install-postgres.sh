#!/usr/bin/env bash
# Install Debian's PostgreSQL server binaries for the store tests (tests/test_store.py and the other
# tests that take the `postgres_url` fixture run once on a directory and once on a database).
# Idempotent: does nothing when initdb is on PATH or a Debian postgresql-NN package is there. Only
# the binaries are wanted: the package's own default cluster is not created (.ci/run starts a
# throwaway cluster of its own, see pgcluster/). Needs root (or sudo) and apt-get; without them the
# tests that need a server skip and say why.
set -euo pipefail
. "$(dirname "$0")/apt.sh"

if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    exit 0
fi
# postgresql-common reads this before it would create and start a default cluster on port 5432.
if ! as_root mkdir -p /etc/postgresql-common 2>/dev/null ||
   ! echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null; then
    echo "install-postgres: cannot write /etc/postgresql-common (not root?); the PostgreSQL store tests will skip" >&2
    exit 1
fi
apt_install install-postgres postgresql
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
