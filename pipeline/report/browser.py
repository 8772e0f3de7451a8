"""Open a report page in the system's headless Chromium (Debian's `chromium`), through Playwright's
Python package with the system browser as its executable: what the browser tests and the benchmark
use. Nothing here downloads a browser."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

# Where Debian puts it; WORKSURFACE_CHROMIUM overrides (another build, another path).
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# Headless, no sandbox (CI runs as root in a container), and nothing that phones home on its own, so
# any request a test sees comes from the page.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")
VIEWPORT = {"width": 1040, "height": 900}


class BrowserUnavailable(RuntimeError):
    """No usable Chromium or Playwright: the message says which and how to install it."""


def find_chromium() -> str:
    """The Chromium executable, or BrowserUnavailable saying why not."""
    override = os.environ.get("WORKSURFACE_CHROMIUM")
    for candidate in ((override,) if override else CHROMIUM_PATHS):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("chromium")
    if found:
        return found
    raise BrowserUnavailable("no Chromium at /usr/bin/chromium (install it with .ci/install-chromium.sh, "
                             "or set WORKSURFACE_CHROMIUM)")


@dataclass
class OpenedPage:
    """A page loaded from a file: the Playwright page, what it logged, what it requested, how long
    `goto` took until the load event."""

    page: Any
    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    open_seconds: float = 0.0

    @property
    def foreign_requests(self) -> list[str]:
        """Requests other than the page's own file."""
        return [u for u in self.requests if u != self.url]


class Chromium:
    """One headless Chromium with a fresh profile (`with Chromium() as browser:`); `browser.open(path)`
    loads a page in a new tab, recording console errors and requests and aborting every request other
    than the page itself."""

    def __init__(self) -> None:
        self._pw: Any = None
        self._context: Any = None
        self._profile: str | None = None

    def __enter__(self) -> "Chromium":
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            raise BrowserUnavailable("the playwright package is not installed (pip install -e '.[test]')") from None
        executable = find_chromium()
        self._profile = tempfile.mkdtemp(prefix="worksurface-chromium-")
        try:
            self._pw = sync_playwright().start()
            self._context = self._pw.chromium.launch_persistent_context(
                self._profile, executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS),
                viewport=VIEWPORT)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._context is not None:
            self._context.close()
            self._context = None
        if self._pw is not None:
            self._pw.stop()
            self._pw = None
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    @contextmanager
    def open(self, path: str | os.PathLike[str]) -> Iterator[OpenedPage]:
        if self._context is None:
            raise RuntimeError("use `with Chromium() as browser:` before browser.open(...)")
        url = Path(path).resolve().as_uri()
        page = self._context.new_page()
        opened = OpenedPage(page, url)
        page.on("console", lambda m: opened.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: opened.console_errors.append(f"page error: {e}"))
        page.on("request", lambda r: opened.requests.append(r.url))
        page.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
        try:
            started = time.perf_counter()
            page.goto(url, wait_until="load")
            opened.open_seconds = time.perf_counter() - started
            yield opened
        finally:
            page.close()

