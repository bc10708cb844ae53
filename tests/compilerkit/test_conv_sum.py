"""The residual sum fused into a Conv (fuse-conv's `sums`, lowering/conv.py `sum_with`):
Conv -> Add(s) [-> activation] marked in the ONNX IR, computed in the Conv's epilogue where
the schedule has one. Checked against the same model compiled with the sum left apart (same
bits: conv + s is one rounding either way) and against onnxruntime, over every schedule the
lowering can pick, the summand on either side of the Add, and the activations after it."""

import numpy as np
import pytest
from ckhelpers import lowering_refusal, make_model, ort_run
from onnx import helper

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError
from compilerkit.lowering import conv as conv_lowering
from compilerkit.lowering import lower_to_krnl
from compilerkit.onnx_passes.fuse_conv import SUM_MARK, FuseConvPass
from compilerkit.passes import onnx_pipeline
from compilerkit.pipeline import compile_to

N = helper.make_node


def arr(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def unfused_passes():
    return [FuseConvPass(sums=False) if isinstance(p, FuseConvPass) else p
            for p in onnx_pipeline()]


def marked_adds(model, **options):
    """{Add node name: its fused_conv mark} in the ONNX IR after the ONNX passes."""
    module = compile_to("onnx-ir", model, **options)
    return {onnx_d.get_attr(op, "onnx_node_name", "?"): op.attributes[SUM_MARK].value.data
            for op in module.walk() if op.name == "onnx.Add" and SUM_MARK in op.attributes}


def residual(x_shape, w_shape, act=None, conv_first=True, bias=True, **attrs):
    """x -> Conv -> Add(., s) [-> act] -> y, s a graph input of the Conv's output shape."""
    x = arr(x_shape, 1)
    w = arr(w_shape, 2, 0.3)
    ins = ["x", "w"] + (["b"] if bias else [])
    nodes = [N("Conv", ins, ["c"], name="conv", **attrs)]
    y_shape = tuple(ort_run(make_model(nodes, [("x", x)], ["c"],
                                       [("w", w)] + ([("b", arr(w_shape[0], 3))] if bias
                                                     else [])), [x])[0].shape)
    s = arr(y_shape, 4)
    nodes.append(N("Add", ["c", "s"] if conv_first else ["s", "c"],
                   ["d" if act else "y"], name="add"))
    inits = [("w", w)] + ([("b", arr(w_shape[0], 3))] if bias else [])
    if act == "Clip":
        nodes.append(N("Clip", ["d", "lo", "hi"], ["y"], name="act"))
        inits += [("lo", np.array(-0.5, np.float32)), ("hi", np.array(1.5, np.float32))]
    elif act == "LeakyRelu":
        nodes.append(N("LeakyRelu", ["d"], ["y"], alpha=0.2, name="act"))
    elif act:
        nodes.append(N(act, ["d"], ["y"], name="act"))
    return make_model(nodes, [("x", x), ("s", s)], ["y"], inits, opset=17), [x, s]


# (x shape, W shape, Conv attributes, conv_algorithm, whether the epilogue adds s): one case
# per schedule lower_conv can pick (conv.py's module docstring)
SCHEDULES = {
    "taps": ((1, 16, 12, 12), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "classic", True),
    "taps-stride2": ((1, 8, 13, 13), (64, 8, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]},
                     "classic", True),
    "transposed-image": ((1, 48, 7, 7), (96, 48, 1, 1), {}, "classic", True),
    "transposed-image-3x3": ((1, 24, 9, 9), (72, 24, 3, 3), {"pads": [1, 1, 1, 1]}, "classic",
                             True),
    "transposed-panels": ((1, 128, 18, 18), (32, 128, 3, 3), {"pads": [1, 1, 1, 1]}, "im2col",
                          True),
    "gemm-im2col": ((1, 6, 20, 20), (16, 6, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
                    "im2col", True),
    "gemm-columns": ((1, 32, 24, 24), (48, 32, 1, 1), {}, "classic", True),
    "gemm-few-positions": ((1, 8, 9, 9), (16, 8, 1, 1), {}, "classic", False),
    "gemm-columns-grouped": ((1, 32, 24, 24), (64, 8, 1, 1), {"group": 4}, "classic", True),
    "gemm-columns-batch2": ((2, 32, 24, 24), (48, 32, 1, 1), {}, "classic", True),
    "gemm-im2col-grouped": ((1, 32, 20, 20), (64, 16, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]},
                            "classic", True),
    "grouped-direct": ((1, 8, 10, 10), (8, 2, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]},
                       "classic", False),
    "depthwise": ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]},
                  "classic", False),
    "winograd": ((1, 16, 14, 14), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd", False),
    "conv1d": ((1, 8, 40), (40, 8, 3), {"pads": [1, 1]}, "classic", True),
    "conv3d": ((1, 4, 6, 6, 6), (24, 4, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}, "classic",
               True),
}


def compiled(model, algo, passes=None):
    options = {"conv_algorithm": algo, "asm": False}
    if passes is not None:
        options["onnx_passes"] = passes
    return compile_to("native", model, **options)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("act, conv_first, bias", [(None, True, True), ("Relu", False, True),
                                                    ("Clip", True, False),
                                                    ("LeakyRelu", False, True)])
def test_fused_sum_is_the_unfused_add_bit_for_bit(monkeypatch, schedule, act, conv_first, bias):
    x_shape, w_shape, attrs, algo, in_epilogue = SCHEDULES[schedule]
    model, arrays = residual(x_shape, w_shape, act, conv_first, bias, **attrs)
    assert marked_adds(model) == {"add": 0 if conv_first else 1}
    after = []  # the schedules without an epilogue for s compute the Add after the Conv
    real = conv_lowering.lower_binary
    monkeypatch.setattr(conv_lowering, "lower_binary",
                        lambda *a: after.append(1) or real(*a))
    fused = compiled(model, algo)
    assert bool(after) is not in_epilogue
    apart = compiled(model, algo, unfused_passes())
    got = fused.run(*arrays)[0]
    np.testing.assert_array_equal(got, apart.run(*arrays)[0])
    np.testing.assert_array_equal(got, fused.run(*arrays, num_threads=2)[0])
    np.testing.assert_allclose(got, ort_run(model, arrays)[0], rtol=1e-4, atol=1e-4)


def test_special_values_in_the_summand_propagate_as_the_add_does():
    """NaN and inf in s: the fused epilogue gives what Add then Relu gives (NaN stays NaN
    through the Relu, inf + finite stays inf, -inf clamps to 0)."""
    model, (x, s) = residual((1, 32, 24, 24), (48, 32, 1, 1), "Relu")
    s = s.copy()
    s[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    s[0, 47, 23, 23] = np.nan
    got = compiled(model, "classic").run(x, s)[0]
    ref = ort_run(model, [x, s])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(ref), rtol=1e-4, atol=1e-4)


def test_the_later_of_two_convs_takes_the_add():
    """A projection shortcut: both Add operands are Convs; the later one sums the other (whose
    output is then ready), and the result is the unfused one."""
    x = arr((1, 16, 10, 10), 1)
    nodes = [N("Conv", ["x", "ws"], ["short"], name="shortcut"),
             N("Conv", ["x", "w1"], ["a"], name="c1"), N("Relu", ["a"], ["ar"]),
             N("Conv", ["ar", "w2"], ["main"], pads=[1, 1, 1, 1], name="c2"),
             N("Add", ["short", "main"], ["d"], name="add"), N("Relu", ["d"], ["y"])]
    inits = [("ws", arr((64, 16, 1, 1), 2)), ("w1", arr((8, 16, 1, 1), 3)),
             ("w2", arr((64, 8, 3, 3), 4))]
    model = make_model(nodes, [("x", x)], ["y"], inits, opset=17)
    assert marked_adds(model) == {"add": 1}
    got = compiled(model, "classic").run(x)[0]
    np.testing.assert_array_equal(got, compiled(model, "classic", unfused_passes()).run(x)[0])
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


def test_what_must_not_sum_stays_apart():
    """act(conv) + s is another sum (the Relu stays on the Conv); a broadcast summand is not
    the Conv's shape; a Conv result used twice must be written; `sums=False` marks none."""
    x = arr((1, 4, 6, 6), 1)
    nodes = [N("Conv", ["x", "w"], ["c"]), N("Relu", ["c"], ["r"]),
             N("Add", ["r", "x8"], ["y1"], name="after_relu"),
             N("Conv", ["x", "w"], ["c2"]), N("Add", ["c2", "row"], ["y2"], name="broadcast"),
             N("Conv", ["x", "w"], ["c3"]), N("Add", ["c3", "x8"], ["y3"], name="used_twice")]
    x8 = arr((1, 8, 6, 6), 5)
    row = arr((1, 8, 1, 6), 6)
    model = make_model(nodes, [("x", x), ("x8", x8), ("row", row)], ["y1", "y2", "y3", "c3"],
                       [("w", arr((8, 4, 1, 1), 2))], opset=17)
    assert marked_adds(model) == {}
    ok, _ = residual((1, 32, 24, 24), (48, 32, 1, 1), "Relu")
    assert marked_adds(ok, onnx_passes=unfused_passes()) == {}
    got = compiled(model, "classic").run(x, x8, row)
    for g, r in zip(got, ort_run(model, [x, x8, row]), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_the_fused_nests_carry_the_convs_name():
    """As onnxruntime's FusedConv: the per-node profile shows the Conv with the sum in it."""
    model, _ = residual((1, 32, 24, 24), (48, 32, 1, 1), "Relu")
    kernel = compile_to("kernel-ir", model)
    tags = {op.attributes["onnx_node"].data for op in kernel.walk()
            if "onnx_node" in op.attributes}
    assert "conv" in tags and "add" not in tags and "act" not in tags


@pytest.mark.parametrize("mark, message", [
    (2, "must be 0 or 1"),
    (1, "no Conv computes"),
])
def test_a_bad_mark_is_refused_naming_the_node(mark, message):
    model, _ = residual((1, 8, 9, 9), (16, 8, 1, 1))
    module = compile_to("onnx-ir", model, onnx_passes=unfused_passes())
    assert "'add'" in lowering_refusal(module, "onnx.Add", {SUM_MARK: mark}, message)


def test_a_mark_on_a_conv_with_its_own_activation_is_refused():
    x = arr((1, 4, 6, 6), 1)
    nodes = [N("Conv", ["x", "w"], ["c"], name="conv"), N("Relu", ["c"], ["r"]),
             N("Add", ["r", "s"], ["y"], name="add")]
    model = make_model(nodes, [("x", x), ("s", arr((1, 8, 6, 6), 2))], ["y"],
                       [("w", arr((8, 4, 1, 1), 3))], opset=17)
    module = compile_to("onnx-ir", model)
    add = next(op for op in module.walk() if op.name == "onnx.Add")
    add.attributes[SUM_MARK] = onnx_d.to_mlir_attr(0)
    with pytest.raises(ModelError, match="activation of its own") as e:
        lower_to_krnl(module)
    assert "'add'" in str(e.value) and "'conv'" in str(e.value)
