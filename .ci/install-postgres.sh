#!/usr/bin/env bash
# Install Debian's PostgreSQL server binaries for the store tests (tests/test_store.py and the other
# tests that take the `postgres_url` fixture run once on a directory and once on a database).
# Idempotent: does nothing when initdb is on PATH or a Debian postgresql-NN package is there. Only
# the binaries are wanted: the package's own default cluster is not created (.ci/run starts a
# throwaway cluster of its own, see pgcluster/). Needs root (or sudo) and apt-get; without them the
# tests that need a server skip and say why.
set -euo pipefail

if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-postgres: apt-get not found; the PostgreSQL store tests will skip" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install-postgres: not root and no passwordless sudo; the PostgreSQL store tests will skip" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# postgresql-common reads this before it would create and start a default cluster on port 5432.
$SUDO mkdir -p /etc/postgresql-common
echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
log="$(mktemp)"
if ! { $SUDO apt-get update -qq &&
       $SUDO apt-get install -y -qq -o Dpkg::Options::=--force-confold postgresql; } >"$log" 2>&1; then
    echo "install-postgres: apt-get failed (last lines below); the PostgreSQL store tests will skip" >&2
    tail -5 "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
