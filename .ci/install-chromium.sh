#!/usr/bin/env bash
# Install Debian's Chromium (and its chromedriver) for the report's browser tests
# (tests/test_report_browser.py drive it through Playwright with the system browser as executable;
# Playwright itself comes with the test extra, and never downloads a browser of its own here).
# Idempotent: does nothing when /usr/bin/chromium is there. Quiet on success. Needs root (or sudo)
# and apt-get; without them the browser tests skip and say why.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: apt-get not found; the report's browser tests will skip" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install-chromium: not root and no passwordless sudo; the report's browser tests will skip" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium chromium-driver; } >"$log" 2>&1; then
    echo "install-chromium: apt-get failed (last lines below); the report's browser tests will skip" >&2
    tail -5 "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"
/usr/bin/chromium --version >/dev/null 2>&1
