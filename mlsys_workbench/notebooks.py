"""Run a notebook headless, papermill-style, and report failures by notebook and cell.

A notebook marks one code cell with the tag ``parameters`` (as papermill does); its assignments
are the defaults (``SMOKE = 0`` for full size).  ``run_notebook`` inserts a cell right after it
that overrides them, executes every cell in a real Jupyter kernel with nbclient, and returns the
executed notebook.  A failing cell raises ``NotebookError`` naming the notebook, the cell number
and the first lines of its source, so a test failure reads like "02_tensor_lifetimes.ipynb,
cell 7: ...".
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

PARAMETERS_TAG = "parameters"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
INJECTED_TAG = "injected-parameters"


class NotebookError(RuntimeError):
    """A notebook cell failed; the message names the notebook and the cell."""


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
) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` top to bottom and return it with outputs.

    ``parameters`` override the defaults of the ``parameters`` cell.  The kernel runs in
    ``cwd`` (the notebook's folder by default, as in JupyterLab) with ``env`` added to the
    environment.  Raises ``NotebookError`` naming the notebook and the failing cell.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    nb = nbformat.read(path, as_version=4)
    if parameters:
        inject_parameters(nb, parameters)
    kernel_env = {**os.environ, **(env or {})}
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
    return nb


def has_outputs(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of code cells that carry outputs or execution counts (notebooks are stored clean)."""
    return [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
