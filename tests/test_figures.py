"""`save_figure` and `make_figures`: a figure notebook run by the runner leaves its figures as
HTML and PNG files and a manifest entry; the PNG really is a picture of the figure's size."""

import json
import struct

import nbformat
import plotly.graph_objects as go

from mlsys_workbench.figures import make_figures, save_figure


def png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def test_save_figure_writes_html_png_and_manifest(tmp_path):
    fig = go.Figure(go.Bar(x=["none", "tflms"], y=[1, 4.7]))
    entry = save_figure(fig, "batch_ratio", claim="4.7x", value=4.2, params={"batch": 8},
                        seed=0, out_dir=tmp_path)
    assert entry["files"] == ["batch_ratio.html", "batch_ratio.png"]
    html = (tmp_path / "batch_ratio.html").read_text()
    assert "plotly.js" in html.lower() or "Plotly.newPlot" in html  # self-contained
    assert "<script src=\"http" not in html  # nothing to fetch when opened offline
    assert png_size(tmp_path / "batch_ratio.png") == (1100, 650)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["figures"]["batch_ratio"]["claim"] == "4.7x"
    assert manifest["figures"]["batch_ratio"]["value"] == 4.2
    assert manifest["versions"]["plotly"] and manifest["machine"]["cpus"] >= 1


def test_bad_figure_name_is_refused(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="figure name"):
        save_figure(go.Figure(), "../escape", out_dir=tmp_path, png=False)


def test_make_figures_runs_marked_notebooks(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["mlsys"] = {"figures": True}
    nb.cells = [
        nbformat.v4.new_code_cell("SMOKE = 0", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import plotly.graph_objects as go\n"
            "from mlsys_workbench.figures import save_figure\n"
            "save_figure(go.Figure(go.Scatter(y=[1, 2])), 'line', value=SMOKE, png=False)"
        ),
    ]
    path = tmp_path / "fig.ipynb"
    nbformat.write(nb, path)
    manifest = make_figures(tmp_path / "out", smoke=True, notebooks=[path])
    assert manifest["notebooks"] == ["fig.ipynb"]
    assert manifest["figures"]["line"]["value"] == 1  # the smoke parameter reached the notebook
    assert manifest["figures"]["line"]["notebook"] == "fig.ipynb"
    assert (tmp_path / "out" / "line.html").stat().st_size > 0
    report = (tmp_path / "out" / "REPORT.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| line "))
    assert "fig.ipynb" in row and "| 1 |" in row  # our value, from the smoke run
