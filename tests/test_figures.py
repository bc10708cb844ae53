"""`save_figure` and `make_figures`: a figure notebook run by the runner leaves its figures as
HTML and PNG files and a manifest entry; the PNG really is a picture of the figure's size."""

import json
import logging
import struct

import nbformat
import plotly.graph_objects as go

from mlsys_workbench import figures
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


def test_save_figure_without_chromium_keeps_the_html_and_says_so_once(tmp_path, monkeypatch,
                                                                     capsys):
    from plotly.io._kaleido import PLOTLY_GET_CHROME_ERROR_MSG

    def no_chrome(self, *args, **kwargs):
        raise RuntimeError(PLOTLY_GET_CHROME_ERROR_MSG)  # what plotly raises without Chromium

    monkeypatch.setattr(go.Figure, "write_image", no_chrome)
    monkeypatch.setattr(figures, "_NO_CHROME_SAID", False)
    for name in ("one", "two"):
        entry = save_figure(go.Figure(), name, value=1, out_dir=tmp_path)
        assert entry["files"] == [f"{name}.html"]
        assert (tmp_path / f"{name}.html").is_file()
    said = capsys.readouterr().out
    assert said.count("apt-get install chromium") == 1, said


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
    # The run itself is kept, outputs included, and marked as ours.
    executed = nbformat.read(tmp_path / "out" / "executed" / "fig.ipynb", as_version=4)
    assert executed.metadata["mlsys"]["executed_by_make_figures"]
    assert any(cell.get("execution_count") for cell in executed.cells)


def test_timings_are_kept_apart_from_values(tmp_path):
    entry = save_figure(go.Figure(), "speed", claim="none", value={"matches": True},
                        summary="1 of 1 match", timings={"compile_s": 0.61}, seed=0,
                        out_dir=tmp_path, png=False)
    assert entry["timings"] == {"compile_s": 0.61} and entry["value"] == {"matches": True}
    # Every figure carries the versions and machine it was made with, not only the manifest.
    assert entry["versions"]["numpy"] and entry["machine"]["cpus"] >= 1
    import pytest

    with pytest.raises(TypeError, match="timings"):
        save_figure(go.Figure(), "bad", timings=0.61, out_dir=tmp_path, png=False)


def manifest(**figures):
    base = {"claim": "paper 4.7x", "value": {"ratio": 4.2, "fits": [True, False]},
            "summary": "4.2x", "params": {"batch": 8}, "seed": 0, "files": ["f.html"],
            "notebook": "04.ipynb", "timings": {"search_s": 1.0},
            "versions": {"numpy": "2.0"}, "machine": {"cpus": 2}}
    return {"versions": {}, "machine": {},
            "figures": {name: base | changes for name, changes in figures.items()}}


def test_compare_manifests_ignores_only_wall_clock_and_environment():
    from mlsys_workbench.figures import compare_manifests

    a = manifest(f={})
    # Other timings, versions and machine: the same results.
    assert compare_manifests(a, manifest(f={"timings": {"search_s": 9.5, "extra_s": 1},
                                           "versions": {"numpy": "2.1"},
                                           "machine": {"cpus": 16}})) == []
    assert compare_manifests(a, a) == []
    # A changed number deep in the value is named by its path.
    diffs = compare_manifests(a, manifest(f={"value": {"ratio": 4.3, "fits": [True, False]}}))
    assert diffs == ["f.value.ratio: 4.2 != 4.3"]
    diffs = compare_manifests(a, manifest(f={"value": {"ratio": 4.2, "fits": [True, True]}}))
    assert diffs == ["f.value.fits[1]: False != True"]
    # True is not 1, a list of another length differs, a missing key or figure is reported.
    assert compare_manifests(manifest(f={"seed": 1}), manifest(f={"seed": True}))
    assert compare_manifests(a, manifest(f={"value": {"ratio": 4.2, "fits": [True]}}))
    assert compare_manifests(a, manifest(f={"value": {"ratio": 4.2}})) == [
        "f.value.fits: only in the first manifest"]
    assert compare_manifests(a, manifest(f={}, g={})) == ["g: missing from the first manifest"]
    assert compare_manifests(a, manifest(f={"summary": "4.3x"}, g={}), figures=["f"]) == [
        "f.summary: '4.2x' != '4.3x'"]
    # Exact by default; a tolerance on request.
    near = manifest(f={"value": {"ratio": 4.2 * (1 + 1e-12), "fits": [True, False]}})
    assert compare_manifests(a, near) and compare_manifests(a, near, rel_tol=1e-9) == []


def test_report_sets_each_topic_beside_the_paper(tmp_path):
    from mlsys_workbench.figures import TOPICS, write_report

    m = manifest(tflms_resnet50_batch_ratio_smoke={"summary": "tflms-v2 4.1x"})
    m["smoke"] = True
    report = write_report(m, tmp_path).read_text()
    assert "Size: smoke" in report
    row = next(line for line in report.splitlines()
               if line.startswith("| ResNet-50 largest batch"))
    assert "paper 4.7x" in row and "tflms-v2 4.1x" in row and "search_s=1" in row
    for topic, _, _ in TOPICS:  # the others are named as missing, not left out
        assert any(line.startswith(f"| {topic} |") for line in report.splitlines()), topic
    assert f"not in this run (`{TOPICS[-1][1]}`)" in report
    every = report.split("## Every figure")[1]
    assert "| tflms_resnet50_batch_ratio_smoke [html](f.html) | 04.ipynb |" in every


def test_readme_and_docs_figures_are_committed_small_pngs():
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    pattern = r"!\[[^\]]*\]\(([^)]+\.png)\)"
    images = re.findall(pattern, (repo / "README.md").read_text())
    assert 1 <= len(images) <= 3, images
    for page in (repo / "docs").glob("*.md"):
        found = re.findall(pattern, page.read_text())
        images += [str((page.parent / i).relative_to(repo)) for i in found]
    for image in images:
        path = repo / image
        assert not image.startswith("figures/"), "figures/ is ignored by git: use docs/img/"
        assert path.is_file(), f"README shows {image}, which does not exist"
        png_size(path)  # a real PNG
        assert path.stat().st_size < 200_000, f"{image}: keep README images under 200 KB"


def figure_notebook(path, source):
    nb = nbformat.v4.new_notebook()
    nb.metadata["mlsys"] = {"figures": True}
    nb.cells = [nbformat.v4.new_code_cell("SMOKE = 0", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, path)
    return path


def test_a_failing_notebook_does_not_hide_the_others_and_only_reruns_some(tmp_path):
    import pytest

    from mlsys_workbench.figures import FiguresError

    save = ("import plotly.graph_objects as go\n"
            "from mlsys_workbench.figures import save_figure\n"
            "save_figure(go.Figure(), {name!r}, claim='c', value=1, params={{'p': 1}}, seed=0, "
            "png=False)")
    good = figure_notebook(tmp_path / "01_good.ipynb", save.format(name="good"))
    bad = figure_notebook(tmp_path / "02_bad.ipynb", "raise ValueError('broken on purpose')")
    out = tmp_path / "out"
    with pytest.raises(FiguresError, match="02_bad.ipynb"):
        make_figures(out, smoke=True, notebooks=[good, bad])
    manifest = json.loads((out / "manifest.json").read_text())
    assert list(manifest["figures"]) == ["good"] and manifest["notebooks"] == ["01_good.ipynb"]
    assert "broken on purpose" in manifest["failed"]["02_bad.ipynb"]
    assert "broken on purpose" in (out / "REPORT.md").read_text()
    # Fixed, it is rerun alone (by its number): the other notebook's figure stays.
    figure_notebook(bad, save.format(name="fixed"))
    manifest = make_figures(out, smoke=True, notebooks=[good, bad], only=["02"])
    assert sorted(manifest["figures"]) == ["fixed", "good"] and manifest["failed"] == {}
    assert manifest["notebooks"] == ["01_good.ipynb", "02_bad.ipynb"]
    with pytest.raises(ValueError, match="not figure notebooks"):
        make_figures(out, smoke=True, notebooks=[good, bad], only=["03"])


def test_out_never_deletes_a_manifest_or_report_it_did_not_write(tmp_path, capsys):
    """`--out` on a folder holding someone else's manifest.json (the datasets zoo has one) or
    REPORT.md: refused before any notebook runs, the files left as they were."""
    import pytest

    from mlsys_workbench.figures import main

    theirs = tmp_path / "zoo"
    theirs.mkdir()
    (theirs / "manifest.json").write_text('{"models": {"a.onnx": {}}}')
    with pytest.raises(ValueError, match="did not write"):
        make_figures(theirs, smoke=True, notebooks=[])
    assert main(["--out", str(theirs), "--smoke", "--only", "12"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "Traceback" not in err
    assert (theirs / "manifest.json").read_text() == '{"models": {"a.onnx": {}}}'
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "REPORT.md").write_text("# my own report\n")
    with pytest.raises(ValueError, match="REPORT.md that make figures did not write"):
        make_figures(notes, smoke=True, notebooks=[])
    assert (notes / "REPORT.md").read_text() == "# my own report\n"
    # A notebook of the user's in executed/ is not ours to replace.
    own = tmp_path / "own"
    (own / "executed").mkdir(parents=True)
    (own / "executed" / "12_endianness.ipynb").write_text("my annotated copy")
    with pytest.raises(ValueError, match="notebook make figures did not write"):
        make_figures(own, smoke=True, notebooks=[])
    assert (own / "executed" / "12_endianness.ipynb").read_text() == "my annotated copy"
    # A folder of an earlier run is ours: rerunning into it works.
    ours = tmp_path / "ours"
    make_figures(ours, smoke=True, notebooks=[])
    make_figures(ours, smoke=True, notebooks=[])
    assert json.loads((ours / "manifest.json").read_text())["figures"] == {}


def test_compare_and_only_are_checked_before_any_notebook_runs(tmp_path, capsys, monkeypatch):
    from mlsys_workbench import figures

    ran = []
    monkeypatch.setattr(figures, "run_notebook", lambda *a, **k: ran.append(a))
    out = tmp_path / "out"
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    not_manifest = tmp_path / "other.json"
    not_manifest.write_text('{"models": {}}')
    for argv, expected in (
            (["--compare", str(tmp_path / "missing.json")], "no such file"),
            (["--compare", str(bad_json)], "not a readable JSON manifest"),
            (["--compare", str(not_manifest)], "not a make figures manifest.json"),
            (["--only", "12,nope"], "--only: not figure notebooks: ['nope']")):
        assert figures.main(["--out", str(out), "--smoke"] + argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and expected in err and "Traceback" not in err
    assert ran == [] and not out.exists()


def _log_undecodable(message: str) -> None:
    """Log as choreographer's pipe reader does when a message from the browser is not JSON."""
    from choreographer.channels import _wire
    from choreographer.channels._errors import JSONError
    try:
        _wire.deserialize(message)
    except JSONError:
        logging.getLogger("choreographer.channels.pipe").exception(
            "JSONError decoding message. Ignoring")
    else:
        raise AssertionError(f"{message!r} decoded as JSON")


def test_the_browsers_goodbye_is_not_logged_as_a_traceback_but_other_bad_messages_are(caplog):
    # CI once failed a notebook on the traceback choreographer logs when its own "{bye}" lands
    # in the same read as Chromium's last reply; a real undecodable reply must still show.
    figures._quiet_browser_goodbye()
    figures._quiet_browser_goodbye()  # installing twice keeps one filter
    logger = logging.getLogger("choreographer.channels.pipe")
    assert sum(isinstance(f, figures._QuietBrowserGoodbye) for f in logger.filters) == 1
    with caplog.at_level(logging.ERROR, logger="choreographer.channels.pipe"):
        _log_undecodable("{bye}\n")
        assert caplog.records == []
        _log_undecodable('{"id": 3, "result": ')
        assert [r.getMessage() for r in caplog.records] == ["JSONError decoding message. Ignoring"]
