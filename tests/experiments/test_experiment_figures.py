"""Every figure the experiments draw says what it shows: a title, and a title on every axis a
trace is drawn on. Built from hand-made rows (no compiling, no timing)."""

from __future__ import annotations

import numpy as np
import pytest

from compilerkit import roofline as rl
from mlsys_workbench.experiments import fastconv as fc
from mlsys_workbench.experiments import inference as zf
from mlsys_workbench.experiments import pznet as pf


def _fastconv_rows():
    rows = []
    for spec, ms in [([32, 32, 16, 3, 5], {"im2col": 9.0, "fft": 3.0, "fft-fused": 2.5}),
                     ([64, 64, 56, 2, 3], {"im2col": 2.6, "winograd-f2": 1.5, "winograd-f4": 1.0,
                                           "winograd-f4-fused": 0.9, "fft": 1.4})]:
        row = {"layer": fc.layer_name(spec), "spec": spec, "candidates": list(ms),
               "ms": {**ms, "onnxruntime": 5.0}}
        rows.append(fc.add_predictions(row, rl.DEFAULT))
    return rows


def _znni():
    rows = [{"algorithm": a, "side": s, "voxels_per_s": v, "predicted_voxels_per_s": v * 1.1,
             "bytes": s ** 3 * 4096} for a, sv in (("im2col", ((1, 1e5), (4, 3e5))),
                                                   ("fft", ((4, 2e5), (8, 4e5))))
            for s, v in sv]
    pick = {"algorithm": "fft", "side": 8, "bytes": 8 ** 3 * 4096}
    picks = [{"cap_bytes": 1 << 30, "best": pick, "best_voxels_per_s": 4e5, "pick": pick,
              "pick_voxels_per_s": 4e5, "pick_measured": pick,
              "pick_measured_voxels_per_s": 4e5}]
    a = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    stitched = {"stitched": a, "whole": a, "patches": 4, "max_abs_vs_whole": 0.0,
                "max_abs_vs_onnxruntime": 1e-6}
    return rows, picks, stitched


def every_figure():
    rows = _fastconv_rows()
    zrows, picks, stitched = _znni()
    prow = {"layer": "enc0_conv1", "c_in": 4, "c_out": 16, "side": 32,
            "gflops": {"pznet": 30.0, "classic": 20.0, "onnxruntime": 25.0}}
    net = {"input": [1, 4, 32, 32, 32],
           "seconds": {"pznet": 0.5, "classic": 0.8, "onnxruntime": 0.6, "tensorflow": 1.5}}
    return {
        "fastconv.tile_figure": fc.tile_figure(fc.winograd_by_hand(m=2)),
        "fastconv.roofline_figure": fc.roofline_figure(rows, rl.DEFAULT),
        "fastconv.picks_figure": fc.picks_figure(rows),
        "fastconv.fused_figure": fc.fused_figure(rows),
        "fastconv.fft_figure": fc.fft_figure(rows),
        "inference.overlap_figure": zf.overlap_figure((10, 10, 10), (8, 8, 8), (30, 30, 30)),
        "inference.curve_figure": zf.curve_figure(zrows, picks),
        "inference.picks_figure": zf.picks_figure(picks),
        "inference.stitch_figure": zf.stitch_figure(stitched),
        "pznet.layout_figure": pf.layout_figure(),
        "pznet.layers_figure": pf.layers_figure([prow]),
        "pznet.net_figure": pf.net_figure(net),
    }


FIGURES = every_figure()


def _axis_title(fig, axis: str) -> str:
    """The title text of the layout axis a trace names ('x2' -> layout.xaxis2)."""
    name = axis[0] + "axis" + axis[1:]
    return (fig.layout[name].title.text or "").strip()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_has_a_title_and_titled_axes(name):
    fig = FIGURES[name]
    assert (fig.layout.title.text or "").strip(), f"{name}: no title"
    used = {(t.xaxis or "x", t.yaxis or "y") for t in fig.data if "xaxis" in t}
    assert used, f"{name}: no traces on axes"
    for x, y in sorted(used):
        assert _axis_title(fig, x), f"{name}: axis {x} has no title"
        assert _axis_title(fig, y), f"{name}: axis {y} has no title"


def test_the_check_sees_a_missing_axis_title():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=["a"], y=[1]), layout={"title": "t", "yaxis_title": "ms"})
    assert not _axis_title(fig, "x") and _axis_title(fig, "y") == "ms"
