"""`make docs`: the site builds, and its pages work in headless Chromium.

The browser test builds the site as `make docs` does, into a temporary folder, with one cheap
notebook executed (00_tour: a plotly figure and a widget) and the API pages of one small package,
then serves it on a loopback port and checks in Chromium that pages load without console errors,
that a plotly figure draws (an svg inside a .plotly-graph-div) and that a widget renders from the
stored widget state. Without Chromium or the `docs` extra it skips and says how to get them; in
CI it fails instead.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
DOCS_HINT = "install the docs extra: .venv/bin/pip install -e '.[docs]' (make docs does)"


@functools.cache
def load_conf():
    """docs/conf.py as a module (importing it changes nothing outside it)."""
    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- The selections the build takes from the environment (cheap) ---------------------------

NAMES = ["00_tour.ipynb", "03_swap_rewrite.ipynb", "30_watershed_single_linkage.ipynb"]


def test_notebook_selection():
    conf = load_conf()
    assert conf.selected_notebooks(None, NAMES) == set(NAMES)
    assert conf.selected_notebooks("all", NAMES) == set(NAMES)
    assert conf.selected_notebooks("none", NAMES) == set()
    assert conf.selected_notebooks("00, 30", NAMES) == {NAMES[0], NAMES[2]}
    assert conf.selected_notebooks("03_swap_rewrite.ipynb", NAMES) == {NAMES[1]}
    with pytest.raises(ValueError, match=r"DOCS_NOTEBOOKS='00,99': no notebook '99'.*00, 03, 30"):
        conf.selected_notebooks("00,99", NAMES)


def test_api_selection():
    conf = load_conf()
    assert conf.selected_packages(None) == conf.API_PACKAGES
    assert conf.selected_packages("mlsys_viz, segkit") == ["mlsys_viz", "segkit"]
    with pytest.raises(ValueError, match=r"DOCS_API='lmskit,numpy': no package 'numpy'"):
        conf.selected_packages("lmskit,numpy")


def test_every_package_has_an_api_page():
    conf = load_conf()
    pages = sorted(p.stem for p in (DOCS / "api").glob("*.md") if p.stem != "index")
    assert pages == sorted(conf.API_PACKAGES)


def test_vendored_widget_manager_is_complete():
    """The fonts embed-amd.js asks for (by name, beside itself) are all there."""
    import re

    widgets = DOCS / "_static" / "widgets"
    wanted = set(re.findall(r"[0-9a-f]{20}\.woff2", (widgets / "embed-amd.js").read_text()))
    assert wanted and wanted <= {p.name for p in widgets.glob("*.woff2")}
    assert (widgets / "require.js").is_file()


# --- The site in Chromium (slow) ------------------------------------------------------------

def build_site(out: Path) -> Path:
    if importlib.util.find_spec("myst_nb") is None or importlib.util.find_spec("furo") is None:
        if os.environ.get("CI"):
            pytest.fail(f"the docs test must run in CI, but the docs extra is missing: {DOCS_HINT}")
        pytest.skip(f"no Sphinx/myst-nb/furo: {DOCS_HINT}")
    env = {**os.environ, "DOCS_NOTEBOOKS": "00", "DOCS_API": "mlsys_workbench"}
    html = out / "html"
    command = [sys.executable, "-m", "sphinx", "-E", "-q", "-b", "html", str(DOCS), str(html),
               "-d", str(out / "doctrees")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stdout[-3000:]}\n" \
                                   f"{result.stderr[-6000:]}"
    return html


@pytest.fixture(scope="module")
def site(tmp_path_factory, chromium):
    """The built site, served on a free loopback port: its base URL (`chromium`: skip, or fail
    in CI, before the build when there is no Chromium)."""
    html = build_site(tmp_path_factory.mktemp("docs"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


# `browser` is the session's Chromium (tests/browser/conftest.py): a second Playwright in the same
# process would find the first one's event loop running and refuse.


def open_page(browser, url: str):
    """The page at `url` once loaded, and the list its console errors are collected into."""
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.goto(url, wait_until="load")
    return page, problems


PAGES = ["index.html", "setup.html", "DESIGN.html", "notebooks/10_onnx_to_native.html",
         "api/index.html", "api/generated/mlsys_workbench.notebooks.html"]


@pytest.mark.slow
@pytest.mark.browser
def test_site_pages_load_without_errors(site, browser):
    for name in PAGES:
        page, problems = open_page(browser, site + name)
        page.wait_for_timeout(500)
        assert page.locator("article h1").count() >= 1, f"{name}: no page title"
        assert not problems, f"{name}: {problems}"
        page.close()


@pytest.mark.slow
@pytest.mark.browser
def test_executed_notebook_shows_a_plotly_figure_and_a_widget(site, browser):
    page, problems = open_page(browser, site + "notebooks/00_tour.html")
    # The pipelines figures: plotly.js drew every figure on the page (an svg in each
    # .plotly-graph-div).
    page.wait_for_selector(".cell_output .plotly-graph-div .main-svg", timeout=30_000)
    # The stage picker: the widget manager built it from the stored state, with the value the
    # notebook left it at, and the caption beside it.
    picker = page.locator(".cell_output .widget-dropdown select")
    picker.wait_for(timeout=60_000)
    assert picker.input_value() == "Kernel IR"
    assert "Kernel IR" in page.locator(".cell_output .widget-html").inner_text()
    drawn = page.eval_on_selector_all(
        ".plotly-graph-div", "divs => divs.map(d => d.querySelector('.main-svg') !== null)")
    assert drawn and all(drawn), f"figures drawn: {drawn}"
    # require.js was configured before it loaded: the widget modules find their fonts in
    # _static/widgets/, and anywidget (plotly's FigureWidget) loads from _static/vendor/.
    assert "_static/widgets/base" in page.evaluate("() => require.toUrl('@jupyter-widgets/base')")
    anywidget = page.evaluate("() => fetch(require.toUrl('anywidget') + '.js').then(r => r.status)")
    assert anywidget == 200
    # The injected SMOKE = 1 shows, and the hidden plotly set-up cell does not.
    text = page.locator("article").inner_text()
    assert "SMOKE = 1" in text and "_SiteRenderer" not in text
    page.wait_for_timeout(500)
    assert not problems, problems
    page.close()


@pytest.mark.slow
@pytest.mark.browser
def test_unexecuted_notebook_says_so(site, browser):
    page, problems = open_page(browser, site + "notebooks/10_onnx_to_native.html")
    assert "did not execute it" in page.locator("article").inner_text()
    assert page.locator(".cell_output").count() == 0
    assert not problems, problems
    page.close()
