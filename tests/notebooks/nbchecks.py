"""What a smoke run of a notebook must show, checked on an executed notebook.

Shared by tests/notebooks/test_notebooks.py (the notebooks it runs itself) and
tests/test_make_figures.py (the figure notebooks, which `make figures SMOKE=1` has already run:
running them twice would cost the suite about nine minutes)."""

from mlsys_workbench.notebooks import cell_seconds

# A safety net, not a measurement: a notebook at SMOKE=1 takes 10-200 s on a quiet 2-core
# machine, and the suite must pass on a busy one too (another job holding a core). A cell that
# runs past CELL_LIMIT_S, or a notebook whose cells together pass NOTEBOOK_LIMIT_S, has hung or
# lost its smoke size.
CELL_LIMIT_S = 600
NOTEBOOK_LIMIT_S = 1200


def smoke_run_problems(nb, name: str) -> list[str]:
    """Why the executed notebook ``nb`` (file ``name``) is not a good smoke run; [] if it is."""
    problems = []
    errors = [
        (i, out.get("text", ""))
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.get("name") == "stderr" and "Traceback" in out.get("text", "")
    ]
    if errors:
        problems.append(f"{name}: tracebacks printed in cells {errors}")
    # The net covers the notebook's own work: its cells. Starting and stopping the kernel are
    # bounded by nbclient's own timeouts.
    timed = cell_seconds(nb)
    in_cells = sum(s for _, s in timed)
    if in_cells >= NOTEBOOK_LIMIT_S:
        slowest = ", ".join(f"cell {i}: {s:.0f} s"
                            for i, s in sorted(timed, key=lambda t: -t[1])[:3])
        problems.append(f"{name}: cells took {in_cells:.0f} s at SMOKE=1 ({slowest})")
    return problems
