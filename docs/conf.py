"""Sphinx configuration of the documentation site that `make docs` builds into docs/_build/html.

Sphinx with myst-nb: the pages of docs/ (MyST Markdown), an API reference that autosummary
generates from the docstrings (docs/api/), and the notebooks, executed at SMOKE=1 while the site
is built. ``docs/notebooks`` is a link to ``../notebooks`` so the notebooks stay where they are.

Nothing here reaches the network, at build time or when a page is read: the theme (furo) comes
from its package, plotly.js from the installed plotly, the widget manager that renders stored
widget state from docs/_static/widgets/ (see VENDORED.txt there), and intersphinx is not used.

``DOCS_NOTEBOOKS`` picks the notebooks to execute: ``all`` (the default), ``none``, or their
number prefixes, ``00,03``. The others are shown as stored, without outputs, with a note saying
so. (``make docs NOTEBOOKS=00,03`` sets it.) ``DOCS_API`` picks the packages whose API pages
are built (``all``, the default, or names: ``mlsys_workbench,mlsys_viz``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nbformat

from mlsys_workbench.notebooks import inject_parameters

DOCS = Path(__file__).resolve().parent
NOTEBOOKS = DOCS / "notebooks"
SELECTION_ENV = "DOCS_NOTEBOOKS"

project = "ML Systems Workbench"
author = "ML Systems Workbench contributors"
copyright = "the ML Systems Workbench contributors"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary"]
exclude_patterns = [
    "_build", "_static", "**/.ipynb_checkpoints", "notebooks/figures", "notebooks/*/**",
]
# The pages link to each other as files (`[figures.md](figures.md)`); MyST resolves those, and
# `page.md#heading` needs the headings' anchors.
myst_heading_anchors = 3

html_theme = "furo"
html_title = "ML Systems Workbench"
html_static_path = ["_static"]
html_show_sourcelink = False
html_copy_source = False
html_favicon = "_static/favicon.svg"

# --- API reference: a page per package in docs/api/; autosummary writes a page per public
# module into docs/api/generated/ (ignored by git) and autodoc documents its members there.
# DOCS_API=mlsys_workbench,mlsys_viz builds only those packages' pages (the browser test does:
# all of them take a few minutes).
API_PACKAGES = ["lmskit", "compilerkit", "segkit", "mlsys_viz", "mlsys_workbench"]
API_ENV = "DOCS_API"


def selected_packages(value: str | None) -> list[str]:
    value = (value or "all").strip()
    if value == "all":
        return API_PACKAGES
    chosen = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in API_PACKAGES]
    if unknown:
        raise ValueError(f"{API_ENV}={value!r}: no package {unknown[0]!r} "
                         f"(packages: {', '.join(API_PACKAGES)}; or 'all')")
    return chosen


API = selected_packages(os.environ.get(API_ENV))
autosummary_generate = [f"api/{name}.md" for name in API]
for name in sorted(set(API_PACKAGES) - set(API)):
    exclude_patterns += [f"api/{name}.md", f"api/generated/{name}.rst",
                         f"api/generated/{name}.*.rst"]
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
# Docstrings show signatures with the types as written; resolving every annotation to a link
# only adds warnings for the third-party types (xDSL, onnx, numpy) that have no pages here.
autodoc_typehints = "signature"
autodoc_typehints_format = "short"

# --- Notebooks: executed by myst-nb (nbclient) where DOCS_NOTEBOOKS selects them, in their own
# folder as in JupyterLab, with a failing cell failing the build and naming the notebook.
nb_execution_mode = "off"          # per notebook: "force" where selected (prepare_notebook)
nb_execution_timeout = 900         # per cell; at SMOKE=1 every cell takes far less
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# The widget manager that renders stored widget state, from this folder rather than a CDN:
# require.js first (embed-amd.js is an AMD module).
nb_ipywidgets_js = {"widgets/require.js": {}, "widgets/embed-amd.js": {}}

# Run first in every executed notebook, and not shown: plotly figures become HTML that draws
# with the page's one copy of plotly.js (plotly's own notebook renderers embed 4.8 MB of it per
# notebook, or load it and MathJax from a CDN).
PLOTLY_SETUP = '''\
import plotly.io as _pio
from plotly.io.base_renderers import MimetypeRenderer as _MimetypeRenderer


class _SiteRenderer(_MimetypeRenderer):
    def to_mimebundle(self, fig_dict):
        html = _pio.to_html(fig_dict, include_plotlyjs=False, include_mathjax=False,
                            full_html=False, default_width="100%", validate=False)
        return {"text/html": html}


_pio.renderers["docs_site"] = _SiteRenderer()
_pio.renderers.default = "docs_site"
'''

UNEXECUTED_NOTE = (
    "```{note}\nThis page shows the notebook as stored, without outputs: this build of the site "
    "did not execute it (`make docs` without `NOTEBOOKS=` executes every notebook at "
    "`SMOKE=1`).\n```"
)


def notebook_names() -> list[str]:
    return sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def selected_notebooks(value: str | None, names: list[str]) -> set[str]:
    """The notebooks ``value`` (DOCS_NOTEBOOKS) picks: ``all``/empty, ``none`` or prefixes."""
    value = (value or "all").strip()
    if value == "all":
        return set(names)
    if value == "none":
        return set()
    chosen = set()
    for token in (t.strip() for t in value.split(",")):
        if not token:
            continue
        matches = {n for n in names if n == token or n.split("_", 1)[0] == token
                   or n.removesuffix(".ipynb") == token}
        if not matches:
            prefixes = ", ".join(n.split("_", 1)[0] for n in names)
            raise ValueError(f"{SELECTION_ENV}={value!r}: no notebook {token!r} in "
                             f"{NOTEBOOKS.resolve()} (numbers: {prefixes}; or 'all', 'none')")
        chosen |= matches
    return chosen


EXECUTED = selected_notebooks(os.environ.get(SELECTION_ENV), notebook_names())


def prepare_notebook(app, docname: str, source: list[str]) -> None:
    """Before myst-nb reads a notebook: a selected one gets ``SMOKE = 1`` injected after its
    parameters cell (as the test suite runs it) and the hidden plotly set-up cell, and is
    executed; any other is shown as stored under a note that says so."""
    if not docname.startswith("notebooks/"):
        return
    name = docname.split("/", 1)[1] + ".ipynb"
    nb = nbformat.reads(source[0], as_version=4)
    if name in EXECUTED:
        inject_parameters(nb, {"SMOKE": 1})
        setup = nbformat.v4.new_code_cell(PLOTLY_SETUP)
        setup.metadata["tags"] = ["remove-cell"]
        nb.cells.insert(0, setup)
        nb.metadata["mystnb"] = {"execution_mode": "force"}
    else:
        title = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        nb.cells.insert(title, nbformat.v4.new_markdown_cell(UNEXECUTED_NOTE))
        nb.metadata["mystnb"] = {"execution_mode": "off"}
    source[0] = nbformat.writes(nb)


# Copied from the installed packages into _static/vendor/ when the site is written.
def vendor_files() -> dict[str, Path]:
    import anywidget
    import plotly

    return {
        "plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
        # anywidget's AMD build (FigureWidget and the other anywidgets load through it).
        "anywidget.js": Path(anywidget.__file__).parent / "nbextension" / "index.js",
    }


# The modules embed-amd.js defines: each finds its fonts beside the URL require.js gives its
# name, so those URLs must lead to _static/widgets/ (by default they lead next to the page).
WIDGET_MODULES = [
    "@jupyter-widgets/base", "@jupyter-widgets/base7", "@jupyter-widgets/controls",
    "@jupyter-widgets/controls7", "@jupyter-widgets/html-manager",
    "@jupyter-widgets/html-manager/dist/libembed-amd",
]


def requirejs_paths(pathto) -> str:
    """require.js configuration, set before require.js loads (embed-amd.js starts rendering as
    soon as it loads): anywidget from _static/vendor/, the widget modules' URLs in
    _static/widgets/."""
    widgets = pathto("_static/widgets", 1)
    paths = {name: f"{widgets}/{name.rsplit('/', 1)[-1]}" for name in WIDGET_MODULES}
    paths["anywidget"] = pathto("_static/vendor/anywidget", 1)
    return f"var require = {{paths: {json.dumps(paths)}}};"


def add_page_assets(app, pagename, templatename, context, doctree) -> None:
    """plotly.js in the head of pages that draw plotly figures (furo puts script files at the
    end of the body, after the figures' own scripts that call it, and before require.js it
    would register as an anonymous AMD module, leaving `Plotly` undefined); and where widgets
    are, require.js's configuration (before require.js, priority 500)."""
    body = context.get("body", "")
    pathto = context["pathto"]
    if "plotly-graph-div" in body or "widget-view+json" in body:
        plotly_js = pathto("_static/vendor/plotly.min.js", 1)
        context["metatags"] = (context.get("metatags") or "") + (
            f'\n<script src="{plotly_js}"></script>')
    if "widget-view+json" in body:
        app.add_js_file(None, priority=490, body=requirejs_paths(pathto))


def copy_vendor_files(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "vendor"
    target.mkdir(parents=True, exist_ok=True)
    for name, path in vendor_files().items():
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the site needs it as _static/vendor/"
                                    f"{name}; reinstall its package (make docs does)")
        shutil.copyfile(path, target / name)


def setup(app):
    # Kernels inherit this process's environment: the notebooks that read SMOKE from it (those
    # run in the browser tests) run small too; nobody watches progress bars in a docs build; and
    # the figures that notebooks record for `make figures` go into the build folder, not into
    # notebooks/figures/.
    os.environ["SMOKE"] = "1"
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["MLSYS_FIGURES_DIR"] = str(Path(app.doctreedir) / "notebook-figures")
    app.connect("source-read", prepare_notebook)
    app.connect("html-page-context", add_page_assets)
    app.connect("build-finished", copy_vendor_files)
