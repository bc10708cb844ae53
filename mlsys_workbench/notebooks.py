"""Run a notebook headless, papermill-style, and report failures by notebook and cell.

A notebook marks one code cell with the tag ``parameters`` (as papermill does); its assignments
are the defaults (``SMOKE = 0`` for full size).  ``run_notebook`` inserts a cell right after it
that overrides them, executes every cell in a real Jupyter kernel with nbclient, and returns the
executed notebook.  A failing cell raises ``NotebookError`` naming the notebook, the cell number
and the first lines of its source, so a test failure reads like "02_tensor_lifetimes.ipynb,
cell 7: ...".

Warnings from the workbench's own libraries fail the run too (``LibraryWarning``): an IPython
startup file, given to the kernel through ``IPYTHONDIR``, marks every Python warning issued from
``lmskit``, ``compilerkit``, ``mlsys_workbench`` or ``mlsys_datasets`` code, and every record
their loggers emit at WARNING or above.  Warnings that other libraries issue (TensorFlow's own
stderr lines, for instance) are left alone: we cannot fix those.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

PARAMETERS_TAG = "parameters"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
INJECTED_TAG = "injected-parameters"


OUR_PACKAGES = ("lmskit", "compilerkit", "mlsys_workbench", "mlsys_datasets")
WARNING_MARK = "MLSYS-LIBRARY-WARNING"
# Runs in the kernel before the first cell.  The module that *issued* a warning is the innermost
# frame outside the warnings machinery; stacklevel may attribute the warning to the caller (a
# notebook cell), so both the issuer and the attributed file are checked.
WATCH_WARNINGS = f"""
import logging as _logging
import os as _os
import sys as _sys
from importlib.util import find_spec as _find_spec
import warnings as _warnings

_OURS = {OUR_PACKAGES!r}
_show = _warnings.showwarning
# Where our packages live (find_spec does not import them): a warning attributed to a file in
# there came from our code even when the issuer was, say, numpy warning about our call.
_ROOTS = tuple(
    _os.path.join(_root, "")
    for _spec in map(_find_spec, _OURS) if _spec and _spec.submodule_search_locations
    for _root in _spec.submodule_search_locations
)


def _ours(name):
    return (name or "").split(".")[0] in _OURS


def _mlsys_showwarning(message, category, filename, lineno, file=None, line=None):
    frame = _sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == "warnings":
        frame = frame.f_back
    issuer = frame.f_globals.get("__name__", "") if frame is not None else ""
    attributed = str(filename).startswith(_ROOTS) if _ROOTS else False
    if _ours(issuer) or attributed:
        print(f"{WARNING_MARK} {{issuer or filename}}:{{lineno}}: "
              f"{{category.__name__}}: {{message}}", file=_sys.stderr)
    _show(message, category, filename, lineno, file, line)


class _MlsysLogWatch(_logging.Handler):
    def emit(self, record):
        print(f"{WARNING_MARK} {{record.name}}: {{record.levelname}}: {{record.getMessage()}}",
              file=_sys.stderr)


_warnings.showwarning = _mlsys_showwarning
for _name in _OURS:
    _logging.getLogger(_name).addHandler(_MlsysLogWatch(level=_logging.WARNING))
"""


# Runs in the kernel before the first cell when TQDM_DISABLE is set (run_notebook sets it).
# tqdm's notebook bar, the one tqdm.auto gives a kernel, takes an explicit ``disable=False``
# (our ``progress=True``) over TQDM_DISABLE, and a headless run then stores a widget frozen at
# "0%" per loop; nobody watches a headless run, so every tqdm.auto bar is made a disabled one.
QUIET_BARS = """
import os as _os
if _os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes"):
    import tqdm.auto as _tqdm_auto

    class _HeadlessBar(_tqdm_auto.tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    _tqdm_auto.tqdm = _HeadlessBar
    _tqdm_auto.trange = lambda *args, **kwargs: _HeadlessBar(range(*args), **kwargs)
"""


class NotebookError(RuntimeError):
    """A notebook cell failed; the message names the notebook and the cell."""


class LibraryWarning(NotebookError):
    """A cell printed a warning issued by one of the workbench's own libraries."""


def _headless_ipython_dir(watch_warnings: bool) -> str:
    """A fresh IPYTHONDIR whose default profile quiets progress bars (QUIET_BARS) and, when
    ``watch_warnings``, runs WATCH_WARNINGS at kernel start."""
    root = tempfile.mkdtemp(prefix="mlsys-ipython-")
    startup = Path(root) / "profile_default" / "startup"
    startup.mkdir(parents=True)
    if watch_warnings:
        (startup / "00-mlsys-watch-warnings.py").write_text(WATCH_WARNINGS)
    (startup / "01-mlsys-quiet-bars.py").write_text(QUIET_BARS)
    return root


def library_warnings(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, line) for every warning of our libraries a cell printed."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                found += [(index, line) for line in out.get("text", "").splitlines()
                          if line.startswith(WARNING_MARK)]
    return found


def parameters_cell_index(nb: nbformat.NotebookNode) -> int | None:
    """Index of the cell tagged ``parameters``, or None when the notebook has none."""
    for index, cell in enumerate(nb.cells):
        if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", []):
            return index
    return None


def inject_parameters(nb: nbformat.NotebookNode, parameters: dict) -> nbformat.NotebookNode:
    """Insert a cell assigning ``parameters`` after the ``parameters`` cell (or at the top).

    Values are written with ``repr`` so only plain Python literals are accepted.
    """
    for name, value in parameters.items():
        if not name.isidentifier():
            raise ValueError(f"parameter name {name!r} is not a Python identifier")
        try:
            plain = ast.literal_eval(repr(value)) == value
        except (ValueError, SyntaxError):
            plain = False
        if not plain:
            raise ValueError(f"parameter {name}={value!r} is not a plain literal")
    lines = ["# Parameters injected by mlsys_workbench.notebooks.run_notebook"]
    lines += [f"{name} = {value!r}" for name, value in parameters.items()]
    cell = nbformat.v4.new_code_cell("\n".join(lines))
    cell.metadata["tags"] = [INJECTED_TAG]
    at = parameters_cell_index(nb)
    nb.cells.insert(0 if at is None else at + 1, cell)
    return nb


def _cell_label(nb: nbformat.NotebookNode, index: int) -> str:
    source = nb.cells[index].source.strip().splitlines()
    head = source[0] if source else "(empty cell)"
    return f"cell {index} ({head[:80]!r})"


def run_notebook(
    path: str | os.PathLike,
    parameters: dict | None = None,
    timeout: int = 600,
    cwd: str | os.PathLike | None = None,
    env: dict | None = None,
    allow_library_warnings: bool = False,
) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` top to bottom and return it with outputs.

    ``parameters`` override the defaults of the ``parameters`` cell.  The kernel runs in
    ``cwd`` (the notebook's folder by default, as in JupyterLab) with ``env`` added to the
    environment.  Raises ``NotebookError`` naming the notebook and the failing cell, and
    ``LibraryWarning`` when a cell printed a warning of our libraries (unless allowed).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    nb = nbformat.read(path, as_version=4)
    if parameters:
        inject_parameters(nb, parameters)
    kernel_env = {**os.environ, **(env or {})}
    # Nobody watches a headless run's progress bars: they would only fill the stored outputs.
    kernel_env.setdefault("TQDM_DISABLE", "1")
    kernel_env["IPYTHONDIR"] = _headless_ipython_dir(watch_warnings=not allow_library_warnings)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or path.parent)}},
    )
    # nbclient passes extra keyword arguments of start_new_kernel to the kernel manager.
    current = {"index": None}

    def remember(cell, cell_index, **_):
        current["index"] = cell_index

    client.on_cell_start = remember
    try:
        client.execute(env=kernel_env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
        where = _cell_label(nb, current["index"]) if current["index"] is not None else "startup"
        # Kernel tracebacks are coloured for terminals; a test report reads better without.
        message = ANSI_ESCAPE.sub("", str(error))
        raise NotebookError(f"{path.name}, {where}: {message}") from None
    finally:
        shutil.rmtree(kernel_env["IPYTHONDIR"], ignore_errors=True)
    warned = [] if allow_library_warnings else library_warnings(nb)
    if warned:
        listing = "; ".join(f"{_cell_label(nb, i)}: {line}" for i, line in warned[:5])
        raise LibraryWarning(f"{path.name}: our libraries printed warnings: {listing}")
    return nb


def has_outputs(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of code cells that carry outputs or execution counts (notebooks are stored clean)."""
    return [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]


def cell_seconds(nb: nbformat.NotebookNode) -> list[tuple[int, float]]:
    """(cell index, seconds) for every executed code cell, from nbclient's timing metadata.

    A cell's time runs from the kernel taking its input to the kernel going idle after it;
    the kernel's start and shutdown are not in any cell.
    """
    from datetime import datetime

    timed = []
    for index, cell in enumerate(nb.cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        begin, end = stamps.get("iopub.execute_input"), stamps.get("iopub.status.idle")
        if cell.cell_type == "code" and begin and end:
            seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                       - datetime.fromisoformat(begin.replace("Z", "+00:00"))).total_seconds()
            timed.append((index, seconds))
    return timed
