"""Pooling kernels (lowering/pool.py) against onnxruntime over drawn attributes: kernel, strides,
dilations (MaxPool), asymmetric pads, auto_pad, ceil_mode, count_include_pad, 1-D/2-D/3-D, f32
and f64 (MaxPool). MaxPool must match exactly (a max is exact); AveragePool within 1e-6 of the
input's scale (onnxruntime may sum a window in another order). Every answer is the same, bit
for bit, at 1 and at 2 threads."""

import functools

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pools(draw):
    """(op, attributes, input shape, dtype) for a MaxPool or AveragePool that onnxruntime
    accepts: pads below the kernel, every output axis at least 1 long."""
    kind = draw(st.sampled_from(["MaxPool", "AveragePool"]))
    r = draw(st.integers(1, 3))
    k = [draw(st.integers(1, 4 if r < 3 else 3)) for _ in range(r)]
    strides = [draw(st.integers(1, 3)) for _ in range(r)]
    dil = [draw(st.integers(1, 2)) if kind == "MaxPool" else 1 for _ in range(r)]
    span = [(k[d] - 1) * dil[d] + 1 for d in range(r)]
    size = [draw(st.integers(span[d], span[d] + (9 if r < 3 else 4))) for d in range(r)]
    attrs = {"kernel_shape": k, "strides": strides}
    if kind == "MaxPool" and any(d > 1 for d in dil):
        attrs["dilations"] = dil
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if auto == "NOTSET":
        attrs["pads"] = [draw(st.integers(0, k[d] - 1)) for d in range(r)] + \
                        [draw(st.integers(0, k[d] - 1)) for d in range(r)]
        attrs["ceil_mode"] = draw(st.integers(0, 1))
    else:
        attrs["auto_pad"] = auto
        if auto != "VALID" and attrs.pop("dilations", None):
            # onnxruntime sizes a dilated SAME MaxPool as if undilated (ONNX's shape inference,
            # which compilerkit follows, says ceil(in / stride)): no common answer to test.
            dil = [1] * r
        if auto != "VALID":  # onnxruntime refuses SAME with a stride above the kernel
            attrs["strides"] = [min(s, kk) for s, kk in zip(strides, k, strict=True)]
    if kind == "AveragePool":
        attrs["count_include_pad"] = draw(st.integers(0, 1))
    dtype = np.float32 if kind == "AveragePool" else draw(st.sampled_from([np.float32,
                                                                           np.float64]))
    shape = [draw(st.integers(1, 2)), draw(st.integers(1, 3))] + size
    return kind, attrs, shape, dtype


def _model(kind, attrs, x):
    node = helper.make_node(kind, ["x"], ["y"], name="pool", **attrs)
    return make_model([node], [("x", x)], ["y"])


def _compare(kind, model, x):
    ref = ort_run(model, [x])[0]
    cm = ck.compile(model, asm=False)
    one = cm.run(x, num_threads=1)[0]
    two = cm.run(x, num_threads=2)[0]
    assert one.shape == ref.shape and one.dtype == ref.dtype
    assert one.tobytes() == two.tobytes(), "the answer changed with the thread count"
    if kind in ("MaxPool", "GlobalMaxPool"):
        np.testing.assert_array_equal(one, ref)
    else:
        np.testing.assert_allclose(one, ref, rtol=1e-6, atol=1e-6 * float(np.max(np.abs(x))))


@SETTINGS
@given(case=pools(), seed=st.integers(0, 2**16))
def test_pool_matches_onnxruntime(case, seed):
    kind, attrs, shape, dtype = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    _compare(kind, _model(kind, attrs, x), x)


@SETTINGS
@given(kind=st.sampled_from(["GlobalAveragePool", "GlobalMaxPool"]),
       spatial=st.lists(st.integers(1, 11), min_size=1, max_size=3),
       n=st.integers(1, 2), c=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_global_pool_matches_onnxruntime(kind, spatial, n, c, seed):
    x = np.random.default_rng(seed).standard_normal([n, c] + spatial).astype(np.float32)
    _compare(kind, _model(kind, {}, x), x)


@pytest.mark.parametrize("kind", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("plane", [[7, 7], [12, 12], [13, 13], [11, 11], [9, 9], [17, 17],
                                   [5, 7], [2, 31]])
def test_global_pool_on_every_path(kind, plane):
    """Each path of lower_global_pool: the whole plane unrolled (7 x 7), chunks (12 x 12 in 48s,
    9 x 9 in 27s), running lanes for large planes (17 x 17) and for planes whose chunks would
    be short (13 x 13: chunks of 13; 11 x 11; 2 x 31), against onnxruntime and a float64 sum."""
    x = np.random.default_rng(7).standard_normal([2, 5] + plane).astype(np.float32)
    x[1, 3].flat[-1] = 40.0  # the last element lands in a lane of its own
    _compare(kind, _model(kind, {}, x), x)
    y = ck.compile(_model(kind, {}, x), asm=False).run(x)[0].reshape(2, 5)
    ref = (x.astype(np.float64).mean(axis=(2, 3)) if kind == "GlobalAveragePool"
           else x.max(axis=(2, 3)))
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_strided_padded_maxpool_reads_the_padding_as_minus_infinity():
    """The column-phase copy (_phase_split): a 3x3 stride-2 window with pads 1 over all-negative
    input must never see a 0 from the padding; ResNet's stem pool on a small plane."""
    x = -1.0 - np.arange(2 * 3 * 9 * 10, dtype=np.float32).reshape(2, 3, 9, 10)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    model = _model("MaxPool", attrs, x)
    _compare("MaxPool", model, x)
    # hand-worked corner: window rows -1..1, columns -1..1 of plane (0, 0) holds x[0,0,0:2,0:2]
    y = ck.compile(model, asm=False).run(x)[0]
    assert y[0, 0, 0, 0] == x[0, 0, :2, :2].max() == -1.0


@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
def test_a_nan_tap_is_skipped_by_max_unless_the_window_holds_only_nans(codegen):
    """MaxPool folds its taps with maxNum: a NaN tap is skipped, as in ONNX's reference
    evaluator and onnxruntime's 1D kernel (its 2D/3D kernels return NaN exactly when a window's
    last tap is NaN, and otherwise the max of the taps after the last NaN: an artifact of tap
    order, not a rule); a window of NaNs only (or NaNs and padding) stays NaN."""
    from onnx.reference import ReferenceEvaluator

    x = np.zeros((1, 1, 5, 6), np.float32)
    x[0, 0, 2, 3] = np.nan
    x[0, 0, 0:2, 0:2] = np.nan  # the first window (rows -1..1, columns -1..1) sees only these
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    model = _model("MaxPool", attrs, x)
    y = ck.compile(model, asm=False, codegen=codegen).run(x)[0]
    expect = np.zeros((3, 3), np.float32)
    expect[0, 0] = np.nan
    np.testing.assert_array_equal(y[0, 0], expect)
    unpadded = _model("MaxPool", {"kernel_shape": [3, 3]}, x)
    want = ReferenceEvaluator(unpadded).run(None, {"x": x})[0]
    got = ck.compile(unpadded, asm=False, codegen=codegen).run(x)[0]
    np.testing.assert_array_equal(got, want)


@settings(max_examples=15, deadline=None)
@given(size=st.integers(3, 9), k=st.integers(2, 4), stride=st.integers(1, 3),
       pads=st.lists(st.integers(0, 2), min_size=4, max_size=4), seed=st.integers(0, 99))
def test_zero_pad_of_a_relu_output_folds_into_the_maxpool(size, k, stride, pads, seed):
    """Relu -> zero Pad -> MaxPool (ResNet-50's stem): fold-pool-pad moves the Pad into the
    MaxPool's pads where every window keeps an input value (each side's pad shorter than the
    window), and the answer is onnxruntime's either way."""
    from compilerkit.pipeline import compile_to

    x = np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(np.float32)
    spatial = [pads[0], pads[1], pads[2], pads[3]]
    pad_values = np.array([0, 0] + spatial[:2] + [0, 0] + spatial[2:], np.int64)
    model = make_model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Pad", ["r", "p"], ["rp"]),
         helper.make_node("MaxPool", ["rp"], ["y"], kernel_shape=[k, k], strides=[stride] * 2)],
        [("x", x)], ["y"], [("p", pad_values)], opset=17)
    assume(min(size + spatial[0] + spatial[2], size + spatial[1] + spatial[3]) >= k)
    folded = "onnx.Pad" not in str(compile_to("onnx-ir", model))
    assert folded == all(p < k for p in spatial)
    got = ck.compile(model).run(x)[0]
    np.testing.assert_array_equal(got, ort_run(model, [x])[0])


def _maxnum_pool(x, k, strides, dil, pads, out_sp):
    """MaxPool as a plain loop over the window in kernel order: maxNum from NaN (a NaN tap or
    padding skipped, a window of no number NaN), a tie keeping the earlier tap (t > v), so
    -0.0 and +0.0 come out as the window's first maximum."""
    r = len(k)
    acc = np.full(x.shape[:2] + tuple(out_sp), np.nan, x.dtype)
    for ks in np.ndindex(*k):
        idx = [np.arange(out_sp[d]) * strides[d] + ks[d] * dil[d] - pads[d] for d in range(r)]
        inside = functools.reduce(np.logical_and, [
            ((i >= 0) & (i < x.shape[2 + d])).reshape([-1 if e == d else 1 for e in range(r)])
            for d, i in enumerate(idx)])
        t = x[(slice(None), slice(None)) + np.ix_(*[np.clip(i, 0, x.shape[2 + d] - 1)
                                                     for d, i in enumerate(idx)])]
        t = np.where(inside, t, np.nan)
        acc = np.where(np.isnan(acc) | (t > acc), t, acc)
    return acc


def _same_bits(a, b):
    """Equal values, -0.0 / +0.0 signs and NaN positions (NaN payloads aside)."""
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and a[~nan].tobytes() == b[~nan].tobytes()


@pytest.mark.parametrize("shape,attrs", [
    ([2, 3, 23, 37], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ([1, 4, 27, 27], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ([1, 2, 20, 41], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # stride 1: row tails
    ([1, 2, 9, 40], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ([1, 3, 7, 8, 9], {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0],
                       "dilations": [1, 2, 1]}),
    ([2, 2, 50], {"kernel_shape": [4], "strides": [3], "pads": [2, 3], "ceil_mode": 1}),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maxpool_special_values_match_a_maxnum_loop_bit_for_bit(shape, attrs, dtype):
    """The fast fold (pool.py `_window`, v = t if t > v else v from the first tap) with the
    plane redone by maxNum where a NaN shows up: inputs with NaN (also as windows' first taps,
    and whole windows of NaN), +-inf and -0.0 / +0.0 ties give the plain maxNum loop's answer,
    signs of zero included, at 1 and 2 threads; planes without NaN take the fast fold alone."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(dtype)
    u = rng.random(shape)
    x[u < 0.2] = 0.0
    x[(u >= 0.2) & (u < 0.4)] = -0.0
    x[(u >= 0.4) & (u < 0.5)] = np.nan
    x[(u >= 0.5) & (u < 0.53)] = -np.inf
    x[(u >= 0.53) & (u < 0.55)] = np.inf
    x[0, 0] = np.nan  # a plane of NaNs only
    x[-1, -1] = rng.standard_normal(shape[2:])  # and one with no special value
    model = _model("MaxPool", attrs, x)
    cm = ck.compile(model, asm=False)
    one, two = cm.run(x, num_threads=1)[0], cm.run(x, num_threads=2)[0]
    r = len(shape) - 2
    pads = attrs.get("pads", [0] * 2 * r)[:r]
    want = _maxnum_pool(x, attrs["kernel_shape"], attrs.get("strides", [1] * r),
                        attrs.get("dilations", [1] * r), pads, one.shape[2:])
    assert _same_bits(one, want) and _same_bits(two, want)
    assert np.isnan(one[0, 0]).all()


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [1, 2], "ceil_mode": 1},
    {"kernel_shape": [9, 9], "pads": [4, 4, 4, 4]},  # more than MAX_TAPS: the padded scratch
])
def test_int8_maxpool_matches_onnxruntime(attrs):
    """An integer MaxPool folds from the type's least value (onnxruntime's start; there is no
    NaN to skip), padded or not, at 1 and 2 threads."""
    x = np.random.default_rng(3).integers(-128, 128, (2, 3, 11, 12)).astype(np.int8)
    _compare("MaxPool", _model("MaxPool", attrs, x), x)
