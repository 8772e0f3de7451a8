#!/usr/bin/env bash
# Install the pinned Claude Code CLI (@anthropic-ai/claude-code; its native binary ships inside the
# registry package as a platform optional dependency) into "$WORKSURFACE_CLIENTS/claude-code", so
# tests/test_client_claude_code.py can resume worksurface-compacted sessions with the real client.
# Idempotent: does nothing when that version is already there. Quiet on success.
set -euo pipefail
# The version issue 13 was reported against and the client tests were written for; bump deliberately
# (a new version may change how it reads session files or when it compacts on its own).
CLAUDE_CODE_VERSION="2.1.328"
CLIENTS="${WORKSURFACE_CLIENTS:-$HOME/.cache/worksurface/clients}"
PREFIX="$CLIENTS/claude-code"
BIN="$PREFIX/node_modules/.bin/claude"

installed_version() {
    # `claude --version` prints "2.1.328 (Claude Code)"; the first field is the version.
    DISABLE_AUTOUPDATER=1 "$BIN" --version 2>/dev/null | awk '{print $1}'
}

if [ -x "$BIN" ] && [ "$(installed_version)" = "$CLAUDE_CODE_VERSION" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "install-claude-code: npm not found; Claude Code client tests will skip" >&2
    exit 1
fi
mkdir -p "$PREFIX"
# A package.json of our own keeps npm from walking up to an unrelated one.
[ -f "$PREFIX/package.json" ] || echo '{"name": "worksurface-claude-code-client", "private": true}' > "$PREFIX/package.json"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >/dev/null
if [ "$(installed_version)" != "$CLAUDE_CODE_VERSION" ]; then
    echo "install-claude-code: installed, but '$BIN --version' does not report $CLAUDE_CODE_VERSION" >&2
    exit 1
fi
