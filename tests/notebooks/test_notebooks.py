"""Every notebook runs top to bottom at smoke size in a real kernel, and is stored clean."""

from pathlib import Path

import nbformat
import pytest
from nbchecks import CELL_LIMIT_S, smoke_run_problems

from mlsys_workbench.figures import figure_notebooks
from mlsys_workbench.notebooks import (
    LibraryWarning,
    NotebookError,
    cell_seconds,
    has_outputs,
    parameters_cell_index,
    run_notebook,
)

REPO = Path(__file__).resolve().parents[2]

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# The figure notebooks run once, in tests/test_make_figures.py (`make figures SMOKE=1`), which
# applies the same smoke checks to the executed copies that run leaves.
FIGURE_NOTEBOOKS = {p.name for p in figure_notebooks()}
OTHER_NOTEBOOKS = [p for p in NOTEBOOKS if p.name not in FIGURE_NOTEBOOKS]


def test_there_are_notebooks():
    assert (REPO / "notebooks" / "00_tour.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs(path):
    cells = has_outputs(nbformat.read(path, as_version=4))
    assert not cells, f"{path.name}: cells {cells} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_has_an_id(path):
    """nbformat 4.5 cell ids: without them every read prints a MissingIDFieldWarning (log noise
    in `make figures`), and a future nbformat refuses the file."""
    import json

    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    missing = [i for i, cell in enumerate(cells) if "id" not in cell]
    assert not missing, f"{path.name}: cells {missing} have no id"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_solutions_are_folded(path):
    """An exercise's solution opens collapsed in JupyterLab, so reading on does not give it away."""
    nb = nbformat.read(path, as_version=4)
    open_solutions = [
        i for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and any(line.lstrip().startswith("# Solution") for line in cell.source.splitlines())
        and not (cell.metadata.get("jupyter", {}).get("source_hidden")
                 and cell.metadata.get("jupyter", {}).get("outputs_hidden"))
    ]
    assert not open_solutions, (f"{path.name}: solution cells {open_solutions} are not folded "
                                "(metadata jupyter.source_hidden and outputs_hidden)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_has_a_parameters_cell_with_smoke(path):
    nb = nbformat.read(path, as_version=4)
    index = parameters_cell_index(nb)
    assert index is not None, f"{path.name}: no cell tagged 'parameters'"
    assert "SMOKE" in nb.cells[index].source, f"{path.name}: parameters cell does not set SMOKE"


@pytest.mark.parametrize("path", OTHER_NOTEBOOKS, ids=lambda p: p.name)
def test_runs_at_smoke_size(path, tmp_path):
    nb = run_notebook(path, parameters={"SMOKE": 1}, timeout=CELL_LIMIT_S,
                      env={"MLSYS_FIGURES_DIR": str(tmp_path / "figures")})
    assert not smoke_run_problems(nb, path.name)


def test_figure_notebooks_are_marked():
    """The split above leaves the figure notebooks to `make figures SMOKE=1`: there must be
    some, and the others must still be run here."""
    assert FIGURE_NOTEBOOKS and OTHER_NOTEBOOKS


def _parameterised_notebook(path, *cells):
    """A notebook at `path`: a tagged parameters cell `SMOKE = 0`, then `cells`."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("SMOKE = 0", metadata={"tags": ["parameters"]}),
                *cells]
    nbformat.write(nb, path)
    return path


def test_a_failing_cell_is_named(tmp_path):
    path = _parameterised_notebook(
        tmp_path / "broken.ipynb", nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("assert SMOKE == 0, 'parameter was injected'"))
    run_notebook(path)  # defaults hold
    with pytest.raises(NotebookError) as error:
        run_notebook(path, parameters={"SMOKE": 1})
    message = str(error.value)
    assert "broken.ipynb" in message and "cell 3" in message and "parameter was injected" in message


def test_cell_seconds_times_each_cell_apart_from_kernel_start(tmp_path):
    path = _parameterised_notebook(
        tmp_path / "sleepy.ipynb", nbformat.v4.new_markdown_cell("no timing for prose"),
        nbformat.v4.new_code_cell("import time; time.sleep(1.5)"))
    timed = dict(cell_seconds(run_notebook(path)))
    assert set(timed) == {0, 2}
    assert 1.5 <= timed[2] < 10 and timed[0] < 1.0


def _notebook(tmp_path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("SMOKE = 0", metadata={"tags": ["parameters"]})]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    path = tmp_path / "warns.ipynb"
    nbformat.write(nb, path)
    return path


# Code run as if it were a module of our libraries (or of someone else's): warnings.warn looks
# at the caller's globals, so __name__ decides who issued the warning.
ISSUED_BY = (
    "import warnings\n"
    "exec(compile('import warnings\\nwarnings.warn(\"{text}\", stacklevel={level})', "
    "'{file}', 'exec'), {{'__name__': '{module}'}})"
)


@pytest.mark.parametrize("module, level", [("lmskit.schedule", 1), ("compilerkit.lowering", 2)])
def test_a_warning_from_our_libraries_fails_the_run(tmp_path, module, level):
    # stacklevel=2 attributes the warning to the notebook cell: the issuer still counts.
    source = ISSUED_BY.format(text="tensor t0 has no size", level=level, file="fake.py",
                              module=module)
    path = _notebook(tmp_path, "x = 1", source)
    with pytest.raises(LibraryWarning) as error:
        run_notebook(path)
    message = str(error.value)
    assert "warns.ipynb" in message and "cell 2" in message
    assert module in message and "tensor t0 has no size" in message
    # The same notebook passes when warnings are explicitly allowed.
    run_notebook(path, allow_library_warnings=True)


def test_a_logged_warning_of_our_libraries_fails_the_run(tmp_path):
    source = "import logging\nlogging.getLogger('mlsys_datasets.brats').warning('side 7 is odd')"
    with pytest.raises(LibraryWarning, match="mlsys_datasets.brats: WARNING: side 7 is odd"):
        run_notebook(_notebook(tmp_path, source))


def test_warnings_of_other_libraries_are_left_alone(tmp_path):
    foreign = ISSUED_BY.format(text="deprecated", level=1, file="other.py", module="otherlib")
    info = "import logging\nlogging.getLogger('lmskit').info('only info')"
    nb = run_notebook(_notebook(tmp_path, foreign, info))
    printed = "".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []))
    assert "deprecated" in printed  # it was shown, and did not fail the run


def test_a_headless_run_stores_no_progress_bars(tmp_path):
    # tqdm's notebook bar takes an explicit disable=False (our progress=True) over TQDM_DISABLE;
    # a headless run would otherwise store one widget frozen at "0%" per loop.
    bars = ("from tqdm.auto import tqdm, trange\n"
            "total = sum(tqdm(range(3), disable=False)) + sum(trange(2))\n"
            "with tqdm(total=4, desc='chunk tasks') as bar:\n"
            "    bar.update(4)\n"
            "print('total', total)")
    nb = run_notebook(_notebook(tmp_path, bars))
    outputs = nb.cells[-1].outputs
    assert [out.get("text") for out in outputs] == ["total 4\n"], outputs
    # Asked for, bars are kept (a reader of the stored notebook asked to see them).
    nb = run_notebook(_notebook(tmp_path, bars), env={"TQDM_DISABLE": "0"})
    assert any(out.output_type == "display_data" for out in nb.cells[-1].outputs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_that_draw_with_plotly_use_the_projector_template(path):
    """A figure drawn with plotly directly gets plotly's default look (12 px grey) unless the
    notebook imports mlsys_viz.theme, which makes the "mlsys" template the default."""
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code")
    if "import plotly" in code:
        assert "import mlsys_viz.theme" in code, f"{path.name} draws with plotly: import mlsys_viz.theme"
