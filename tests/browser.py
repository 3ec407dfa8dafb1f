"""A real headless browser for the tests of HTML pages: Debian's ``chromium``.

:func:`render` opens a page the way a person would, reads the text the browser shows
(its DOM after loading, tags stripped) and takes a screenshot. Where no browser can be
had, :data:`REASON` says why and the tests that need one are skipped with it
(``scripts/test.sh`` installs ``chromium`` when it runs as root on Debian or Ubuntu).
"""
from __future__ import annotations

import contextlib
import html.parser
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
REASON = ("no headless Chromium on this machine: install Debian's chromium package "
          "(apt-get install chromium; scripts/test.sh does so when run as root on Debian/Ubuntu)")
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason=REASON)
try:
    import playwright.sync_api  # noqa: F401 - drives the system's Chromium; never downloads a browser
    PLAYWRIGHT = None
except ImportError:
    PLAYWRIGHT = "Playwright is not installed (it is in the test extra: pip install -e '.[test]')"
#: where the screenshots a test takes are kept after the run, to look at
ARTIFACTS = Path(os.environ.get("GRADER_TEST_ARTIFACTS",
                                Path(__file__).resolve().parent.parent / "build" / "test-artifacts"))

#: flags for a machine with no screen and a closed network (no background connections)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


class _Text(html.parser.HTMLParser):
    """The text a page shows: everything outside <style>, <script> and <title>."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in ("style", "script", "title"):
            self._skip += 1

    def handle_endtag(self, tag) -> None:
        if tag in ("style", "script", "title") and self._skip:
            self._skip -= 1

    def handle_data(self, data) -> None:
        if not self._skip:
            self.parts.append(data)


def render(page: Path, screenshot: Path, *, size: str = "1024,1400", timeout: float = 90) -> str:
    """The text ``page`` shows in Chromium; a screenshot of it is written to ``screenshot``."""
    if CHROMIUM is None:
        pytest.skip(REASON)
    url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        common = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size}"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=timeout)
        shot = subprocess.run([*common, f"--screenshot={screenshot}", url], capture_output=True, timeout=timeout)
    assert dom.returncode == 0 and dom.stdout.strip(), dom.stderr[-2000:]
    assert shot.returncode == 0 and Path(screenshot).stat().st_size > 1000, shot.stderr[-2000:]
    parser = _Text()
    parser.feed(dom.stdout)
    return " ".join(" ".join(parser.parts).split())


@contextlib.contextmanager
def page_in_browser(page: Path, *, width: int = 1024, height: int = 1400):
    """``page`` opened in the system's headless Chromium through Playwright (``executable_path``: no
    browser of Playwright's own), for a test to read the laid-out page: sizes, places, elements."""
    if CHROMIUM is None or PLAYWRIGHT is not None:
        pytest.skip(REASON if CHROMIUM is None else PLAYWRIGHT)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                         "--disable-dev-shm-usage"])
        try:
            view = browser.new_page(viewport={"width": width, "height": height})
            view.goto(Path(page).resolve().as_uri())
            yield view
        finally:
            browser.close()
