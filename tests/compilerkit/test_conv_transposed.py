"""The transposed Conv schedule panel by panel (conv.py `_transposed_panels`: few output
channels on planes of any size, DenseNet-121's 128 -> 32 3x3 Convs): bit-identical to the GEMM
panels, and onnxruntime's answer, on shapes the default rule would not send there too."""

import numpy as np
import pytest
from ckhelpers import conv_act_model, ort_run, seeded
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import conv as conv_lowering
from compilerkit.lowering import matmul

N = helper.make_node


arr = seeded
conv_model = conv_act_model


class Schedules:
    """Compiles a model with the schedule forced: "panels" sends every ungrouped Conv with
    constant weights to `_transposed_panels` (and counts the calls), None to the GEMM panels."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.calls = 0
        real = conv_lowering._transposed_panels

        def counted(*args):
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(conv_lowering, "_transposed_panels", counted)

    def run(self, model, x, how):
        def forced(conv, op, lanes, summed=False):
            if how is not None and conv.groups == 1:
                return how if conv_lowering.weights_array(op)[0] is not None else None
            return None

        with self.monkeypatch.context() as m:
            m.setattr(conv_lowering, "_transposed_pays", forced)
            m.setattr(conv_lowering.conv_taps, "taps_pay", lambda conv, lanes: False)
            return ck.compile(model, asm=False, conv_algorithm="classic").run(x)[0]


@pytest.fixture
def schedules(monkeypatch):
    return Schedules(monkeypatch)


CASES = [
    # x shape, W shape, Conv attributes, bias, activation
    ((1, 16, 9, 11), (5, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, None),  # a part strip
    ((1, 16, 8, 8), (1, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # 1 channel
    ((2, 12, 10, 9), (32, 12, 3, 3), dict(pads=[1, 0, 2, 1]), False, "Relu"),  # batch 2
    ((1, 10, 13, 12), (40, 10, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), True, "Clip"),
    ((1, 8, 12, 12), (33, 8, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), True, None),
    ((1, 8, 9, 10), (24, 8, 3, 2), dict(strides=[1, 2], dilations=[2, 1]), True, "Relu"),
    ((1, 6, 7, 7), (16, 6, 5, 5), {}, False, None),  # unpadded: taps read x directly
    ((2, 8, 15), (20, 8, 3), dict(pads=[1, 1]), True, "Relu"),  # 1-D
    ((1, 4, 5, 6, 7), (12, 4, 3, 3, 3), dict(pads=[1] * 6), True, None),  # 3-D
    ((1, 32, 30, 30), (32, 32, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu"),  # many panels
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias, act", CASES)
def test_transposed_panels_match_the_gemm_panels_and_onnxruntime(schedules, x_shape, w_shape,
                                                                  attrs, bias, act):
    """Each output starts at its bias and adds the products over (c, taps) in the same order
    with fused multiply-adds in both schedules: not one bit may differ."""
    x = arr(x_shape, 1)
    model = conv_model(x, w_shape, bias, act, **attrs)
    got = schedules.run(model, x, "panels")
    assert schedules.calls == 1
    np.testing.assert_array_equal(got, schedules.run(model, x, None))
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", [None, "Relu", "Clip"])
def test_nan_and_inf_propagate_as_in_onnxruntime(schedules, act):
    """A NaN or an infinity in the input reaches the outputs whose windows hold it, as in
    onnxruntime and the GEMM panels (bit for bit, NaN where they have NaN)."""
    x = arr((1, 8, 9, 9), 1)
    x[0, 3, 2, 2] = np.nan
    x[0, 5, 6, 7] = np.inf
    x[0, 0, 8, 0] = -np.inf
    model = conv_model(x, (32, 8, 3, 3), True, act, pads=[1, 1, 1, 1])
    got = schedules.run(model, x, "panels")
    assert schedules.calls == 1
    np.testing.assert_array_equal(got, schedules.run(model, x, None))
    ref = ort_run(model, [x])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fine = np.isfinite(ref)
    np.testing.assert_allclose(got[fine], ref[fine], rtol=1e-4, atol=1e-4)


def test_threads_give_the_same_bits(schedules):
    """The chunk loop runs on threads: 1 and 2 threads (and the GEMM panels) agree bit for bit."""
    x = arr((1, 32, 28, 28), 1)
    model = conv_model(x, (32, 32, 3, 3), True, "Relu", pads=[1, 1, 1, 1])
    with schedules.monkeypatch.context() as m:
        m.setattr(conv_lowering, "_transposed_pays",
                  lambda conv, op, lanes, summed=False: "panels")
        m.setattr(conv_lowering.conv_taps, "taps_pay", lambda conv, lanes: False)
        cm = ck.compile(model, asm=False, conv_algorithm="classic")
    one, two = cm.run(x, num_threads=1)[0], cm.run(x, num_threads=2)[0]
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, schedules.run(model, x, None))


def test_densenet_dense_layer_takes_the_transposed_panels(schedules):
    """The default rule: DenseNet-121's 128 -> 32 3x3 Conv goes to the panels where the tap
    schedule does not take it (7 x 7); a 1x1 Conv, a part strip of channels or a shallow sum
    (16 input channels) does not."""
    for lanes in (8, 16):  # AVX2, AVX-512: 40 channels are no whole strips there
        assert 32 % matmul.strip_width(32, lanes) == 0 != 40 % matmul.strip_width(40, lanes)
    x = arr((1, 128, 7, 7), 1)  # 7 x 7: the tap schedule would compute 9 of 7 columns
    model = conv_model(x, (32, 128, 3, 3), False, None, pads=[1, 1, 1, 1])
    got = ck.compile(model, asm=False, conv_algorithm="classic").run(x)[0]
    assert schedules.calls == 1
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)
    for shape in [(32, 128, 1, 1), (40, 128, 3, 3), (32, 16, 3, 3)]:
        xs = arr((1, shape[1], 14, 14), 1)
        ck.compile(conv_model(xs, shape, False, None), asm=False, conv_algorithm="classic")
    assert schedules.calls == 1
