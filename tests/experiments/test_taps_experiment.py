"""Notebook 17's tap-schedule section (mlsys_workbench.experiments.taps) on its smoke layers:
each one, strided included, taken by the tap schedule, the same bits as im2col, onnxruntime's
answer, a smaller arena; and the figure has its titles."""

from __future__ import annotations

import pytest

from mlsys_workbench.experiments import taps as tp


@pytest.mark.parametrize("spec", tp.SMOKE_LAYERS, ids=tp.layer_name)
def test_smoke_layers(spec):
    row = tp.measure_layer(spec, repeat=1)
    assert row["taken"] and row["same_bits"]
    assert max(row["error"].values()) < 1e-5
    assert row["arena_bytes"]["taps"] < row["arena_bytes"]["im2col"]
    assert set(row["ms"]) == {"taps", "im2col", "onnxruntime"}


def test_layer_names_say_the_stride():
    assert tp.layer_name((64, 64, 56, 2)) == "2d 64->64@56"
    assert tp.layer_name((64, 64, 56, 2, 2)) == "2d 64->64@56/2"
    assert any(len(s) == 5 and s[4] == 2 for s in tp.LAYERS)


def test_figure_has_titles():
    rows = [{"layer": tp.layer_name(s), "ms": {"taps": 1.0, "im2col": 1.5, "onnxruntime": 1.2},
             "arena_bytes": {"taps": 1 << 20, "im2col": 3 << 20}} for s in tp.SMOKE_LAYERS]
    fig = tp.figure(rows)
    assert fig.layout.title.text
    assert fig.layout.yaxis.title.text and fig.layout.yaxis2.title.text


@pytest.mark.parametrize("spec", [(8, 16, 20), (8, 16, 20, 2, 0), (8, 16, -20, 2),
                                  (8, 16, 20, 2, 1.5)])
def test_bad_layer_specs_are_refused_by_name(spec):
    with pytest.raises(ValueError, match="tap-schedule layer"):
        tp.measure_layer(spec, repeat=1)
