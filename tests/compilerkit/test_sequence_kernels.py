"""The kernels transformer blocks spend their time in, against onnxruntime: Softmax and
LogSoftmax on the last axis (lowering/norm.py: one nest per row, the max and the sum in
per-lane partials), and MatMul with a constant B (lowering/matmul.py: the weights stored in
the micro-kernel's strips). Values that tell right from nearly right: rows shorter than one
strip, rows with a tail, large logits, -inf (a causal mask) and NaN entries; the 2-thread
answer bit-identical to the 1-thread one."""

import math
import re

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.frontend.arguments import OptionError
from compilerkit.passes import parse_pipeline
from compilerkit.pipeline import compile_to

N = helper.make_node
R = np.random.default_rng(29)


def _softmax_model(op, shape, axis=-1, opset=13):
    x = np.zeros(shape, np.float32)
    return make_model([N(op, ["x"], ["y"], axis=axis)], [("x", x)], ["y"], opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(3, 5), (2, 16), (4, 37), (2, 3, 130)])
def test_softmax_rows_against_onnxruntime(op, shape):
    x = (R.standard_normal(shape) * 30).astype(np.float32)
    x.reshape(-1, shape[-1])[0, 1:] = -np.inf  # a causal mask's first row: one finite entry
    model = _softmax_model(op, shape)
    cm = ck.compile(model, asm=False)
    got = cm.run(x, num_threads=1)[0]
    ref = ort_run(model, [x])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert got.tobytes() == cm.run(x, num_threads=2)[0].tobytes()


def test_softmax_rows_nan_and_opset_11():
    """A NaN makes its row NaN and leaves the others alone; opset 11 flattens at axis 1, so a
    2-D input's rows are the same rows."""
    x = (R.standard_normal((3, 50)) * 5).astype(np.float32)
    x[1, 17] = np.nan
    for opset, axis in ((13, -1), (11, 1)):
        model = _softmax_model("Softmax", x.shape, axis=axis, opset=opset)
        got = ck.compile(model, asm=False).run(x)[0]
        assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()
        np.testing.assert_allclose(got[[0, 2]], ort_run(model, [x])[0][[0, 2]], rtol=1e-5,
                                   atol=1e-6)


def test_softmax_rows_sum_to_one_in_long_rows():
    """Rows of 4097 (256 strips and a tail of 1): each row's terms are all counted once."""
    x = R.standard_normal((2, 4097)).astype(np.float32)
    got = ck.compile(_softmax_model("Softmax", x.shape), asm=False).run(x)[0]
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=1), 1.0, rtol=1e-5)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-9)


def _matmul(m, k, n, batch=()):
    w = R.standard_normal((k, n)).astype(np.float32)
    x = R.standard_normal((*batch, m, k)).astype(np.float32)
    const = make_model([N("MatMul", ["x", "w"], ["y"])], [("x", x)], ["y"], inits=[("w", w)])
    given = make_model([N("MatMul", ["x", "w"], ["y"])], [("x", x), ("w", w)], ["y"])
    return x, w, const, given


@pytest.mark.parametrize("m,k,n,batch,strips", [
    (128, 64, 256, (), True),     # the transformer projection's shape: strips
    (8, 32, 64, (2, 3), True),    # batch rows gathered into one product (48 rows)
    (4, 64, 64, (), False),       # few rows: the kernel reads B in place anyway
    (32, 16, 40, (), False),      # N not whole strips
    (30, 16, 1024, (), False),    # wide N: packing measured faster
])
def test_matmul_constant_weights(m, k, n, batch, strips):
    """x @ W with W an initializer agrees with W given at run time bit for bit (K within one
    k tile: the same sums in the same order) and with float64; the strips are used exactly
    where `_constant_strips` says (a `bt_` global in the Kernel IR)."""
    x, w, const, given = _matmul(m, k, n, batch)
    got = ck.compile(const, asm=False).run(x)[0]
    assert got.tobytes() == ck.compile(given, asm=False).run(x, w)[0].tobytes()
    want = x.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    kir = compile_to("kernel-ir", const)
    assert ("bt_" in str(kir)) == strips


@pytest.mark.parametrize("kind,attrs,batch", [
    ("LSTM", {}, 1), ("GRU", {}, 1), ("GRU", {"linear_before_reset": 1}, 1), ("LSTM", {}, 3)])
def test_recurrent_weights_layout_against_onnxruntime(kind, attrs, batch):
    """Batch 1 keeps R^T row-major (one call of the one-row kernel over every gate), larger
    batches in strips (lowering/recurrent.py); both answer as onnxruntime does, both
    directions, the 2-thread answer the 1-thread one's bits."""
    seq, inp, hid = 5, 6, 24
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    w = (R.standard_normal((2, g * hid, inp)) * 0.3).astype(np.float32)
    r = (R.standard_normal((2, g * hid, hid)) * 0.3).astype(np.float32)
    bias = (R.standard_normal((2, 2 * g * hid)) * 0.3).astype(np.float32)
    x = R.standard_normal((seq, batch, inp)).astype(np.float32)
    model = make_model([N(kind, ["x", "w", "r", "b"], ["y", "y_h"], hidden_size=hid,
                          direction="bidirectional", **attrs)], [("x", x)], ["y", "y_h"],
                       inits=[("w", w), ("r", r), ("b", bias)])
    cm = ck.compile(model, asm=False)
    got = cm.run(x, num_threads=1)
    for a, ref in zip(got, ort_run(model, [x]), strict=True):
        np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-5)
    assert all(a.tobytes() == c.tobytes()
               for a, c in zip(got, cm.run(x, num_threads=2), strict=True))
    kir = str(compile_to("kernel-ir", model))
    layouts = re.findall(r'sym_name = "rt_[^"]*", value = [^:]*: tensor<([^>]*)>', kir)
    assert len(layouts) == 2  # one R^T per direction
    assert all(t.startswith(f"{hid}x") == (batch == 1) for t in layouts)


@pytest.mark.parametrize("shape,offset", [((2, 3, 40), 0.0), ((1, 64, 256), 0.0),
                                          ((4, 37), 1000.0)])
def test_layer_norm_rows_against_onnxruntime(shape, offset):
    """LayerNormalization on the last axis, one nest per row with per-lane sums
    (lowering/normalization.py normalize_rows): Y, Mean and InvStdDev as onnxruntime's, a
    row with a tail, rows of mean 1000 and spread 1e-2 (the shift by the row's first
    element keeps their digits), the 2-thread answer the 1-thread one's bits."""
    d = shape[-1]
    scale = 1e-2 if offset else 1.0
    x = (R.standard_normal(shape) * scale + offset).astype(np.float32)
    gamma, beta = R.standard_normal(d).astype(np.float32), R.standard_normal(d).astype(
        np.float32)
    model = make_model([N("LayerNormalization", ["x", "g", "b"], ["y", "mean", "isd"],
                          axis=-1)], [("x", x)], ["y", "mean", "isd"],
                       inits=[("g", gamma), ("b", beta)], opset=17)
    cm = ck.compile(model, asm=False)
    got = cm.run(x, num_threads=1)
    ref = ort_run(model, [x])
    x64 = x.astype(np.float64)
    m64 = x64.mean(axis=-1, keepdims=True)
    y64 = (x64 - m64) / np.sqrt(((x64 - m64) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    y64 = y64 * gamma + beta
    # within float32 rounding of the exact answer, and no further from it than onnxruntime
    np.testing.assert_allclose(got[0], y64, rtol=1e-4, atol=1e-4 * (1 + offset))
    assert np.abs(got[0] - y64).max() <= np.abs(ref[0] - y64).max() * 1.01 + 1e-6
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-6, atol=1e-6 * scale)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-4)
    assert all(a.tobytes() == c.tobytes()
               for a, c in zip(got, cm.run(x, num_threads=2), strict=True))


@pytest.mark.parametrize("grouping", ["torch", "halved", "keras_tanh"])
def test_gelu_chain_becomes_one_gelu(grouping):
    """fuse-gelu (onnx_passes/fuse_gelu.py): the exact GELU in five nodes (either grouping)
    and the tanh form in eight are one Gelu in the ONNX IR, answering as onnxruntime does
    (NaN and infinities included); a bad tolerance is an OptionError naming the pass."""
    x = R.standard_normal((2, 8, 16)).astype(np.float32) * 3
    x[0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    consts = [("s2", np.float32(math.sqrt(2))), ("one", np.float32(1.0)),
              ("half", np.float32(0.5))]
    if grouping == "torch":
        nodes = [N("Div", ["x", "s2"], ["u"]), N("Erf", ["u"], ["e"]),
                 N("Add", ["e", "one"], ["a"]), N("Mul", ["x", "a"], ["m"]),
                 N("Mul", ["m", "half"], ["y"])]
    elif grouping == "halved":
        nodes = [N("Div", ["x", "s2"], ["u"]), N("Erf", ["u"], ["e"]),
                 N("Add", ["one", "e"], ["a"]), N("Mul", ["half", "x"], ["h"]),
                 N("Mul", ["h", "a"], ["y"])]
    else:
        consts += [("three", np.float32(3.0)), ("c", np.float32(0.044715)),
                   ("k", np.float32(math.sqrt(2 / math.pi)))]
        nodes = [N("Mul", ["half", "x"], ["h"]), N("Pow", ["x", "three"], ["p"]),
                 N("Mul", ["c", "p"], ["t"]), N("Add", ["x", "t"], ["i"]),
                 N("Mul", ["k", "i"], ["s"]), N("Tanh", ["s"], ["e"]),
                 N("Add", ["one", "e"], ["a"]), N("Mul", ["h", "a"], ["y"])]
    model = make_model(nodes, [("x", x)], ["y"], inits=consts, opset=17)
    ir = str(compile_to("onnx-ir", model))
    assert "onnx.Gelu" in ir and "onnx.Erf" not in ir and "onnx.Tanh" not in ir
    got = ck.compile(model, asm=False).run(x)[0]
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(OptionError, match="fuse-gelu"):
        parse_pipeline("fuse-gelu{tolerance=0.5}")


def test_row_kernels_same_bits_on_the_emulated_target():
    """The per-row partials are a fixed count (norm.ROW_PARTIALS), not the target's lanes:
    the 4-lane s390x target (big-endian, emulated) computes Softmax and LayerNormalization
    rows bit for bit as the host does."""
    x = (R.standard_normal((3, 37)) * 4).astype(np.float32)
    gamma = R.standard_normal(37).astype(np.float32)
    model = make_model([N("Softmax", ["x"], ["s"], axis=-1),
                        N("LayerNormalization", ["s", "g"], ["y"], axis=-1)],
                       [("x", x)], ["s", "y"], inits=[("g", gamma)], opset=17)
    host = ck.compile(model, asm=False).run(x)
    emulated = ck.compile(model, target="s390x", asm=False).run(x)
    assert all(a.tobytes() == e.tobytes() for a, e in zip(host, emulated, strict=True))
