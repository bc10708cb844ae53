"""Pictures of HTML pages through the system Chromium: the PNG export of the views plotly cannot
write itself (the IR side-by-side view), and the one place that knows where Chromium lives.

Plotly figures go to PNG through kaleido, which finds the same Chromium on its own; pages of our
own HTML are opened by Playwright (a `dev` dependency: `make lab` installs it) in headless
Chromium from Debian's package, never a downloaded browser, and without any network: the pages
are self-contained files.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHROMIUM_PATHS = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
INSTALL_HINT = ("install Debian's Chromium: sudo apt-get install chromium "
                "(or set MLSYS_CHROMIUM to a Chromium binary)")
# Flags for a machine with no display, no GPU and no network beyond loopback.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    """$MLSYS_CHROMIUM, else Debian's Chromium; None when neither is an executable."""
    candidates = [os.environ.get("MLSYS_CHROMIUM")] + CHROMIUM_PATHS
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def html_to_png(html_path, png_path, width: int = 1400, height: int = 700,
                settle_ms: int = 200) -> Path:
    """Open the self-contained page `html_path` in headless Chromium and save its full page as
    `png_path`. Scripts run first (the page's own JS lays it out), then `settle_ms` pass."""
    html_path, png_path = Path(html_path).resolve(), Path(png_path)
    if not html_path.is_file():
        raise FileNotFoundError(f"no HTML page at {html_path}")
    chromium = find_chromium()
    if chromium is None:
        raise RuntimeError(f"PNG export needs Chromium, and none was found: {INSTALL_HINT}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        raise RuntimeError("PNG export of HTML views needs Playwright: "
                           "pip install -e '.[dev]' (make lab does)") from error
    def shoot():
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(html_path.as_uri(), wait_until="load")
                page.wait_for_timeout(settle_ms)
                page.screenshot(path=str(png_path), full_page=True)
            finally:
                browser.close()

    # Playwright's sync API refuses to run where an asyncio loop is running, as in a Jupyter
    # kernel's main thread: a thread of its own has none.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(shoot).result()
    return png_path
