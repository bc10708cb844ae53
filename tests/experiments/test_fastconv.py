"""mlsys_workbench.experiments.fastconv (notebook 17's and the sweep's logic): the by-hand
Winograd tile and overlap-save FFT against independent references, the pick and error bookkeeping on
hand-made rows, the Kernel IR outline on a hand-written nest. No timing: the sweep itself
runs in benchmarks/winograd_bench.py --section sweep and the notebook test."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from compilerkit import roofline as rl
from mlsys_workbench.experiments import fastconv as fc


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_tile_equals_correlation(m):
    h = fc.winograd_by_hand(m=m, seed=3)
    want = np.einsum("ijuv,uv->ij", sliding_window_view(h["d"], (3, 3)), h["g"])
    np.testing.assert_allclose(h["Y"], want, atol=1e-9)
    assert h["multiplies"] == (m + 2) ** 2 and h["direct_multiplies"] == 9 * m * m


def test_overlap_save_equals_convolution():
    """Correlation is convolution with the reversed kernel (numpy's own, independent)."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(41), rng.standard_normal(7)
    got = fc.overlap_save_1d(x, w, t=16)
    assert got["m"] == 10 and got["tiles"] == 4  # 35 outputs in tiles of 10
    np.testing.assert_allclose(got["y"], np.convolve(x, w[::-1], mode="valid"), atol=1e-12)


def _row(ms, predicted):
    algos = list(predicted)
    row = {"layer": "l", "spec": [8, 8, 8, 2, 3], "candidates": algos,
           "ms": dict(ms, onnxruntime=1.0)}
    row["predicted_ms"] = predicted
    row["ratio"] = {a: predicted[a] / ms[a] for a in algos}
    row["pick"] = min(algos, key=predicted.get)
    row["fastest"] = min(algos, key=ms.get)
    row["pick_over_fastest"] = ms[row["pick"]] / ms[row["fastest"]]
    row["pick_ok"] = row["pick_over_fastest"] <= 1 + fc.PICK_SLACK
    return row


def test_summary_counts_picks_within_five_percent_and_errors():
    rows = [_row({"a": 1.0, "b": 1.04}, {"a": 2.0, "b": 1.0}),   # pick b: 4% slower: right
            _row({"a": 1.0, "b": 1.10}, {"a": 2.0, "b": 1.0}),   # pick b: 10% slower: wrong
            _row({"a": 1.0, "b": 2.00}, {"a": 1.3, "b": 3.0})]   # pick a: fastest
    s = fc.summary(rows)
    assert s["pick_ok_fraction"] == pytest.approx(2 / 3)
    assert s["pick_exact_fraction"] == pytest.approx(1 / 3)
    # |pred/meas - 1|: 1, 0.038, 1, 0.091, 0.3, 0.5: three of six within 35%
    assert s["within_35pct_fraction"] == pytest.approx(0.5)
    assert s["picked_within_35pct_fraction"] == 1.0  # 0.038, 0.091, 0.3


def test_add_predictions_uses_the_roofline():
    m = rl.DEFAULT
    row = {"layer": "x", "spec": [64, 64, 56, 2, 3], "candidates": ["im2col", "winograd-f4"],
           "ms": {"im2col": 4.0, "winograd-f4": 2.0, "onnxruntime": 3.0}}
    fc.add_predictions(row, m)
    layer = rl.Layer(64, 64, (56, 56), 3)
    assert row["predicted_ms"]["im2col"] == pytest.approx(rl.predict(layer, "im2col", m) * 1e3)
    assert row["pick"] == rl.best_algorithm(layer, m, ["im2col", "winograd-f4"])
    assert row["fastest"] == "winograd-f4" and row["fastest_vs_onnxruntime"] == 1.5


def test_kernel_ir_outline():
    text = "\n".join([
        "builtin.module {",
        "  func.func @f() {",
        '    %2 = "krnl.global"() {sym_name = "u", value = 0} : () -> memref<16x4x4xf32>',
        '    %5 = "krnl.alloc"() {offset = 0 : i64} : () -> memref<10x4xf32>',
        '    "krnl.iterate"(%a, %b) ({',
        '      "krnl.matmul"(%x) : () -> ()',
        "    }) {bounds = [[0 : i64, 10 : i64], [2 : i64, 4 : i64]], n_original = 2 : i64} : ",
        "  }",
        "}"])
    assert fc.kernel_ir_outline(text).splitlines() == [
        "global u memref<16x4x4xf32>", "alloc memref<10x4xf32>", "for [0, 10) x [2, 4)",
        "  krnl.matmul"]


def test_figures_take_layers_whose_fused_twin_was_left_out():
    """candidates() leaves out a fused name of one group (roofline.distinct): the figures
    build from rows with and without it, and the FFT's bar is over the faster schedule
    listed."""
    m = rl.DEFAULT
    rows = []
    for spec, ms in [([16, 16, 24, 3, 5], {"im2col": 8.0, "fft": 2.0}),
                     ([32, 32, 16, 3, 5], {"im2col": 9.0, "fft": 3.0, "fft-fused": 2.5}),
                     ([64, 64, 56, 2, 3], {"im2col": 2.6, "winograd-f2": 1.5, "winograd-f4": 1.0,
                                           "winograd-f4-fused": 0.9, "fft": 1.4})]:
        row = {"layer": fc.layer_name(spec), "spec": spec, "candidates": list(ms),
               "ms": {**ms, "onnxruntime": 5.0}}
        rows.append(fc.add_predictions(row, m))
    assert [r["candidates"] for r in rows[:2]] == [fc.candidates(r["spec"]) for r in rows[:2]]
    fft = fc.fft_figure(rows)
    assert list(fft.data[0].y) == pytest.approx([4.0, 3.6])  # im2col over fft, over fft-fused
    assert len(fc.fused_figure(rows).data[0].y) == 1
    assert fc.picks_figure(rows).data and fc.roofline_figure(rows, m).data
