#!/usr/bin/env bash
# Install the pinned Codex CLI (@openai/codex, which ships its native binary inside the registry
# package) into "$WORKSURFACE_CLIENTS/codex", so tests/test_client_codex.py can drive the real client.
# Idempotent: does nothing when that version is already there. Quiet on success.
set -euo pipefail
# The version the fixtures in fixtures/codex/ were generated with; bump both together.
CODEX_VERSION="0.169.0"
CLIENTS="${WORKSURFACE_CLIENTS:-$HOME/.cache/worksurface/clients}"
PREFIX="$CLIENTS/codex"
BIN="$PREFIX/node_modules/.bin/codex"

if [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null | awk '{print $NF}')" = "$CODEX_VERSION" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "install-codex: npm not found; Codex client tests will skip" >&2
    exit 1
fi
mkdir -p "$PREFIX"
# A package.json of our own keeps npm from walking up to an unrelated one.
[ -f "$PREFIX/package.json" ] || echo '{"name": "worksurface-codex-client", "private": true}' > "$PREFIX/package.json"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "@openai/codex@$CODEX_VERSION" >/dev/null
"$BIN" --version >/dev/null
