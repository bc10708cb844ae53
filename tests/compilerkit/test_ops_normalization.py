"""LayerNormalization, InstanceNormalization, LpNormalization, RMSNormalization,
GroupNormalization and MeanVarianceNormalization (lowering/normalization.py) against
onnxruntime: every axis, scale/bias shapes, the Mean and InvStdDev outputs, a large mean against
a small spread (where a one-pass variance cancels), plus ONNX's own node tests."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import helper

import compilerkit as ck

N = helper.make_node
R = np.random.default_rng(29)


def _check(model, arrays, rtol=1e-5, atol=1e-5, target="host"):
    ref = ort_run(model, arrays)
    got = ck.compile(model, asm=False, target=target).run(*arrays)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return got


@pytest.mark.parametrize("axis", [-1, -2, 0, 1, 2])
def test_layer_norm_axes_with_stats_outputs(axis):
    x = R.standard_normal((2, 3, 5)).astype(np.float32) * 3 + 1
    norm = x.shape[axis:]
    s = R.standard_normal(norm).astype(np.float32)
    bias = R.standard_normal(norm).astype(np.float32)
    model = make_model([N("LayerNormalization", ["x", "s", "b"], ["y", "m", "inv"], axis=axis,
                          epsilon=1e-3)], [("x", x), ("s", s), ("b", bias)], ["y", "m", "inv"],
                       opset=17)
    _check(model, [x, s, bias])


@pytest.mark.parametrize("scale_shape", [(5,), (1,), (1, 5)])
def test_layer_norm_scale_broadcast_no_bias(scale_shape):
    x = R.standard_normal((4, 5)).astype(np.float32)
    s = R.standard_normal(scale_shape).astype(np.float32)
    model = make_model([N("LayerNormalization", ["x", "s"], ["y"])], [("x", x), ("s", s)],
                       ["y"], opset=17)
    _check(model, [x, s])


def test_layer_norm_large_mean_small_spread():
    # mean 1000, spread 1e-2: E[x^2] - E[x]^2 loses every digit in f32, and a plain f32 sum
    # of x gave 0.0135 here (onnxruntime 0.0022): the shift by x0 keeps it within onnxruntime's.
    x = (1000 + R.standard_normal((3, 64)) * 1e-2).astype(np.float32)
    s = np.ones(64, np.float32)
    model = make_model([N("LayerNormalization", ["x", "s"], ["y"], epsilon=1e-9)],
                       [("x", x), ("s", s)], ["y"], opset=17)
    got = ck.compile(model, asm=False).run(x, s)[0]
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-9)
    ort_err = np.abs(ort_run(model, [x, s])[0] - ref).max()
    assert np.abs(got - ref).max() <= max(ort_err, 1e-3)


def test_layer_norm_partial_broadcast_refused():
    x = R.standard_normal((2, 3, 4)).astype(np.float32)
    s = np.ones((3, 1), np.float32)
    model = make_model([N("LayerNormalization", ["x", "s"], ["y"], axis=1, name="ln")],
                       [("x", x), ("s", s)], ["y"], opset=17)
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'ln'.*Scale of shape \[3, 1\]"):
        ck.compile(model, asm=False)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 3), (2, 2, 2, 2, 3)])
def test_instance_norm(shape):
    x = (R.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    s = R.standard_normal(shape[1]).astype(np.float32)
    bias = R.standard_normal(shape[1]).astype(np.float32)
    model = make_model([N("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)],
                       [("x", x), ("s", s), ("b", bias)], ["y"])
    _check(model, [x, s, bias])


def test_emulated_s390x_layer_norm():
    x = R.standard_normal((2, 6)).astype(np.float32)
    s = R.standard_normal(6).astype(np.float32)
    model = make_model([N("LayerNormalization", ["x", "s"], ["y"])], [("x", x), ("s", s)],
                       ["y"], opset=17)
    got = _check(model, [x, s], target="s390x")
    np.testing.assert_array_equal(got[0], ck.compile(model, asm=False).run(x, s)[0])


LP_X = np.array([[0, 0, 0], [3, 4, 0], [np.inf, 1, 0], [np.nan, 1, 2], [1e-30, 0, 0],
                 [1e30, 1e30, 0], [-1, 2, -2], [-0.0, 0.0, 5.0]], np.float32)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp_norm_zero_inf_nan_under_and_overflow(p, dtype):
    # A zero norm gives 0 (not NaN); the norm underflows / overflows as onnxruntime's does.
    x = LP_X.astype(dtype)
    model = make_model([N("LpNormalization", ["x"], ["y"], p=p)], [("x", x)], ["y"])
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)


@pytest.mark.parametrize("axis", [0, 1, -2])
def test_lp_norm_axes(axis):
    x = R.standard_normal((3, 4, 5)).astype(np.float32)
    model = make_model([N("LpNormalization", ["x"], ["y"], axis=axis)], [("x", x)], ["y"])
    _check(model, [x], rtol=1e-6, atol=0)


@pytest.mark.parametrize(("axis", "scale_shape"), [(-1, (5,)), (1, (4, 5)), (0, (1,)),
                                                   (-2, (1, 4, 5))])
def test_rms_norm(axis, scale_shape):
    x = (R.standard_normal((3, 4, 5)) * 3).astype(np.float32)
    x[0, 0] = 0.0  # a zero row: 0 * 1 / sqrt(eps)
    s = R.standard_normal(scale_shape).astype(np.float32)
    model = make_model([N("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-4)],
                       [("x", x), ("s", s)], ["y"], opset=23)
    _check(model, [x, s], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_onnx_node_tests_for_normalization_ops():
    ops = {"LayerNormalization", "InstanceNormalization", "LpNormalization",
           "RMSNormalization", "GroupNormalization", "MeanVarianceNormalization"}
    passed = node_test_passes(ops)
    assert passed["LayerNormalization"] >= 19 and passed["InstanceNormalization"] >= 2
    assert passed["GroupNormalization"] >= 2 and passed["MeanVarianceNormalization"] >= 1


@pytest.mark.parametrize(("shape", "groups"), [((2, 6, 3, 3), 3), ((1, 4, 5), 1), ((2, 4, 2, 2), 4),
                                               ((1, 6, 2, 1, 3), 2)])
def test_group_norm(shape, groups):
    x = (R.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    s = R.standard_normal(shape[1]).astype(np.float32)
    bias = R.standard_normal(shape[1]).astype(np.float32)
    model = make_model([N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                          epsilon=1e-4)], [("x", x), ("s", s), ("b", bias)], ["y"], opset=21)
    _check(model, [x, s, bias])


def test_group_norm_wrong_scale_length_refused():
    x = R.standard_normal((1, 4, 3)).astype(np.float32)
    s = np.ones(2, np.float32)
    model = make_model([N("GroupNormalization", ["x", "s", "s"], ["y"], num_groups=2,
                          name="gn")], [("x", x), ("s", s)], ["y"], opset=21)
    with pytest.raises((ck.UnsupportedOpError, ck.ModelError), match="gn"):
        ck.compile(model, asm=False)


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3], [-1], [0, 1, 2, 3]])
def test_mvn_axes(axes):
    x = (R.standard_normal((2, 3, 4, 5)) * 3 + 1).astype(np.float32)
    attrs = {} if axes is None else {"axes": axes}
    model = make_model([N("MeanVarianceNormalization", ["x"], ["y"], **attrs)], [("x", x)],
                       ["y"], opset=13)
    _check(model, [x], rtol=1e-4, atol=1e-5)


def test_mvn_constant_group_and_large_mean_follow_the_spec():
    # ONNX's function body: (x - mean) / (std + 1e-9). onnxruntime has no epsilon (a constant
    # group gives NaN) and a one-pass variance (a mean of 1000 against a spread of 1e-3 loses
    # digits); the reference here is the spec's formula in f64.
    x = np.stack([np.full((1, 2, 2), 3.0), 1000 + np.arange(4).reshape(1, 2, 2) * 1e-3],
                 axis=1).astype(np.float32).reshape(1, 2, 2, 2)
    model = make_model([N("MeanVarianceNormalization", ["x"], ["y"])], [("x", x)], ["y"])
    got = ck.compile(model, asm=False).run(x)[0]
    x64 = x.astype(np.float64)
    mean = x64.mean((0, 2, 3), keepdims=True)
    ref = (x64 - mean) / (np.sqrt(((x64 - mean) ** 2).mean((0, 2, 3), keepdims=True)) + 1e-9)
    np.testing.assert_array_equal(got[0, 0], 0.0)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-6)


def test_group_norm_groups_not_dividing_channels_is_a_model_error():
    x = R.standard_normal((3, 4)).astype(np.float32)
    o = np.ones(4, np.float32)
    model = make_model([N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3,
                          name="g")], [("x", x), ("s", o), ("b", o)], ["y"], opset=21)
    with pytest.raises(ck.ModelError, match=r"node 'g'.*num_groups is 3; expected a divisor"):
        ck.compile(model, asm=False)


def test_mvn_axes_outside_the_rank_named():
    # ONNX reports the error inside MVN's function body (nested, without a node name): the
    # message carries that reason, not an empty "Inference error(s):".
    x = R.standard_normal((3, 4)).astype(np.float32)
    model = make_model([N("MeanVarianceNormalization", ["x"], ["y"], name="m")], [("x", x)],
                       ["y"])
    with pytest.raises(ck.ModelError, match=r"node 'm'.*ReduceMean: axis must be in"):
        ck.compile(model, asm=False)
