"""Resize (opsets 10 to 19) and Upsample (7, 9) (lowering/resize.py) against onnxruntime: every
mode, coordinate_transformation_mode and nearest_mode, up- and downsampling, scales and sizes,
axes, keep_aspect_ratio_policy, cubic_coeff_a and exclude_outside, extrapolation; the refusals
(antialias, the cases where ONNX's spec and reference implementation disagree, non-constant
scales) name the node and the attribute; ONNX's own node tests."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.lowering.resize import axis_taps

N = helper.make_node
R = np.random.default_rng(29)
X = R.standard_normal((1, 2, 5, 7)).astype(np.float32)
TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric"]


def _close(model, x, rtol=1e-5, atol=1e-5):
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)
    return got


def _fractional(scales):
    return any(float(np.float32(s)) * d % 1 for s, d in zip(scales, X.shape, strict=True))


def _resize(x, scales=None, sizes=None, opset=19, roi=None, name="r", **attrs):
    inputs = ["x", "roi" if roi is not None else "", "scales" if scales is not None else ""]
    inits = []
    if roi is not None:
        inits.append(("roi", np.array(roi, np.float32)))
    if scales is not None:
        inits.append(("scales", np.array(scales, np.float32)))
    if sizes is not None:
        inputs.append("sizes")
        inits.append(("sizes", np.array(sizes, np.int64)))
    return make_model([N("Resize", inputs, ["y"], name=name, **attrs)], [("x", x)], ["y"],
                      inits=inits, opset=opset)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
@pytest.mark.parametrize("transform", TRANSFORMS + ["tf_half_pixel_for_nn"])
def test_nearest_every_rounding_and_transform(nearest_mode, transform):
    # Integer-valued scales along with 1.5 and 0.6: ties at x.5 happen, and each rounding
    # mode must land where onnxruntime's float32 arithmetic lands.
    for scales in ([1, 1, 2, 1.5], [1, 1, 0.6, 0.5], [1, 1, 3, 2]):
        if transform == "align_corners" and _fractional(scales):
            continue  # refused (see test_spec_and_reference_disagree_refused)
        model = _resize(X, scales=scales, mode="nearest", nearest_mode=nearest_mode,
                        coordinate_transformation_mode=transform)
        _close(model, X, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_linear_and_cubic_every_transform(mode, transform):
    for scales in ([1, 1, 2, 3], [1, 1, 0.6, 0.5]):
        if transform == "align_corners" and _fractional(scales):
            continue  # refused
        _close(_resize(X, scales=scales, mode=mode, coordinate_transformation_mode=transform),
               X)


@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("a", [-0.75, -0.5])
def test_cubic_coefficient_and_exclude_outside(exclude, a):
    _close(_resize(X, sizes=[1, 2, 9, 4], mode="cubic", cubic_coeff_a=a,
                   exclude_outside=exclude), X)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize_with_extrapolation(mode):
    roi = [0, 0, -0.2, 0.3, 1, 1, 0.8, 1.4]  # reaches outside the input on both axes
    _close(_resize(X, sizes=[1, 2, 6, 8], roi=roi, mode=mode,
                   coordinate_transformation_mode="tf_crop_and_resize",
                   extrapolation_value=-7.0), X)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [[2, 3], [3, 2]])
def test_sizes_axes_and_aspect_ratio_policy(policy, axes):
    sizes = [8, 3] if axes == [2, 3] else [3, 8]
    _close(_resize(X, sizes=sizes, mode="linear", axes=axes, keep_aspect_ratio_policy=policy),
           X)


def test_scales_on_axes_only():
    _close(_resize(X, scales=[1.5, 2.0], mode="nearest", axes=[3, 2]), X, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_nearest_any_dtype(dtype):
    x = R.integers(-100, 100, (1, 1, 3, 4)).astype(dtype)
    _close(_resize(x, scales=[1, 1, 2.5, 1.5], mode="nearest"), x, rtol=0, atol=0)


@settings(max_examples=8, deadline=None)
@given(h=st.integers(1, 6), w=st.integers(1, 6), oh=st.integers(1, 9), ow=st.integers(1, 9),
       mode=st.sampled_from(["nearest", "linear", "cubic"]),
       transform=st.sampled_from(TRANSFORMS))
def test_random_sizes(h, w, oh, ow, mode, transform):
    x = R.standard_normal((1, 1, h, w)).astype(np.float32)
    if mode == "cubic" and transform == "pytorch_half_pixel" and 1 in (oh, ow):
        return  # refused (onnxruntime and ONNX's reference sample different points)
    _close(_resize(x, sizes=[1, 1, oh, ow], mode=mode, coordinate_transformation_mode=transform),
           x)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.8]])
def test_resize_opset10(mode, scales):
    model = make_model([N("Resize", ["x", "s"], ["y"], mode=mode)], [("x", X)], ["y"],
                       inits=[("s", np.array(scales, np.float32))], opset=10)
    _close(model, X)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_opset7_attribute_and_opset9_input(mode):
    x = R.standard_normal((1, 2, 3, 4)).astype(np.float32)
    scales = [1.0, 1.0, 2.0, 2.5]
    m7 = make_model([N("Upsample", ["x"], ["y"], mode=mode, scales=scales)], [("x", x)], ["y"],
                    opset=7)
    m9 = make_model([N("Upsample", ["x", "s"], ["y"], mode=mode)], [("x", x)], ["y"],
                    inits=[("s", np.array(scales, np.float32))], opset=9)
    np.testing.assert_array_equal(_close(m7, x), _close(m9, x))


def test_axis_taps_by_hand():
    # 2 -> 4, half_pixel linear: positions -0.25, 0.25, 0.75, 1.25 clamp to [0, 1].
    idx, w, _ = axis_taps("linear", "half_pixel", "round_prefer_floor", np.float32(2), 2, 4,
                          0, 1)
    # Clamped to the last position, both taps read it at 0.5 each (onnxruntime's weights).
    np.testing.assert_array_equal(idx, [[0, 1], [0, 1], [0, 1], [1, 1]])
    np.testing.assert_allclose(w, [[1, 0], [0.75, 0.25], [0.25, 0.75], [0.5, 0.5]])
    # Cubic at ratio 0 is the sample itself.
    idx, w, _ = axis_taps("cubic", "asymmetric", "", np.float32(1), 3, 3, 0, 1)
    np.testing.assert_allclose(w, [[0, 1, 0, 0]] * 3, atol=1e-12)


@pytest.mark.parametrize("transform", ["half_pixel", "asymmetric", "align_corners"])
def test_bilinear_rounds_as_onnxruntime_does(transform):
    # Bit for bit, not within a tolerance: a quantised model's next QuantizeLinear turns a
    # last-bit difference into a whole step. onnxruntime multiplies the weights first
    # ((wx * wy) * x), sums the four taps in order and weights a clamped edge 0.5 + 0.5; an
    # infinity at the edge stays infinite (1 * inf + 0 * inf would be NaN).
    x = (R.standard_normal((1, 3, 8, 8)) * 3).astype(np.float32)
    x[0, 0, 7, 7] = np.inf
    x[0, 1, 3, 7] = -np.inf
    model = _resize(x, scales=[1, 1, 2, 2], mode="linear",
                    coordinate_transformation_mode=transform)
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert got.tobytes() == ref.tobytes(), int((got != ref).sum())


def test_antialias_refused():
    model = _resize(X, sizes=[1, 2, 3, 3], mode="linear", antialias=1)
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'r'.*antialias=1"):
        ck.compile(model, asm=False)


@pytest.mark.parametrize("transform", ["align_corners", "tf_crop_and_resize"])
def test_spec_and_reference_disagree_refused(transform):
    # 7 * 1.5 = 10.5: the spec (and onnxruntime) divide by 10 - 1, the reference by 9.5.
    roi = [0, 0, 0, 0, 1, 1, 1, 1] if transform == "tf_crop_and_resize" else None
    model = _resize(X, scales=[1, 1, 2, 1.5], roi=roi, mode="linear",
                    coordinate_transformation_mode=transform)
    with pytest.raises(ck.UnsupportedOpError,
                       match=rf"node 'r'.*{transform} with scale 1.5 on axis 3.*give `sizes`"):
        ck.compile(model, asm=False)


def test_scales_onnxruntime_refuses_are_refused():
    with pytest.raises(ck.ModelError, match=r"node 'r' \(Resize\): scales is \[1.0, 1.0, 0.0, "
                                            r"2.0\]; expected values above 0"):
        ck.compile(_resize(X, scales=[1, 1, 0, 2]), asm=False)
    up = make_model([N("Upsample", ["x", "s"], ["y"], name="u")], [("x", X)], ["y"],
                    inits=[("s", np.array([1, 1, 0.5, 2], np.float32))], opset=9)
    with pytest.raises(ck.ModelError, match=r"node 'u' \(Upsample\): scales .* at least 1"):
        ck.compile(up, asm=False)


def test_scales_given_at_run_time_are_specialised():
    # Scales as a graph input decide the output's shape: compile specialises on their value
    # (compilerkit.specialize), one compiled form per value, each checked against onnxruntime.
    model = make_model([N("Resize", ["x", "", "s"], ["y"], name="r", mode="linear")],
                       [("x", X), ("s", np.ones(4, np.float32))], ["y"], opset=13)
    with pytest.warns(ck.SpecializationWarning):
        cm = ck.compile(model, asm=False)
        for scales in ([1, 1, 1, 1], [1, 1, 2, 2], [1, 1, 0.5, 3]):
            s = np.array(scales, np.float32)
            got = cm.run(X, s)[0]
            ref = ort_run(model, [X, s])[0]
            assert got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_onnx_node_tests():
    passed = node_test_passes({"Resize", "Upsample"})
    assert passed["Resize"] >= 33 and passed["Upsample"] >= 1, passed


def test_emulated_s390x_bilinear():
    x = R.standard_normal((1, 1, 3, 4)).astype(np.float32)
    model = _resize(x, scales=[1, 1, 2, 1.5], mode="linear")
    got = ck.compile(model, target="s390x", asm=False).run(x)[0]
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5, atol=1e-6)


def test_gpu_ptx_text():
    # No GPU is needed to generate PTX: the tables become globals, the nest one kernel.
    model = _resize(X, scales=[1, 1, 2, 2], mode="cubic")
    ptx = ck.compile_to("ptx", model, target="gpu")
    assert ptx.count(".entry") == 1 and ".global" in ptx
