"""ConvTranspose as GEMM + col2im (compilerkit/lowering/conv_transpose.py) against onnxruntime:
1-D/2-D/3-D, groups, strides below, at and above the kernel, dilations, pads, output_padding,
bias, batch, runtime weights, panels with their own column buffers (threads take them), NaN
and inf, empty batches and channels."""

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import conv_transpose

N = helper.make_node


def _model(xs, ws, attrs, bias=True, runtime_w=False, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    groups = attrs.get("group", 1)
    ins = ["x", "w"] + (["b"] if bias else [])
    inits = [] if runtime_w else [("w", w)]
    if bias:
        inits.append(("b", rng.standard_normal(ws[1] * groups).astype(dtype)))
    inputs = [("x", x)] + ([("w", w)] if runtime_w else [])
    m = make_model([N("ConvTranspose", ins, ["y"], **attrs)], inputs, ["y"], inits)
    return m, [a for _, a in inputs]


def _close(model, arrays, threads=1, rtol=1e-4):
    ref = ort_run(model, arrays)[0]
    got = ck.compile(model, asm=False).run(*arrays, num_threads=threads)[0]
    assert got.shape == ref.shape
    scale = max(float(np.abs(ref).max()), 1.0)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)
    return got


CASES = [
    # (x shape, w shape, attributes)
    ((1, 3, 7), (3, 2, 3), dict(strides=[2])),
    ((2, 4, 5), (4, 3, 4), dict(strides=[3], pads=[1, 2], dilations=[2])),
    ((1, 4, 5, 6), (4, 3, 2, 2), dict(strides=[2, 2])),                # kernel == stride
    ((1, 4, 5, 6), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1])),  # overlapping
    ((1, 4, 5, 6), (4, 3, 2, 2), dict(strides=[3, 3])),                # gaps between taps
    ((1, 6, 4, 5), (6, 2, 3, 2), dict(group=3, strides=[1, 2], output_padding=[0, 1])),
    ((2, 4, 3, 4), (4, 5, 3, 3), dict(dilations=[2, 1], pads=[2, 0, 1, 1])),
    ((1, 4, 4, 4), (4, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 4, 4, 4), (4, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    ((1, 8, 3, 4, 5), (8, 4, 2, 2, 2), dict(strides=[2, 2, 2])),       # the U-Net's up-conv
    ((1, 4, 3, 3, 3), (4, 2, 3, 3, 3), dict(strides=[2, 1, 2], pads=[1, 0, 1, 1, 0, 1])),
    ((1, 1, 4, 4), (1, 1, 1, 1), dict()),
    ((1, 3, 4, 4), (3, 1, 5, 5), dict(pads=[3, 2, 2, 3])),             # crops most taps
]


@pytest.mark.parametrize("xs,ws,attrs", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_matches_onnxruntime(xs, ws, attrs, bias):
    model, arrays = _model(xs, ws, attrs, bias=bias)
    _close(model, arrays)


@pytest.mark.parametrize("xs,ws,attrs", [CASES[2], CASES[3], CASES[9]])
def test_runtime_weights(xs, ws, attrs):
    model, arrays = _model(xs, ws, attrs, runtime_w=True)
    _close(model, arrays)


@pytest.mark.parametrize("stride,kernel", [(2, 2), (2, 3)])
def test_panels_and_threads(stride, kernel):
    """Large enough for several panels: with kernel == stride each panel has its own column
    buffer (threads take the panels); with an overlapping kernel, one buffer and a serial
    panel loop. Both agree with onnxruntime and give the same bits at 1 and 2 threads."""
    xs, ws = (1, 16, 12, 16, 16), (16, 64, kernel, kernel, kernel)
    geo_rows = 64 * kernel ** 3 * 16 * 16 * 4  # column-buffer bytes per input row
    assert geo_rows * 12 > conv_transpose.PANEL_BYTES  # more than one panel
    model, arrays = _model(xs, ws, dict(strides=[stride] * 3))
    one = _close(model, arrays, threads=1)
    cm = ck.compile(model, asm=False)
    assert np.array_equal(cm.run(*arrays, num_threads=2)[0], one)
    assert np.array_equal(cm.run(*arrays, num_threads=3)[0], one)


def test_special_values_spread_as_onnxruntime():
    """A NaN or inf in x reaches exactly the outputs its taps reach; elsewhere finite."""
    model, (x,) = _model((1, 2, 5, 5), (2, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]))
    x = x.copy()
    x[0, 0, 1, 2] = np.nan
    x[0, 1, 3, 3] = np.inf
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-4, atol=1e-4)


def test_empty_batch_and_channels():
    """Nothing to multiply: no batch entries, or no input channels (the output is the bias)."""
    for xs, ws in (((0, 2, 3, 3), (2, 3, 2, 2)), ((1, 0, 3, 3), (0, 3, 2, 2))):
        model, arrays = _model(xs, ws, dict(strides=[2, 2]))
        got = ck.compile(model, asm=False).run(*arrays)[0]
        assert got.shape == (xs[0], 3, 6, 6)
        if xs[0]:
            bias = [i for i in model.graph.initializer if i.name == "b"][0]
            want = np.broadcast_to(np.frombuffer(bias.raw_data, np.float32)[:, None, None],
                                   (3, 6, 6))
            assert np.array_equal(got[0], want)


def test_the_product_is_a_matmul_in_the_kernel_ir():
    """The lowering emits one krnl.matmul per panel (not a scalar multiply per product)."""
    model, _ = _model((1, 8, 3, 4, 5), (8, 4, 2, 2, 2), dict(strides=[2, 2, 2]))
    text = str(ck.lower(ck.optimize_onnx(ck.import_onnx(model)), opt_level=1))
    assert '"krnl.matmul"' in text and "sizes = [32 : i64, 60 : i64, 8 : i64]" in text


@pytest.mark.parametrize("xs,ws,attrs,bias,c_shape", [
    ((1, 8, 4, 4, 4), (8, 4, 2, 2, 2), {"strides": [2, 2, 2]}, False, (1, 4, 1, 1, 1)),
    ((1, 8, 4, 4, 4), (8, 4, 2, 2, 2), {"strides": [2, 2, 2]}, True, (4, 1, 1, 1)),
    ((2, 6, 5, 5), (6, 2, 3, 3), {"strides": [2, 2], "group": 3}, True, (1, 6, 1, 1)),
    ((1, 4, 5, 5), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, False, (1,))])
def test_a_bias_add_after_it_folds_into_its_bias(xs, ws, attrs, bias, c_shape):
    """ConvTranspose -> Add of a per-channel constant (a Keras Conv3DTranspose's bias) folds
    into the ConvTranspose's bias (fuse-conv): no Add is left, and the result is onnxruntime's
    on the unfused graph."""
    from compilerkit.pipeline import compile_to

    m, arrays = _model(xs, ws, attrs, bias=bias)
    c = np.random.default_rng(7).standard_normal(c_shape).astype(np.float32)
    m.graph.node[0].output[0] = "t"
    m.graph.node.append(N("Add", ["c", "t"], ["y"]))
    m.graph.initializer.append(helper.make_tensor("c", 1, c.shape, c.ravel().tolist()))
    assert "onnx.Add" not in str(compile_to("onnx-ir", m))
    _close(m, arrays)
