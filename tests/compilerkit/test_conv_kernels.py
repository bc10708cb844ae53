"""Conv kernels (lowering/conv.py) and Conv fusion (onnx_passes/fuse_conv.py) against
onnxruntime: hypothesis over the shapes real models use (depthwise, grouped, pointwise with
and without stride, dilations, asymmetric pads, 1-D/2-D/3-D, with or without bias) and over
the activations, BatchNorm forms and Pads that fuse-conv folds into a Conv."""

import numpy as np
import pytest
from ckhelpers import check, lowering_refusal, make_model, ort_run, seeded
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import conv as conv_lowering
from compilerkit.onnx_passes.fuse_conv import ACTIVATIONS
from compilerkit.pipeline import compile_to

N = helper.make_node


def arr(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def ops_after_onnx_passes(model):
    """op name -> count in the ONNX IR after the ONNX pipeline (fusion included)."""
    module = compile_to("onnx-ir", model)
    counts = {}
    for op in module.walk():
        if op.name.startswith("onnx.") and op.name not in ("onnx.Constant", "onnx.NoValue"):
            counts[op.name[5:]] = counts.get(op.name[5:], 0) + 1
    return counts


# An activation node (or two) after the Conv's result `y`, ending in `z`: (nodes, inits).
def activation_nodes(name):
    if name == "Relu":
        return [N("Relu", ["y"], ["z"])], []
    if name == "LeakyRelu":
        return [N("LeakyRelu", ["y"], ["z"], alpha=0.1)], []
    if name == "Clip":
        return [N("Clip", ["y", "lo", "hi"], ["z"])], [("lo", np.array(0, np.float32)),
                                                      ("hi", np.array(6, np.float32))]
    if name == "HardSigmoid":
        return [N("HardSigmoid", ["y"], ["z"], alpha=0.3, beta=0.4)], []
    if name == "Swish":  # Keras SiLU: y * Sigmoid(y)
        return [N("Sigmoid", ["y"], ["s"]), N("Mul", ["s", "y"], ["z"])], []
    return [N(name, ["y"], ["z"])], []  # Sigmoid, Tanh, HardSwish


KINDS = ("dense", "depthwise", "grouped", "pointwise")


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(KINDS), rank=st.sampled_from([1, 2, 2, 2, 3]),
       c=st.integers(1, 4), m=st.integers(1, 3), size=st.integers(3, 9), k=st.integers(1, 3),
       stride=st.integers(1, 2), dil=st.integers(1, 2), pad_lo=st.integers(0, 2),
       pad_hi=st.integers(0, 2), bias=st.booleans(),
       act=st.sampled_from([None] + sorted(ACTIVATIONS)),
       schedule=st.sampled_from(["default", "small_panels", "taps"]), seed=st.integers(0, 3))
def test_conv_matches_onnxruntime(kind, rank, c, m, size, k, stride, dil, pad_lo, pad_hi, bias,
                                  act, schedule, seed):
    """Every schedule (direct for depthwise/grouped, flattened for narrow stride-1 planes,
    im2col + GEMM panels, tiny panels with a ragged last one, the tap schedule for any
    stride-1 ungrouped Conv when `schedule` forces it) and every fused activation agree with
    onnxruntime."""
    if kind == "pointwise":
        k, dil, pad_lo, pad_hi = 1, 1, 0, 0
    groups = {"dense": 1, "pointwise": 1, "depthwise": c * 2, "grouped": 2}[kind]
    c_in = {"depthwise": c * 2, "grouped": 2 * c}.get(kind, c)
    oc = {"depthwise": c_in * m, "grouped": 2 * m}.get(kind, m + 1)
    if kind == "dense" and rank == 3:
        size = min(size, 5)
    pad_lo, pad_hi = min(pad_lo, k - 1), min(pad_hi, k - 1)
    if size + pad_lo + pad_hi < dil * (k - 1) + 1:
        dil = 1
    x = arr((1, c_in) + (size,) * rank, seed)
    w = arr((oc, c_in // groups) + (k,) * rank, seed + 10, 0.5)
    inputs = ["x", "w"] + (["b"] if bias else [])
    inits = [("w", w)] + ([("b", arr((oc,), seed + 20))] if bias else [])
    nodes = [N("Conv", inputs, ["y"], group=groups, strides=[stride] * rank,
               dilations=[dil] * rank, pads=[pad_lo] * rank + [pad_hi] * rank)]
    out = "y"
    if act is not None:
        extra, more = activation_nodes(act)
        nodes += extra
        inits += more
        out = "z"
    model = make_model(nodes, [("x", x)], [out], inits, opset=17)
    from compilerkit.lowering import conv_panels, conv_taps

    forced = {"default": {}, "small_panels": {(conv_panels, "PANEL_BYTES"): 256},
              "taps": {(conv_taps, "MAX_WASTE"): float("inf")}}[schedule]
    saved = {key: getattr(*key) for key in forced}
    try:
        for (module, name), value in forced.items():
            setattr(module, name, value)
        check(model, [x], opt_level=3, rtol=1e-4, atol=1e-4)
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)
    if act is not None:
        assert ops_after_onnx_passes(model) == {"Conv": 1}


@pytest.mark.parametrize("opt_level", [0, 3])
def test_keras_batchnorm_and_relu6_fold_into_the_conv(opt_level):
    """tf2onnx's unfolded BatchNorm after a depthwise Conv (Mul and Add by [1, C, 1, 1]
    constants) and ReLU6 (Clip 0..6): one Conv remains, with the same answer."""
    x = arr((1, 4, 7, 7), 1)
    nodes = [N("Conv", ["x", "w"], ["c"], group=4, pads=[1, 1, 1, 1]),
             N("Mul", ["c", "s"], ["m"]), N("Add", ["t", "m"], ["a"]),
             N("Clip", ["a", "lo", "hi"], ["y"])]
    inits = [("w", arr((4, 1, 3, 3), 2)), ("s", arr((1, 4, 1, 1), 3) + 2),
             ("t", arr((1, 4, 1, 1), 4)), ("lo", np.array(0, np.float32)),
             ("hi", np.array(6, np.float32))]
    model = make_model(nodes, [("x", x)], ["y"], inits, opset=17)
    check(model, [x], opt_level=opt_level)
    assert ops_after_onnx_passes(model) == {"Conv": 1}


def test_batchnorm_node_and_relu_fold_into_the_conv():
    x = arr((1, 3, 8, 8), 1)
    nodes = [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             N("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["n"]),
             N("Relu", ["n"], ["y"])]
    inits = [("w", arr((5, 3, 3, 3), 2)), ("b", arr((5,), 3)), ("g", arr((5,), 4) + 1),
             ("beta", arr((5,), 5)), ("mean", arr((5,), 6)),
             ("var", np.abs(arr((5,), 7)) + 0.5)]
    model = make_model(nodes, [("x", x)], ["y"], inits, opset=15)
    check(model, [x])
    assert ops_after_onnx_passes(model) == {"Conv": 1}


def test_explicit_pad_folds_into_a_strided_depthwise_conv():
    """Keras pads before a stride-2 depthwise Conv with a Pad node (bottom/right by 1)."""
    x = arr((1, 6, 9, 9), 1)
    nodes = [N("Pad", ["x", "p"], ["xp"]),
             N("Conv", ["xp", "w"], ["y"], group=6, strides=[2, 2])]
    inits = [("p", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)), ("w", arr((6, 1, 3, 3), 2))]
    model = make_model(nodes, [("x", x)], ["y"], inits, opset=17)
    check(model, [x])
    assert ops_after_onnx_passes(model) == {"Conv": 1}


def test_what_must_not_fuse_stays_and_stays_right():
    """A Conv result also returned keeps its Relu separate; a Mul by a constant that varies over
    space is no per-channel scale; a non-zero Pad is not Conv padding."""
    x = arr((1, 2, 6, 6), 1)
    nodes = [N("Conv", ["x", "w"], ["c"]), N("Relu", ["c"], ["r"]),
             N("Conv", ["x", "w"], ["c2"]), N("Mul", ["c2", "sp"], ["m"]),
             N("Pad", ["x", "p", "v"], ["xp"]), N("Conv", ["xp", "w"], ["c3"])]
    inits = [("w", arr((3, 2, 1, 1), 2)), ("sp", arr((1, 1, 6, 6), 3)),
             ("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), ("v", np.array(2.5, np.float32))]
    model = make_model(nodes, [("x", x)], ["c", "r", "m", "c3"], inits, opset=17)
    check(model, [x])
    counts = ops_after_onnx_passes(model)
    assert counts["Relu"] == 1 and counts["Mul"] == 1 and counts["Pad"] == 1


def test_hardswish_lowers_on_its_own_too():
    x = arr((2, 3, 5), 1, 4.0)
    model = make_model([N("HardSwish", ["x"], ["y"])], [("x", x)], ["y"], opset=14)
    check(model, [x])


@pytest.mark.parametrize("attrs, message", [
    ({"activation": "Gelu"}, "fused activation"),
    ({"activation": "LeakyRelu"}, "takes 1 parameter"),
    ({"activation_params": [1.0]}, "without an activation"),
])
def test_malformed_fused_activation_is_refused_naming_the_node(attrs, message):
    """The attributes are compilerkit's (onnxruntime's FusedConv names), not ONNX's: lowering
    refuses a name or parameter count outside fuse_conv.ACTIVATIONS instead of guessing."""
    x = arr((1, 2, 4, 4), 1)
    model = make_model([N("Conv", ["x", "w"], ["y"], name="the_conv")], [("x", x)], ["y"],
                       [("w", arr((2, 2, 1, 1), 2))], opset=17)
    module = compile_to("onnx-ir", model)
    assert "the_conv" in lowering_refusal(module, "onnx.Conv", attrs, message)


def test_fused_model_keeps_every_output_name_and_shape():
    """A graph output produced by the fused activation is still the model's output."""
    x = arr((1, 2, 5, 5), 1)
    model = make_model([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
                        N("Relu", ["y"], ["out"])], [("x", x)], ["out"],
                       [("w", arr((4, 2, 3, 3), 2))], opset=17)
    cm = ck.compile(model, asm=False)
    (out,) = cm.run(x)
    assert out.shape == (1, 4, 5, 5) and (out >= 0).all()


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 32, 9, 10), (8, 16, 3, 3), dict(group=2, pads=[1, 0, 2, 1])),
    ((2, 16, 9, 10), (8, 16, 3, 2), dict(dilations=[2, 1], pads=[2, 0, 1, 1])),
    ((1, 16, 9, 10), (8, 16, 5, 5), dict(pads=[2, 2, 2, 2])),
    ((1, 16, 7, 6), (8, 16, 3, 3), {}),
])
def test_tap_schedule_on_small_planes(monkeypatch, x_shape, w_shape, attrs):
    """The tap schedule, forced onto small stride-1 Convs (by default it leaves planes where
    it would compute more than MAX_WASTE positions per output): dilated, asymmetric pads,
    unpadded, 5x5, fused (a grouped Conv keeps its own schedule)."""
    from compilerkit.lowering import conv_taps

    monkeypatch.setattr(conv_taps, "MAX_WASTE", float("inf"))
    x = arr(x_shape, 1)
    model = make_model([N("Conv", ["x", "w", "b"], ["y"], **attrs), N("Relu", ["y"], ["z"])],
                       [("x", x)], ["z"], [("w", arr(w_shape, 2, 0.3)), ("b", arr((8,), 3))],
                       opset=17)
    check(model, [x])


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 64, 7, 7), (64, 64, 1, 1), {}),                          # plain 1x1: X^T in place
    ((2, 24, 5, 6), (80, 24, 3, 3), dict(pads=[1, 1, 1, 1])),    # 80 channels: a padded strip
    ((1, 32, 9, 9), (96, 32, 3, 3), dict(strides=[2, 2], pads=[0, 1, 1, 0])),
    ((1, 16, 14, 14), (64, 16, 1, 1), dict(strides=[2, 2])),      # strided 1x1: columns
    ((1, 8, 6, 6), (70, 8, 2, 2), dict(dilations=[2, 2])),
])
def test_transposed_schedule(x_shape, w_shape, attrs):
    """out^T = X^T W^T, taken by Convs of at most TRANSPOSE_MAX_POSITIONS outputs per image
    and 64+ output channels (ResNet-50's 7 x 7 and 14 x 14 stages; from
    TRANSPOSE_FEW_POSITIONS outputs on, deep sums only), against onnxruntime."""
    x = arr(x_shape, 1)
    model = make_model([N("Conv", ["x", "w", "b"], ["y"], **attrs), N("Relu", ["y"], ["z"])],
                       [("x", x)], ["z"], [("w", arr(w_shape, 2, 0.3)),
                                           ("b", arr((w_shape[0],), 3))], opset=17)
    text = str(compile_to("kernel-ir", model, conv_algorithm="classic"))
    assert "wt_" in text, "the transposed schedule's W^T constant is missing"
    check(model, [x])


@pytest.mark.parametrize("cin, oc, residual, transposed", [
    (96, 576, False, False), (576, 96, False, True), (96, 576, True, True)])
def test_shallow_sums_on_mid_planes_take_the_plain_gemm(cin, oc, residual, transposed):
    """At 14 x 14 (from TRANSPOSE_FEW_POSITIONS outputs on), a 1x1 Conv summing at most
    TRANSPOSE_DEEP products per output takes the GEMM that stores its output in place; a
    deeper one, or one with a residual sum (+ s, then Relu) for its epilogue to add, keeps
    out^T = X^T W^T (its W^T constant, `wt_`). All onnxruntime's answer."""
    x, s = arr((1, cin, 14, 14), 1), arr((1, oc, 14, 14), 4)
    nodes = [N("Conv", ["x", "w", "b"], ["y"])]
    if residual:
        nodes += [N("Add", ["y", "s"], ["t"]), N("Relu", ["t"], ["z"])]
    model = make_model(nodes, [("x", x), ("s", s)] if residual else [("x", x)],
                       ["z" if residual else "y"],
                       [("w", arr((oc, cin, 1, 1), 2, 0.3)), ("b", arr((oc,), 3))], opset=17)
    text = str(compile_to("kernel-ir", model, conv_algorithm="classic"))
    assert ("wt_" in text) == transposed
    check(model, [x, s] if residual else [x])


def test_transposed_schedule_in_whole_strips_is_one_loop():
    """Output channels in whole strips (192 = 6 x 32 on AVX-512, 12 x 16 on AVX2): one loop
    over the strips holds each strip's bias, product and epilogue, and it is the Conv's
    parallel loop; 1 and 2 threads give the same bits, onnxruntime's answer."""
    from compilerkit.dialects import krnl

    x = arr((1, 48, 11, 11), 1)
    model = make_model([N("Conv", ["x", "w", "b"], ["y"]), N("Relu", ["y"], ["z"])],
                       [("x", x)], ["z"], [("w", arr((192, 48, 1, 1), 2, 0.3)),
                                           ("b", arr((192,), 3))], opset=17)
    kir = compile_to("kernel-ir", model, conv_algorithm="classic")
    strips = [op for op in kir.walk() if isinstance(op, krnl.IterateOp)
              and krnl.parallel_loop(op) is not None]
    assert len(strips) == 1
    inner = [op for op in strips[0].body.block.ops if isinstance(op, krnl.IterateOp)]
    # bias, product, the epilogue in blocks of 16 channels x 16 positions, then the 121st
    # position's leftover 9 (conv_common.transposing_nests)
    assert len(inner) == 4
    assert any(isinstance(op, krnl.MatMulOp) for op in strips[0].walk())
    cm = ck.compile(model, asm=False, conv_algorithm="classic")
    one = cm.run(x, num_threads=1)[0]
    np.testing.assert_array_equal(one, cm.run(x, num_threads=2)[0])
    check(model, [x])


@settings(max_examples=12, deadline=None)
@given(c=st.integers(1, 40), oc=st.integers(64, 100), size=st.integers(2, 9),
       k=st.sampled_from([1, 3]), stride=st.integers(1, 2), pad=st.integers(0, 1),
       bias=st.booleans(), batch=st.integers(1, 2))
def test_transposed_schedule_is_bit_identical_to_the_panels(c, oc, size, k, stride, pad, bias,
                                                            batch):
    """Both schedules start each output at its bias and add the products over (c, taps) in
    the same order with fused multiply-adds: not one bit may differ. (A single output
    position is left out: the panels then take the micro-kernel's dot products, which sum in
    another fixed order.)"""
    out = (size + 2 * pad - k) // stride + 1
    assume(out >= 1 and out * out >= 2)
    x = arr((batch, c, size, size), 1)
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    inits = [("w", arr((oc, c, k, k), 2, 0.3))] + ([("b", arr((oc,), 3))] if bias else [])
    model = make_model([N("Conv", inputs, ["z"], strides=[stride] * 2, pads=[pad] * 4)],
                       [("x", x)], ["z"], inits, opset=17)
    got = ck.compile(model, conv_algorithm="classic").run(x)[0]
    old = conv_lowering.TRANSPOSE_MAX_POSITIONS
    try:
        conv_lowering.TRANSPOSE_MAX_POSITIONS = 0
        panels = ck.compile(model, conv_algorithm="classic").run(x)[0]
    finally:
        conv_lowering.TRANSPOSE_MAX_POSITIONS = old
    np.testing.assert_array_equal(got, panels)


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(["Add", "Sub", "Mul", "Div"]),
       act=st.sampled_from([a for a in ACTIVATIONS if a != "Swish"]),
       b_shape=st.sampled_from([(2, 3, 4, 5), (1, 3, 1, 5), (5,), ()]))
def test_activation_fuses_into_the_elementwise_op_before_it(op, act, b_shape):
    """fuse-elementwise: the activation after Add/Sub/Mul/Div (ResNet's Add -> Relu) becomes
    the op's attribute, computed in its nest; the answer is onnxruntime's."""
    a = arr((2, 3, 4, 5), 1)
    b = np.asarray(arr(b_shape, 2) + (3.0 if op == "Div" else 0.0), np.float32)  # no x / ~0
    extra, more = activation_nodes(act)
    model = make_model([N(op, ["a", "b"], ["y"])] + extra, [("a", a), ("b", b)], ["z"], more,
                       opset=17)
    counts = ops_after_onnx_passes(model)
    assert counts == {op: 1}, counts
    check(model, [a, b])


def test_an_activation_whose_input_is_used_twice_stays_apart():
    a, b = arr((2, 3), 1), arr((2, 3), 2)
    model = make_model([N("Add", ["a", "b"], ["y"]), N("Relu", ["y"], ["z"]),
                        N("Mul", ["y", "z"], ["w"])], [("a", a), ("b", b)], ["w"], [],
                       opset=17)
    assert ops_after_onnx_passes(model) == {"Add": 1, "Relu": 1, "Mul": 1}
    check(model, [a, b])


def test_transposed_weights_of_one_value_stay_a_splat():
    """Weights made by ConstantOfShape (the light models') are one value: W^T stays a splat,
    filled at run time, so the listing does not spell out its 2.4 MB (it did: zfnet512's LLVM
    IR grew from 0.4 to 59 MB)."""
    from onnx import numpy_helper

    x = arr((1, 256, 7, 7), 1)
    fill = numpy_helper.from_array(np.array([0.02], np.float32), "fill")
    nodes = [N("ConstantOfShape", ["shape"], ["w"], value=fill),
             N("Conv", ["x", "w"], ["z"], pads=[1, 1, 1, 1])]
    model = make_model(nodes, [("x", x)], ["z"], [("shape", np.array([512, 256, 3, 3]))],
                       opset=17)
    assert "wt_" in str(compile_to("kernel-ir", model, conv_algorithm="classic"))
    cm = ck.compile(model, asm=True)  # "auto" too: no Winograd on one value
    assert len(cm.stages["llvm-ir"]) < 512 * 256 * 9 * 4 // 4
    check(model, [x])


@pytest.mark.parametrize("algo", ["classic", "auto", "winograd", "fft"])
@pytest.mark.parametrize("k,c,bias,act", [(0, 4, False, None), (0, 4, True, "Relu"),
                                          (4, 0, True, "Relu"), (4, 0, False, None),
                                          (4, 0, True, "Sigmoid")])
def test_conv_with_nothing_to_sum(algo, k, c, bias, act):
    """No output channels (an empty output) or no input channels (each output act(bias), or
    act(0)) under every algorithm: onnxruntime's answers, not a GEMM tile of size 0 (that
    failed verification) or a reshape error in Winograd's and the FFT's weight transforms."""
    x = arr((1, c, 8, 8), 1)
    extra, more = activation_nodes(act) if act else ([], [])
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    inits = [("w", arr((k, c, 3, 3), 2))] + ([("b", arr((k,), 3))] if bias else [])
    model = make_model([N("Conv", inputs, ["y"] if act else ["z"], pads=[1] * 4)] + extra,
                       [("x", x)], ["z"], inits + more, opset=17)
    got = ck.compile(model, conv_algorithm=algo, input_shapes={"x": [1, c, 8, 8]}).run(x)[0]
    ref = ort_run(model, [x])[0]
    assert got.shape == ref.shape == (1, k, 8, 8)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("algorithm", ["classic", "im2col", "direct", "winograd-f2", "fft"])
@pytest.mark.parametrize("pads", [[0, 2, 2, 0], [2, 0, 0, 2], [1, 1, 1, 1], [2, 1, 0, 1]])
def test_only_the_padding_is_zeroed_and_it_is_every_call(algorithm, pads):
    """The scratch planes (Winograd's and the FFT's padded channels-last input too) get zeros
    in their border only, a slab per side and axis (builder.fill_outside); the interior is
    the input's. The arena is shared: here a dead Tile of x * 1e30 lies under the
    planes (buffer planning puts them there), so a border slab left unwritten would put those
    values into outputs; NaN inputs on the second call."""
    x = seeded((1, 6, 11, 9), 6)
    w = seeded((16, 6, 3, 3), 8, 0.3)
    nodes = [helper.make_node("Mul", ["x", "big"], ["a"]),
             helper.make_node("Tile", ["a", "reps"], ["t"]),  # dead before the Conv
             helper.make_node("Reshape", ["t", "shape"], ["t5"]),
             helper.make_node("ReduceMax", ["t5", "axis"], ["r"], keepdims=0),
             helper.make_node("Mul", ["r", "small"], ["d"]),
             helper.make_node("Conv", ["d", "w"], ["y"], pads=pads)]
    model = make_model(nodes, [("x", x)], ["y"], [
        ("w", w), ("big", np.float32(1e30)), ("small", np.float32(1e-30)),
        ("reps", np.array([1, 16, 1, 1], np.int64)),
        ("shape", np.array([1, 16, 6, 11, 9], np.int64)), ("axis", np.array([1], np.int64))],
        opset=18)
    cm = ck.compile(model, asm=False, conv_algorithm=algorithm)
    for call in range(2):
        xin = x if call == 0 else np.where(np.arange(x.size).reshape(x.shape) % 7 == 0,
                                           np.float32(np.nan), x).astype(np.float32)
        got = cm.run(xin)[0]
        ref = ort_run(model, [xin])[0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
