"""FFT convolution (lowering/fft.py) through the conv_algorithm option: the generated radix-2
FFT against the DFT's definition, a hand-worked circular correlation, the transformed
weights, every variant against onnxruntime (hand-picked 1-D/2-D/3-D cases and a hypothesis
property over shapes, kernels, pads, bias and activations), ZNNi's pruning visible in the
Kernel IR, and the fall-back where it does not apply (strides, dilations, groups, f16,
1x1 kernels, kernels as long as the tile)."""

import cmath
import math

import numpy as np
import pytest
from ckhelpers import make_model, scaled_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.backends.host import host_target
from compilerkit.conv_tiles import choose_fft_tile, fft_variant
from compilerkit.lowering import fft
from compilerkit.lowering.conv_algorithm import ALGORITHMS, FFT, choose
from compilerkit.pipeline import compile_to

N = helper.make_node
TOLERANCE = 1e-5  # largest |error| / largest |output|; observed 1e-7 to 3e-7


class _Eval:
    """Evaluates fft's expressions on numbers (leaves hold numbers), to test the butterflies
    without compiling them."""

    def __init__(self):
        self.lz = fft._Lazy(None, None)

    def value(self, x):
        if x is None:
            return 0.0
        kind = x[0]
        if kind == "leaf":
            return x[1]
        if kind == "neg":
            return -self.value(x[1])
        if kind == "mul":
            return x[1] * self.value(x[2])
        a, b = self.value(x[1]), self.value(x[2])
        return a + b if kind == "add" else a - b


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("sign", [-1, 1])
def test_butterflies_are_the_dft(n, sign):
    """fft() is sum_j x[j] e^(sign 2 pi i f j / n), the definition, term by term."""
    ev = _Eval()
    rng = np.random.default_rng(n)
    z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    xs = [(("leaf", v.real), ("leaf", v.imag)) for v in z]
    out = [complex(ev.value(re), ev.value(im)) for re, im in fft.fft(ev.lz, xs, sign)]
    ref = [sum(z[j] * cmath.exp(sign * 2j * math.pi * f * j / n) for j in range(n))
           for f in range(n)]
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


def test_known_zeros_are_pruned():
    """A real 8-point input with only its first 2 entries non-zero (a 2-tap kernel, or a data
    slab, zero-padded to the tile): the known zeros cost no operation. Counted by hand:
    X[f] = x0 + w^f x1 needs, per f in 0..4, at most one sum for the real part and one
    product (or sign) for the imaginary one: far fewer than the full FFT's."""
    ev = _Eval()
    xs = [(("leaf", 1.0), None), (("leaf", 2.0), None)] + [(None, None)] * 6
    out = fft.fft(ev.lz, xs, -1)[:5]
    got = [complex(ev.value(re), ev.value(im)) for re, im in out]
    np.testing.assert_allclose(got, [1 + 2 * cmath.exp(-2j * math.pi * f / 8)
                                     for f in range(5)], atol=1e-12)
    nodes = set()

    def walk(x):
        if x is None or x[0] == "leaf" or id(x) in nodes:
            return
        nodes.add(id(x))
        for y in x[1:]:
            if isinstance(y, tuple):
                walk(y)
    for re, im in out:
        walk(re)
        walk(im)
    assert len(nodes) <= 12
    full = [(("leaf", 1.0), ("leaf", 0.5))] * 8
    nodes.clear()
    for re, im in fft.fft(ev.lz, full, -1):
        walk(re)
        walk(im)
    assert len(nodes) > 40


def test_circular_correlation_by_hand():
    """t = 4, x = [1, 2, 3, 4], w = [1, -1] (m = 3): the valid correlation is
    [1 - 2, 2 - 3, 3 - 4] = [-1, -1, -1]; the FFT route (1/t) IDFT(X conj(W)) gives it on its
    first m outputs, and the fourth is the wrapped x3 w0 + x0 w1 = 4 - 1 = 3."""
    x, w = np.array([1.0, 2, 3, 4]), np.array([1.0, -1, 0, 0])
    u = fft.transformed_weights(np.array([[[1.0, -1]]]), [4], 0)  # [3, 2, 2]
    xf = np.fft.rfft(x)
    ww = u[:, 0, 0] + 1j * u[:, 0, 1]  # conj(W) / 4, from the [[Wr, Wi], [-Wi, Wr]] block
    np.testing.assert_allclose(ww, np.conj(np.fft.rfft(w)) / 4)
    y = np.fft.irfft(xf * ww * 4, 4)
    np.testing.assert_allclose(y, [-1, -1, -1, 3], atol=1e-12)


def test_transformed_weights_blocks():
    """U[p] = [[Wr, Wi], [-Wi, Wr]] with W = conj(rfftn(kernel zero-padded to the tile)) / t^r:
    [xr | xi] . U[p] is the complex product x * W."""
    rng = np.random.default_rng(0)
    wt = rng.standard_normal((3, 2, 5, 5))
    u = fft.transformed_weights(wt, [8, 8], 1)
    assert u.shape == (8 * 5, 4, 6)
    pad = np.zeros((3, 2, 8, 8))
    pad[:, :, :5, :5] = wt
    spec = np.conj(np.fft.rfftn(pad, axes=(2, 3))).reshape(3, 2, -1) / 64
    xc = rng.standard_normal(2) + 1j * rng.standard_normal(2)
    for p in (0, 7, 39):
        y = np.concatenate([xc.real, xc.imag]) @ u[p]
        np.testing.assert_allclose(y[:3] + 1j * y[3:], xc @ spec[:, :, p].T, atol=1e-12)


def conv_model(x_shape, w, bias=None, pads=None, act=None, dtype=np.float32, **attrs):
    rng = np.random.default_rng(1)
    names = ["x", "w"] + (["b"] if bias is not None else [])
    inits = [("w", w.astype(dtype))] + ([("b", bias.astype(dtype))] if bias is not None
                                         else [])
    if pads is not None:
        attrs["pads"] = pads
    nodes = [N("Conv", names, ["y"], **attrs)]
    out = "y"
    if act is not None:
        nodes.append(N(act, ["y"], ["z"]))
        out = "z"
    x = rng.standard_normal(x_shape).astype(dtype)
    return make_model(nodes, [("x", x)], [out], inits, opset=17), x


@pytest.mark.parametrize("algo,x_shape,w_shape,pads,act", [
    ("fft-t8", (1, 2, 9), (3, 2, 4), [1, 2], None),  # 1-D, one tile (16 > 9 + 3)
    ("fft-t8", (2, 2, 30), (3, 2, 5), [2, 2], "Relu"),  # 1-D, 4 tiles of m = 4, ragged
    ("fft", (1, 3, 7, 9), (4, 3, 3, 5), [1, 2, 0, 1], "Sigmoid"),  # 2-D, uneven pads
    ("fft-t8-fused", (2, 3, 20, 21), (4, 3, 5, 5), [2, 2, 2, 2], "Relu"),  # fused groups
    ("fft-t8", (1, 2, 6, 10, 12), (3, 2, 5, 5, 5), [2] * 6, None),  # 3-D 5^3
    ("fft-t8", (1, 2, 6, 10, 12), (3, 2, 1, 5, 3), [0, 2, 1, 0, 1, 1], "Relu"),  # 1x5x3
    ("fft-t16", (1, 2, 9, 9, 9), (2, 2, 7, 7, 7), [3] * 6, None),  # 7^3, one tile per axis
])
def test_agrees_with_onnxruntime(algo, x_shape, w_shape, pads, act):
    rng = np.random.default_rng(len(x_shape))
    wt = rng.standard_normal(w_shape)
    bias = np.linspace(-1, 1, w_shape[0])
    model, x = conv_model(x_shape, wt, bias, pads, act)
    assert scaled_error(model, x, algo) <= TOLERANCE


def test_f64():
    """f64 (onnxruntime's CPU Conv has no double kernel): against the sum's definition,
    y[k, i, j] = sum_{c, a, b} xpad[c, i + a, j + b] w[k, c, a, b], in numpy float64."""
    wt = np.random.default_rng(2).standard_normal((2, 3, 5, 4))
    model, x = conv_model((1, 3, 11, 12), wt, pads=[2, 1, 2, 2], dtype=np.float64)
    xpad = np.pad(x[0], [(0, 0), (2, 2), (1, 2)])
    win = np.lib.stride_tricks.sliding_window_view(xpad, (5, 4), axis=(1, 2))
    ref = np.einsum("cijab,kcab->kij", win, wt)
    got = ck.compile(model, asm=False, conv_algorithm="fft-t8").run(x)[0][0]
    assert got.shape == ref.shape == (2, 11, 12)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=st.sampled_from([None, 8]), fused=st.booleans(), rank=st.integers(1, 2),
       c=st.integers(1, 3), k=st.integers(1, 3), data=st.data(), bias=st.booleans(),
       act=st.sampled_from([None, "Relu"]))
def test_property_agrees_with_onnxruntime(t, fused, rank, c, k, data, bias, act):
    """compiled == onnxruntime over 1-D/2-D shapes, kernels 1..7 per axis (at least one > 1),
    pads 0..3 and sizes that give one tile or several, ragged or not."""
    ks = data.draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank).filter(
        lambda v: max(v) > 1))
    pads = data.draw(st.lists(st.integers(0, 3), min_size=2 * rank, max_size=2 * rank))
    sp = [data.draw(st.integers(max(1, kk - pads[d] - pads[d + rank]), 20))
          for d, kk in enumerate(ks)]
    rng = np.random.default_rng(c * 10 + k)
    wt = rng.standard_normal((k, c) + tuple(ks))
    model, x = conv_model((1, c) + tuple(sp), wt, rng.standard_normal(k) if bias else None,
                          pads, act)
    algo = "fft" + (f"-t{t}" if t else "") + ("-fused" if fused else "")
    assert scaled_error(model, x, algo) <= TOLERANCE


def _conv_op(model):
    return next(op for op in compile_to("onnx-ir", model).walk() if op.name == "onnx.Conv")


@pytest.mark.parametrize("attrs,w_shape,why", [
    (dict(strides=[2, 2]), (4, 4, 5, 5), "strided"),
    (dict(dilations=[2, 2]), (4, 4, 5, 5), "dilated"),
    (dict(group=2), (4, 2, 5, 5), "grouped"),
    ({}, (4, 4, 1, 1), "kernel 1 on every axis")])
def test_falls_back_where_it_does_not_apply(attrs, w_shape, why):
    """Such a Conv gets "classic" (conv.py) under "fft", with no FFT in its Kernel IR, and
    still agrees with onnxruntime."""
    wt = np.random.default_rng(0).standard_normal(w_shape)
    model, x = conv_model((1, 4, 13, 13), wt, pads=[1, 1, 1, 1], **attrs)
    assert why in fft.applies(_conv_op(model))
    assert "fft_t" not in str(compile_to("kernel-ir", model, conv_algorithm="fft"))
    assert scaled_error(model, x, "fft") < 1e-5


def test_kernel_as_long_as_the_tile_falls_back():
    wt = np.random.default_rng(0).standard_normal((2, 2, 9, 3))
    model, x = conv_model((1, 2, 20, 20), wt, pads=[4, 1, 4, 1])
    op = _conv_op(model)
    assert "larger than 8" in fft.applies(op, 8) and fft.applies(op, 16) is None
    assert choose(op, "fft-t8") == "classic"
    assert choose(op, "fft-t16") == "fft-t16"
    assert scaled_error(model, x, "fft-t8") < 1e-5


@pytest.mark.parametrize("outlier,attrs,expected", [
    (None, {}, "fft"), (1e16, {}, "classic"), (None, dict(strides=[2, 2, 2]), "classic")])
def test_auto_takes_fft_by_the_roofline(outlier, attrs, expected):
    """"auto" on a 3-D 5^3 layer, 16 channels at 32^3 (measured about 9x faster under "fft"
    than "classic", benchmarks/results/fft_bench.json): "fft", unless the weights are badly
    scaled (one outlier) or the Conv is strided."""
    wt = np.random.default_rng(5).standard_normal((16, 16, 5, 5, 5))
    if outlier is not None:
        wt[3, 2, 1, 1, 1] = outlier
    model, _ = conv_model((1, 16, 32, 32, 32), wt, pads=[2] * 6, **attrs)
    assert choose(_conv_op(model), "auto") == expected


def test_kernel_ir_is_fft_and_pruned():
    """16 channels, 9 x 9 x 9 in, 7^3 kernel, pads 3: the whole axis fits one 16-point tile
    (9 + 6 <= 16), so U is [16 * 16 * 9, 32, 32], stored in strips of the host's kernel
    width; the forward passes after the first loop only over the 9 data slabs (positions
    3..12 of 16: ZNNi's pruning), and the inverse computes 9 outputs per axis, not 16."""
    wt = np.ones((16, 16, 7, 7, 7), np.float32)
    model, _ = conv_model((1, 16, 9, 9, 9), wt, pads=[3] * 6)
    text = str(compile_to("kernel-ir", model, conv_algorithm="fft"))
    strip = 2 * host_target().vector_width  # 32 on AVX-512: one strip; 16 on AVX2: two
    assert f"memref<2304x{32 // strip}x32x{strip}xf32>" in text and "fft_t16" in text
    assert "krnl.matmul" in text
    # first forward pass: lines over the other two axes' data slabs [3, 12), channels
    assert "[3 : i64, 12 : i64], [3 : i64, 12 : i64], [0 : i64, 16 : i64]]" in text
    # the inverse's temps hold 9 outputs of the inverted axes: [9, 16, 9, 2, 16], [9, 9, 9...
    assert "memref<9x16x9x2x16xf32>" in text and "memref<9x9x9x2x16xf32>" in text
    assert "fft" not in str(compile_to("kernel-ir", model, conv_algorithm="classic"))


def test_choose_tile():
    """The modelled choice prefers larger tiles for more channels' products and the
    t that a 5^3 kernel on 32^3 measured fastest (16: benchmarks/winograd_bench.py)."""
    assert choose_fft_tile(16, 16, [5, 5, 5], [32, 32, 32]) == 16
    assert choose_fft_tile(16, 16, [9, 9, 9], [32, 32, 32]) in (16, 32)
    assert all(t > 9 for t in [choose_fft_tile(4, 4, [9, 9], [40, 40])])


def test_names():
    assert set(FFT) < set(ALGORITHMS) and "fft9" not in ALGORITHMS
    assert fft_variant("fft") == (None, False)
    assert fft_variant("fft-t16-fused") == (16, True)
    with pytest.raises(ValueError, match="unknown conv_algorithm 'fft-t12'"):
        ck.compile(conv_model((1, 1, 5, 5), np.ones((1, 1, 3, 3)))[0],
                   conv_algorithm="fft-t12")
