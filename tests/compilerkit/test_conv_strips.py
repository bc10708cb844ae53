"""The im2col GEMM panels with the column buffer written in strips (conv_panels.py
`_strip_panel`: the micro-kernel reads each strip in place instead of packing B):
bit-identical to the row-major panels, and onnxruntime's answer, over shapes that cut lines
and strips in every way, on 1 and 2 threads."""

import numpy as np
import pytest
from ckhelpers import conv_act_model, ort_run, seeded
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import conv as conv_lowering
from compilerkit.lowering import conv_panels, matmul

N = helper.make_node


arr = seeded
conv_model = conv_act_model


class Schedules:
    """Compiles a model with the GEMM panels forced (no transposed, tap or direct
    schedule for ungrouped Convs), in strips or row-major, counting the strip panels."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.calls = 0
        real = conv_panels._strip_panel

        def counted(*args):
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(conv_panels, "_strip_panel", counted)

    def compile(self, model, strips: bool, **patches):
        with self.monkeypatch.context() as m:
            m.setattr(conv_lowering, "_transposed_pays", lambda conv, op, lanes, summed=False: None)
            m.setattr(conv_lowering.conv_taps, "taps_pay", lambda conv, lanes: False)
            m.setattr(conv_panels, "_strips_pay", lambda conv, lanes: strips)
            for name, value in patches.items():
                m.setattr(conv_panels, name, value)
            return ck.compile(model, asm=False, conv_algorithm="classic")

    def both(self, model, x, **patches):
        """(strips, row-major) outputs; asserts the strips were used."""
        before = self.calls
        got = self.compile(model, True, **patches).run(x)[0]
        assert self.calls > before
        return got, self.compile(model, False, **patches).run(x)[0]


@pytest.fixture
def schedules(monkeypatch):
    return Schedules(monkeypatch)


CASES = [
    # x shape, W shape, Conv attributes, bias, activation
    ((1, 16, 9, 11), (5, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, None),  # 99 positions
    ((1, 8, 4, 5), (3, 8, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # under one strip
    ((2, 12, 10, 9), (40, 12, 3, 3), dict(pads=[1, 0, 2, 1]), False, "Relu"),  # batch 2
    ((1, 10, 13, 12), (33, 10, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), True, "Clip"),
    ((1, 8, 12, 12), (24, 8, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), True, None),
    ((1, 8, 9, 10), (24, 8, 3, 2), dict(strides=[1, 2], dilations=[2, 1]), True, "Relu"),
    ((1, 6, 7, 7), (16, 6, 5, 5), {}, False, None),  # unpadded: taps read x directly
    ((1, 16, 12, 16), (20, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, None),  # lines of 16
    ((1, 4, 24, 64), (8, 4, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # 2 strips a line
    ((1, 16, 20, 20), (40, 16, 1, 1), dict(strides=[2, 2]), True, "Relu"),  # strided 1x1
    ((1, 16, 9, 9), (48, 8, 3, 3), dict(group=2, pads=[1, 1, 1, 1]), True, "Relu"),  # groups
    ((2, 8, 70), (20, 8, 3), dict(pads=[1, 1]), True, "Relu"),  # 1-D
    ((1, 8, 100), (12, 8, 5), dict(strides=[3], dilations=[2]), False, None),  # 1-D strided
    ((1, 4, 5, 6, 7), (12, 4, 3, 3, 3), dict(pads=[1] * 6), True, None),  # 3-D
    ((1, 4, 4, 8, 8), (10, 4, 3, 3, 3), dict(pads=[1] * 6), True, "Relu"),  # 3-D, 4 lines/strip
    ((1, 4, 8, 4, 8), (10, 4, 3, 3, 3), dict(pads=[1] * 6), False, None),  # 3-D, 2-row panels
    ((2, 10, 6, 5, 9), (16, 5, 2, 3, 3), dict(group=2, strides=[1, 2, 1]), True, "Clip"),
    ((1, 32, 30, 30), (32, 32, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # many panels
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias, act", CASES)
def test_strips_match_the_row_major_panels_and_onnxruntime(schedules, x_shape, w_shape, attrs,
                                                           bias, act):
    """Each output starts at its bias and adds the products over (c, taps) in the same order
    with fused multiply-adds in both layouts: not one bit may differ."""
    x = arr(x_shape, 1)
    model = conv_model(x, w_shape, bias, act, **attrs)
    got, row_major = schedules.both(model, x)
    np.testing.assert_array_equal(got, row_major)
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("panel_bytes, col_bytes", [(4096, None), (20000, 1)])
def test_small_panels_ragged_and_serial(schedules, panel_bytes, col_bytes):
    """Small panels: shared ones (a column buffer slot each), and a serial loop reusing one
    slot with a shorter last panel (COL_BYTES too small to share): same bits."""
    x = arr((1, 8, 23, 13), 1)
    model = conv_model(x, (24, 8, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    patches = {"PANEL_BYTES": panel_bytes, "MIN_PANEL": 1}
    if col_bytes is not None:
        patches["COL_BYTES"] = col_bytes
    got, row_major = schedules.both(model, x, **patches)
    np.testing.assert_array_equal(got, row_major)
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", [None, "Relu", "Clip"])
def test_nan_and_inf_propagate_as_in_onnxruntime(schedules, act):
    """A NaN or an infinity in the input reaches the outputs whose windows hold it, as in
    onnxruntime and the row-major panels (bit for bit, NaN where they have NaN)."""
    x = arr((1, 8, 9, 21), 1)
    x[0, 3, 2, 2] = np.nan
    x[0, 5, 6, 20] = np.inf
    x[0, 0, 8, 0] = -np.inf
    model = conv_model(x, (40, 8, 3, 3), True, act, pads=[1, 1, 1, 1])
    got, row_major = schedules.both(model, x)
    np.testing.assert_array_equal(got, row_major)
    ref = ort_run(model, [x])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fine = np.isfinite(ref)
    np.testing.assert_allclose(got[fine], ref[fine], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, w_shape, patches, strips", [
    ((1, 32, 28, 28), (64, 32, 3, 3), {}, True),  # shared panels
    ((1, 16, 8, 30, 30), (32, 16, 3, 3, 3), {}, True),
    ((1, 32, 28, 28), (64, 32, 3, 3), {"COL_BYTES": 1}, True),  # one panel: shared strips
    ((1, 32, 28, 28), (64, 32, 3, 3), {"COL_BYTES": 1, "PANEL_BYTES": 100000}, True),  # chunks
    ((1, 32, 27, 28), (64, 32, 3, 3), {"COL_BYTES": 1, "PANEL_BYTES": 100000}, False),  # odd
])
def test_threads_give_the_same_bits(schedules, x_shape, w_shape, patches, strips):
    """1 and 2 threads (shared panels, a lone panel's strips, chunks of serial panels, or the
    row-major buffer for an odd serial count) agree bit for bit, and with the row-major
    panels."""
    x = arr(x_shape, 1)
    model = conv_model(x, w_shape, True, "Relu", pads=[1] * (2 * (len(x_shape) - 2)))
    cm = schedules.compile(model, True, **patches)
    assert bool(schedules.calls) is strips
    one, two = cm.run(x, num_threads=1)[0], cm.run(x, num_threads=2)[0]
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, schedules.compile(model, False, **patches).run(x)[0])


def test_the_default_rule(monkeypatch):
    """By default, GEMM panels with at least STRIP_MIN_ROWS output channels per group take
    the strips (the micro-kernel would pack B for them); fewer keep the row-major buffer, and
    the transposed schedules keep their Convs."""
    calls = []
    real = conv_panels._strip_panel
    monkeypatch.setattr(conv_panels, "_strip_panel", lambda *a: calls.append(1) or real(*a))
    x = arr((1, 16, 20, 20), 1)
    for oc, want in ((matmul.STRIP_MIN_ROWS, True), (matmul.STRIP_MIN_ROWS - 1, False)):
        calls.clear()
        model = conv_model(x, (oc, 16, 3, 3), True, "Relu", pads=[1, 1, 1, 1], strides=[2, 2])
        # weights as an input: no transposed schedule (it needs them constant)
        model.graph.initializer.pop(0)
        model.graph.input.append(helper.make_tensor_value_info("w", 1, [oc, 16, 3, 3]))
        w = arr((oc, 16, 3, 3), 2, 0.3)
        got = ck.compile(model, asm=False, conv_algorithm="classic").run(x, w)[0]
        assert bool(calls) is want
        ref = ort_run(model, [x, w])[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    calls.clear()
    x3 = arr((1, 3, 40, 40), 1)  # 3 -> 64 3x3 stride 2: 27 products per output, too few
    ck.compile(conv_model(x3, (64, 3, 3, 3), True, "Relu", strides=[2, 2]), asm=False,
               conv_algorithm="classic")
    assert not calls and 27 < conv_panels.STRIP_MIN_DEPTH
    xs = arr((1, 128, 7, 7), 1)  # 49 positions, 64 channels: the transposed GEMM
    ck.compile(conv_model(xs, (64, 128, 3, 3), True, None, pads=[1, 1, 1, 1]), asm=False,
               conv_algorithm="classic")
    assert not calls


def test_strip_runs_cut_lines_and_strips():
    """Runs cover every position once, in order, each within one line and one strip."""
    sp = [3, 20]
    lines = [(0,), (1,), (2,)]
    runs = conv_panels._strip_runs(sp, lines, 8)
    assert [(s, j0, lead, i0, n) for s, j0, lead, i0, n in runs] == [
        (0, 0, (0,), 0, 8), (1, 0, (0,), 8, 8), (2, 0, (0,), 16, 4), (2, 4, (1,), 0, 4),
        (3, 0, (1,), 4, 8), (4, 0, (1,), 12, 8), (5, 0, (2,), 0, 8), (6, 0, (2,), 8, 8),
        (7, 0, (2,), 16, 4)]
