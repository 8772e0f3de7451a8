#!/usr/bin/env bash
# Install Debian's Chromium (and its chromedriver) for the report's browser tests
# (tests/test_report_browser.py drive it through Playwright with the system browser as executable;
# Playwright itself comes with the test extra, and never downloads a browser of its own here).
# Idempotent: does nothing when /usr/bin/chromium is there. Quiet on success. Needs root (or sudo)
# and apt-get; without them the browser tests skip and say why.
set -euo pipefail
. "$(dirname "$0")/apt.sh"

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
apt_install install-chromium chromium chromium-driver
/usr/bin/chromium --version >/dev/null 2>&1
