"""Winograd convolution (lowering/winograd.py) and the conv_algorithm option
(lowering/conv_algorithm.py): the transform matrices against Lavin & Gray's published F(2,3)
and a hand-worked case, every variant against onnxruntime (hypothesis over small shapes,
pads, bias, activations), its error against the output's scale, and the fall-back and
refusals of the option."""

from fractions import Fraction

import numpy as np
import pytest
from ckhelpers import make_model, scaled_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit import conv_tiles
from compilerkit.backends.host import host_target
from compilerkit.conv_tiles import winograd_variant
from compilerkit.frontend import ModelError
from compilerkit.lowering import winograd
from compilerkit.lowering.builder import chunk_count
from compilerkit.lowering.conv_algorithm import ALGORITHMS, WINOGRAD
from compilerkit.pipeline import compile_to
from compilerkit.winograd_tables import MATRICES

N = helper.make_node

# Largest |error| allowed, as a fraction of the largest |output| (onnxruntime's), per F(m, 3).
# The transforms' constants grow with m (F(6,3)'s B^T holds 21/4, its A^T 32): F(6,3) is the
# least accurate (Lavin & Gray, section 5). Observed on 64-channel layers: about 3e-7, 4e-6
# and 7e-6 (benchmarks/winograd_bench.py); these bounds leave a margin of 10 or more.
TOLERANCE = {2: 1e-5, 4: 1e-4, 6: 1e-3}

# Lavin & Gray 2016, section 4.1, F(2x2, 3x3):
LAVIN_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float)
LAVIN_G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]])
LAVIN_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float)


def test_f23_matrices_are_lavin_and_grays():
    """wincnn's F(2,3) from the points (0, 1, -1, inf) is Lavin & Gray's, up to the sign that
    the point at infinity's row of B^T and column of A^T take together (both flip, so every
    product is the same)."""
    at, g, bt = conv_tiles.winograd_matrices(2)
    flip = np.diag([1, 1, 1, -1.0])
    np.testing.assert_array_equal(g, LAVIN_G)
    np.testing.assert_array_equal(flip @ bt, LAVIN_BT)
    np.testing.assert_array_equal(at @ flip, LAVIN_AT)


@pytest.mark.parametrize("m,r", sorted(MATRICES))
def test_the_tables_are_wincnns(m, r):
    """winograd_tables.py holds wincnn's cookToomFilter answers: rebuilt here with wincnn, the
    same rationals entry for entry, so the same float64 matrices bit for bit."""
    pytest.importorskip("wincnn")
    ref = conv_tiles.wincnn_matrices(m, r)
    table = [[[Fraction(x) for x in row] for row in mat] for mat in MATRICES[(m, r)]]
    assert table == ref
    for got, theirs in zip(conv_tiles.winograd_matrices(m, r), ref, strict=True):
        want = np.array([[float(x) for x in row] for row in theirs], dtype=np.float64)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_other_sizes_ask_wincnn():
    pytest.importorskip("wincnn")
    assert (7, 2) not in MATRICES
    at, g, bt = conv_tiles.winograd_matrices(7, 2)
    assert at.shape == (7, 8) and g.shape == (8, 2) and bt.shape == (8, 8)


def test_f23_hand_worked():
    """d = [1, 2, 3, 4], g = [1, 0, -1]: y0 = 1 - 3 = -2, y1 = 2 - 4 = -2 (correlation, as ONNX
    Conv). By hand with Lavin & Gray's matrices: B^T d = [-2, 5, 1, -2], G g = [1, 0, 0, -1],
    their product [-2, 0, 0, 2], A^T of it [-2, -2]."""
    d, g = np.array([1.0, 2, 3, 4]), np.array([1.0, 0, -1])
    np.testing.assert_array_equal(LAVIN_BT @ d, [-2, 5, 1, -2])
    np.testing.assert_array_equal(LAVIN_G @ g, [1, 0, 0, -1])
    np.testing.assert_array_equal(LAVIN_AT @ ((LAVIN_G @ g) * (LAVIN_BT @ d)), [-2, -2])
    at, gm, bt = conv_tiles.winograd_matrices(2)
    np.testing.assert_allclose(at @ ((gm @ g) * (bt @ d)), [-2, -2], atol=1e-12)


@pytest.mark.parametrize("m", [2, 4, 6])
def test_one_dimensional_correlation(m):
    """A^T [(G g) * (B^T d)] is the valid correlation of d (m + 2 values) with g (3)."""
    rng = np.random.default_rng(m)
    at, g, bt = conv_tiles.winograd_matrices(m)
    assert at.shape == (m, m + 2) and g.shape == (m + 2, 3) and bt.shape == (m + 2, m + 2)
    for _ in range(5):
        d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
        np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), np.correlate(d, w, "valid"),
                                   rtol=1e-12, atol=1e-12)


def test_transformed_weights():
    """U[t, c, k] is (G w[k, c] G^T) flattened row-major over (xi, nu)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2, 3, 3))
    u = winograd.transformed_weights(w, [4, 4])
    g = conv_tiles.winograd_matrices(4)[1]
    assert u.shape == (36, 2, 3)
    for k in range(3):
        for c in range(2):
            np.testing.assert_allclose(u[:, c, k], (g @ w[k, c] @ g.T).reshape(-1), rtol=1e-12)


def conv_model(x_shape, w, bias=None, pads=None, act=None, **attrs):
    rng = np.random.default_rng(1)
    names = ["x", "w"] + (["b"] if bias is not None else [])
    inits = [("w", w)] + ([("b", bias)] if bias is not None else [])
    if pads is not None:
        attrs["pads"] = pads
    nodes = [N("Conv", names, ["y"], **attrs)]
    out = "y"
    if act == "Clip":
        nodes.append(N("Clip", ["y", "lo", "hi"], ["z"]))
        inits += [("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))]
        out = "z"
    elif act is not None:
        nodes.append(N(act, ["y"], ["z"]))
        out = "z"
    x = rng.standard_normal(x_shape).astype(np.float32)
    return make_model(nodes, [("x", x)], [out], inits, opset=17), x


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(algo=st.sampled_from(WINOGRAD), n=st.integers(1, 2), c=st.integers(1, 5),
       k=st.integers(1, 5), h=st.integers(3, 11), w=st.integers(3, 11),
       pads=st.lists(st.integers(0, 2), min_size=4, max_size=4), bias=st.booleans(),
       act=st.sampled_from([None, "Relu", "Clip", "Sigmoid"]))
def test_winograd_agrees_with_onnxruntime(algo, n, c, k, h, w, pads, bias, act):
    rng = np.random.default_rng(c * 7 + k)
    wt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if bias else None
    model, x = conv_model((n, c, h, w), wt, b, pads, act)
    m, _ = winograd_variant(algo)
    assert scaled_error(model, x, algo) <= TOLERANCE[m]


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(algo=st.sampled_from(["winograd-f2", "winograd-f4-fused", "winograd-f6", "fft"]),
       c=st.integers(1, 9), k=st.sampled_from([16, 32, 64]), size=st.integers(4, 13),
       bias=st.booleans())
def test_products_on_strips_are_bit_identical(monkeypatch, algo, c, k, size, bias):
    """U stored in strips the micro-kernel reads unpacked (winograd.batched_weights) gives
    the same sums in the same order as U read whole: not one bit may differ, whatever the
    strip width (AVX-512's 32 columns, AVX2's 16; the FFT's products have 2K columns)."""
    from compilerkit.lowering import matmul
    rng = np.random.default_rng(c * 13 + k + size)
    ks = 5 if algo == "fft" else 3
    wt = rng.standard_normal((k, c, ks, ks)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if bias else None
    model, x = conv_model((1, c, size, size), wt, b, [ks // 2] * 4, "Relu")
    outs = {}
    # n + 1 columns never divide n: U read whole
    for name, width in [("32", lambda n, lanes: 32), ("16", lambda n, lanes: 16),
                        ("whole", lambda n, lanes: n + 1)]:
        monkeypatch.setattr(matmul, "strip_width", width)
        outs[name] = ck.compile(model, conv_algorithm=algo).run(x)[0]
    np.testing.assert_array_equal(outs["32"], outs["whole"])
    np.testing.assert_array_equal(outs["16"], outs["whole"])


@pytest.mark.parametrize("algo,x_shape,w_shape,pads", [
    ("winograd-f2", (1, 3, 5, 6, 7), (4, 3, 3, 3, 3), [1, 1, 1, 1, 1, 1]),
    ("winograd-f4-fused", (2, 2, 4, 9, 5), (3, 2, 1, 3, 3), [0, 1, 0, 0, 2, 1]),
    ("winograd-f6", (1, 2, 9, 10), (3, 2, 1, 3), [0, 1, 0, 1]),
])
def test_three_d_and_mixed_kernels(algo, x_shape, w_shape, pads):
    wt = np.random.default_rng(3).standard_normal(w_shape).astype(np.float32)
    bias = np.linspace(-1, 1, w_shape[0]).astype(np.float32)
    model, x = conv_model(x_shape, wt, bias, pads, "Relu")
    assert scaled_error(model, x, algo) <= TOLERANCE[winograd_variant(algo)[0]]


def test_error_grows_with_tile_size():
    """On a 32-channel layer the error, relative to the output's scale, stays inside the
    stated bounds and is largest for F(6,3), smallest for F(2,3)."""
    rng = np.random.default_rng(5)
    wt = (rng.standard_normal((8, 32, 3, 3)) / np.sqrt(9 * 32)).astype(np.float32)
    model, x = conv_model((1, 32, 24, 24), wt, pads=[1, 1, 1, 1])
    err = {m: scaled_error(model, x, f"winograd-f{m}") for m in (2, 4, 6)}
    assert all(err[m] <= TOLERANCE[m] for m in err), err
    assert err[2] < err[6], err


def test_kernel_ir_is_winograd():
    """The Kernel IR of a Winograd Conv holds the transformed weights as a constant, in
    strips of output channels [alpha^2, K / w, C, w] when K is whole strips (w = 32 on an
    AVX-512 host, 16 on AVX2), else
    [alpha^2, C, K], and krnl.matmul products; "classic" keeps conv.py's lowering (no such
    constant); the fused schedule sizes its groups to FUSED_BYTES."""
    wt = np.ones((64, 64, 3, 3), np.float32)
    model, _ = conv_model((1, 64, 56, 56), wt, pads=[1, 1, 1, 1])
    text = str(compile_to("kernel-ir", model, conv_algorithm="winograd"))
    strip = 2 * host_target().vector_width  # the host's micro-kernel width (32 on AVX-512)
    assert f"memref<36x{64 // strip}x64x{strip}xf32>" in text and "winograd_f4" in text
    # 40 output channels are whole strips of no vector width (16 on AVX2, 32 on AVX-512).
    narrow, _ = conv_model((1, 64, 8, 8), wt[:40], pads=[1, 1, 1, 1])
    assert "memref<36x64x40xf32>" in str(compile_to("kernel-ir", narrow,
                                                     conv_algorithm="winograd"))
    assert "krnl.matmul" in text
    assert "winograd" not in str(compile_to("kernel-ir", model, conv_algorithm="classic"))
    fused = str(compile_to("kernel-ir", model, conv_algorithm="winograd-f2-fused"))
    # F(2,3): 28 x 28 tiles; a tile row's V and M take 28 * 16 * 128 * 4 bytes = 224 KiB
    rows = max(conv_tiles.FUSED_BYTES // (28 * 16 * 128 * 4),
               -(-conv_tiles.MIN_GROUP_TILES // 28), 1)
    assert 1 <= rows < 28
    # V (and M) hold a slot per chunk of groups the threads take (`builder.chunk_count`)
    slots = chunk_count(28 // rows, winograd.MAX_BAND_CHUNKS, winograd.BAND_REUSE)
    assert f"memref<{slots * 16 * rows * 28 * 64}xf32>" in fused


@pytest.mark.parametrize("attrs,why", [
    (dict(strides=[2, 2]), "strided"), (dict(dilations=[2, 2]), "dilated"),
    (dict(group=2), "grouped")])
def test_falls_back_where_it_does_not_apply(attrs, why):
    """A Conv Winograd does not take is lowered as "auto" would, and still agrees."""
    c = 4
    wt = np.random.default_rng(0).standard_normal((4, c // attrs.get("group", 1), 3, 3))
    model, x = conv_model((1, c, 9, 9), wt.astype(np.float32), pads=[1, 1, 1, 1], **attrs)
    module = compile_to("onnx-ir", model)
    conv = next(op for op in module.walk() if op.name == "onnx.Conv")
    assert why in winograd.applies(conv)
    assert "winograd" not in str(compile_to("kernel-ir", model, conv_algorithm="winograd"))
    assert scaled_error(model, x, "winograd") < 1e-5


@pytest.mark.parametrize("algo", ["direct", "im2col", "classic", "auto"])
def test_other_settings_agree(algo):
    wt = np.random.default_rng(2).standard_normal((5, 6, 3, 3)).astype(np.float32)
    bias = np.arange(5, dtype=np.float32)
    model, x = conv_model((1, 6, 10, 8), wt, bias, [1, 0, 2, 1], "Relu")
    assert scaled_error(model, x, algo) < 1e-5


def test_bad_names_are_refused():
    wt = np.ones((2, 2, 3, 3), np.float32)
    model, _ = conv_model((1, 2, 5, 5), wt)
    with pytest.raises(ValueError, match="unknown conv_algorithm 'wino'.*winograd-f6"):
        ck.compile(model, conv_algorithm="wino")
    module = compile_to("onnx-ir", model)
    conv = next(op for op in module.walk() if op.name == "onnx.Conv")
    from xdsl.dialects.builtin import StringAttr

    conv.attributes["conv_algorithm"] = StringAttr("fft9")
    with pytest.raises(ModelError, match="conv_algorithm attribute"):
        compile_to("kernel-ir", module)
    assert set(WINOGRAD) < set(ALGORITHMS)


def test_variant_names():
    assert [winograd_variant(a) for a in WINOGRAD] == [
        (4, False), (2, False), (4, False), (6, False), (4, True), (2, True), (4, True),
        (6, True)]


@pytest.mark.parametrize("c,k,hw,kernel,auto,auto_f4", [
    (64, 64, 56, 3, "winograd-f2-fused", "winograd-f4-fused"),
    (128, 128, 28, 3, "winograd-f2-fused", "winograd-f4"),
    (32, 128, 27, 3, "winograd-f2-fused", "winograd-f4"),
    (128, 32, 56, 3, "winograd-f2-fused", "winograd-f4-fused"),
    (128, 32, 14, 3, "winograd-f2", "winograd-f4"), (16, 64, 55, 3, "classic", "classic"),
    (256, 256, 14, 3, "winograd-f2", "winograd-f4"), (512, 512, 7, 3, "winograd-f2", "winograd-f4"),
    (256, 256, 4, 3, "winograd-f2", "winograd-f2"), (512, 512, 2, 3, "classic", "classic"),
    (8, 64, 56, 3, "classic", "classic"), (64, 64, 56, 5, "fft", "fft"),
    (16, 16, (16, 16, 16), 3, "winograd-f2-fused", "winograd-f4-fused"),
    (128, 128, (16, 16, 16), 3, "winograd-f2-fused", "winograd-f4"),
    (256, 256, (8, 8, 8), 3, "winograd-f2", "winograd-f4"),
    (512, 256, (8, 8, 8), 3, "winograd-f2", "winograd-f4"),
    (128, 64, (32, 32, 32), 3, "winograd-f2-fused", "winograd-f4-fused"),
    (256, 256, (2, 2, 2), 3, "classic", "classic")])
def test_auto_choice(c, k, hw, kernel, auto, auto_f4):
    """"auto" (the default) takes Winograd only for the class it measured faster on
    (conv_algorithm.py): 3x3 and 3x3x3, >= 16 channels, >= 4 tiles, F(2,3) only, fused up to
    64 channels, 3x3x3 from 512 tiles (16^3 at F(2, 3)) on, 3x3 from 196 tiles (28 x 28) on
    with at most 128 x 128 channels; 3x3 with fewer than 24 channels take the taps (classic);
    "auto-f4" tries F(4,3) first; kernels of 5 and more go to the roofline (FFT or classic)."""
    from compilerkit.lowering.conv_algorithm import choose

    sp = hw if isinstance(hw, tuple) else (hw, hw)
    model, _ = conv_model((1, c) + sp, np.zeros((k, c) + (kernel,) * len(sp), np.float32),
                          pads=[kernel // 2] * 2 * len(sp))
    module = compile_to("onnx-ir", model)
    conv = next(op for op in module.walk() if op.name == "onnx.Conv")
    assert choose(conv) == auto  # the default
    assert choose(conv, "auto") == auto
    assert choose(conv, "auto-f4") == auto_f4
    assert choose(conv, "auto", lanes=1) == "classic"  # the GPU: tile schedules are CPU's


@pytest.mark.parametrize("outlier, expected", [
    (None, "winograd-f2-fused"), (50.0, "winograd-f2-fused"), (1e4, "classic"),
    (1e16, "classic"), (np.inf, "classic")])
def test_auto_keeps_winograd_away_from_badly_scaled_weights(outlier, expected):
    """One weight far above the others (a corrupted model) sends "auto" back to "classic":
    Winograd's error in every output of a tile scales with the largest weight. The bound is
    1000 x the median |weight|; a trained layer's largest weight is tens of medians at most.
    All-zero weights are well scaled (Winograd is exact on them)."""
    from compilerkit.lowering.conv_algorithm import choose

    # 64 channels: with fewer, "auto" leaves the layer to the tap schedule anyway
    wt = np.random.default_rng(5).standard_normal((64, 64, 3, 3)).astype(np.float32)
    if outlier is not None:
        wt[3, 2, 1, 1] = outlier
    model, _ = conv_model((1, 64, 56, 56), wt, pads=[1, 1, 1, 1])
    conv = next(op for op in compile_to("onnx-ir", model).walk() if op.name == "onnx.Conv")
    assert choose(conv, "auto") == expected
    assert choose(conv, "auto-f4") == expected.replace("f2", "f4")


@pytest.mark.parametrize("algo", ["winograd-f2", "winograd-f4-fused", "fft"])
def test_asking_by_name_on_badly_scaled_weights_warns_naming_the_node(algo):
    """What "auto" avoids, asked for by name, is compiled as asked with a ConvAccuracyWarning
    naming the node and the spread; "error" turns it into a refusal. Well-scaled weights and
    "auto" say nothing."""
    import warnings

    wt = np.random.default_rng(5).standard_normal((8, 8, 3, 3) if algo != "fft"
                                                  else (8, 8, 5, 5)).astype(np.float32)
    good, x = conv_model((1, 8, 12, 12), wt, pads=[1, 1, 1, 1])
    wt = wt.copy()
    wt[3, 2, 1, 1] = 1e5
    bad, _ = conv_model((1, 8, 12, 12), wt, pads=[1, 1, 1, 1])
    with pytest.warns(ck.ConvAccuracyWarning, match=rf"node '.+'.*'{algo}'.*times their median"):
        cm = ck.compile(bad, asm=False, conv_algorithm=algo)
    assert cm.run(x)[0].shape[1] == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error", ck.ConvAccuracyWarning)
        ck.compile(good, asm=False, conv_algorithm=algo)
        ck.compile(bad, asm=False, conv_algorithm="auto")
        with pytest.raises(ck.ConvAccuracyWarning):
            ck.compile(bad, asm=False, conv_algorithm=algo)


def test_threads_give_the_same_answer():
    """The parallelize pass may share the Winograd nests among threads: the answer is the same
    at every thread count."""
    wt = np.random.default_rng(4).standard_normal((16, 16, 3, 3)).astype(np.float32)
    model, x = conv_model((1, 16, 13, 13), wt, pads=[1, 1, 1, 1])
    for algo in ("winograd-f4", "winograd-f2-fused"):
        cm = ck.compile(model, asm=False, conv_algorithm=algo)
        one = cm.run(x, num_threads=1)[0]
        np.testing.assert_array_equal(cm.run(x, num_threads=2)[0], one)
        np.testing.assert_array_equal(cm.run(x, num_threads=3)[0], one)


def test_an_odd_chunk_count_leaves_one_group_to_a_loop_of_its_own():
    """The fused schedule's whole groups go to an even number of chunks, so two threads share
    them: where `chunk_count` would give an odd number (7 groups: 1 chunk, the group loop
    serial), one group becomes a loop of its own, before the ragged last group."""
    from types import SimpleNamespace as Plan

    assert chunk_count(7, winograd.MAX_BAND_CHUNKS, winograd.BAND_REUSE) == 1
    assert winograd._bands(Plan(tiles=[14, 14], band=2)) == [(6, 2, 0), (1, 2, 12)]
    assert winograd._bands(Plan(tiles=[15, 15], band=2)) == [(6, 2, 0), (1, 2, 12),
                                                             (1, 1, 14)]
    assert winograd._bands(Plan(tiles=[28, 28], band=1)) == [(28, 1, 0)]  # 4 chunks of 7
    assert winograd._bands(Plan(tiles=[6, 6], band=2)) == [(3, 2, 0)]  # too few to share
    assert winograd._bands(Plan(tiles=[9, 9], band=1)) == [(8, 1, 0), (1, 1, 8)]  # 3 -> 4


def test_the_fused_groups_of_a_28_by_28_layer_run_on_threads():
    """32 -> 128 3x3 at 27 x 27 under the fused schedule (14 tile rows, 7 groups of 2): the
    chunk loop of its 6 whole groups is marked parallel; the answer is onnxruntime's and the
    same bits at 1, 2 and 3 threads."""
    from ckhelpers import ort_run

    from compilerkit.dialects import krnl

    wt = np.random.default_rng(6).standard_normal((128, 32, 3, 3)).astype(np.float32)
    model, x = conv_model((1, 32, 27, 27), wt, pads=[1, 1, 1, 1])
    kir = compile_to("kernel-ir", model, conv_algorithm="winograd-f2-fused")
    chunks = [op for op in kir.walk() if isinstance(op, krnl.IterateOp)
              and op.bound_list() == [(0, 2), (0, 3)]]
    assert len(chunks) == 1 and krnl.parallel_loop(chunks[0]) is not None
    cm = ck.compile(model, asm=False, conv_algorithm="winograd-f2-fused")
    one = cm.run(x, num_threads=1)[0]
    np.testing.assert_allclose(one, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)
    for threads in (2, 3):
        np.testing.assert_array_equal(cm.run(x, num_threads=threads)[0], one)


@pytest.mark.parametrize("k, blocks", [(64, 4), (48, 3), (40, 1), (16, 1)])
def test_the_output_transform_walks_channel_blocks(k, blocks):
    """The output transform's outer loop is over blocks of CHANNEL_BLOCK output channels (K a
    multiple of it, 2 blocks or more; else one block, the whole of K): the parallelize pass
    gives it to threads, each writing whole output planes. Same bits at every thread count,
    onnxruntime's answer."""
    assert winograd.CHANNEL_BLOCK == 16
    wt = np.random.default_rng(5).standard_normal((k, 16, 3, 3)).astype(np.float32)
    model, x = conv_model((1, 16, 28, 28), wt, pads=[1, 1, 1, 1])
    kir = compile_to("kernel-ir", model, conv_algorithm="winograd-f2")
    outer = [op for op in kir.walk() if op.name == "krnl.iterate"
             and op.bound_list() == [(0, blocks)]
             and any(o.name == "krnl.iterate" and o.bound_list() == [(0, 14), (0, 14)]
                     for o in op.body.block.ops)]
    if blocks > 1:
        from compilerkit.dialects import krnl

        assert len(outer) == 1 and krnl.parallel_loop(outer[0]) is not None
    else:  # (a loop of 1 around the tiles: the band loop's and the output transform's)
        assert outer
    cm = ck.compile(model, asm=False, conv_algorithm="winograd-f2")
    one = cm.run(x, num_threads=1)[0]
    np.testing.assert_array_equal(cm.run(x, num_threads=2)[0], one)
    assert scaled_error(model, x, "winograd-f2") <= TOLERANCE[2]


@pytest.mark.parametrize("x_shape,m", [((2, 3, 10, 7), 2), ((1, 2, 10, 5, 6), 4)])
def test_fused_groups_with_a_ragged_last_group(monkeypatch, x_shape, m):
    """Groups of 2 tile rows over 5 (2-D, F(2,3): 10 rows) or 3 (3-D, F(4,3): 10 planes)
    tile rows: full groups in a loop, then a group of 1; the answer is onnxruntime's."""
    r = len(x_shape) - 2
    out = x_shape[2:]  # 'same' pads
    inner = int(np.prod([-(-o // m) for o in out[1:]]))
    monkeypatch.setattr(conv_tiles, "FUSED_BYTES", 1)
    monkeypatch.setattr(conv_tiles, "MIN_GROUP_TILES", 2 * inner)
    wt = np.random.default_rng(6).standard_normal((4, x_shape[1]) + (3,) * r)
    model, x = conv_model(x_shape, wt.astype(np.float32), np.ones(4, np.float32),
                          [1] * (2 * r), "Relu")
    text = str(compile_to("kernel-ir", model, conv_algorithm=f"winograd-f{m}-fused"))
    alpha = (m + 2) ** r
    assert f"memref<{alpha * 2 * inner * x_shape[1]}xf32>" in text  # V of a 2-row group
    assert scaled_error(model, x, f"winograd-f{m}-fused") <= TOLERANCE[m]


def test_fused_groups_go_to_threads_in_chunks(monkeypatch):
    """Groups of one tile row over 8 (F(2,3), 16 x 16 output, 2 batch entries): the threads
    take chunks of groups (`builder.chunk_count`: 4 chunks of 2), each chunk with its slot
    of V, M, temps and repair accumulator, and the chunk loop is the Conv's parallel loop. A
    NaN in one tile's window (the screen recomputes that tile directly, with the chunk's
    accumulator); the same bits at 1, 2 and 3 threads, onnxruntime's answer."""
    from compilerkit.dialects import krnl

    monkeypatch.setattr(conv_tiles, "FUSED_BYTES", 1)
    monkeypatch.setattr(conv_tiles, "MIN_GROUP_TILES", 8)
    wt = np.random.default_rng(8).standard_normal((8, 4, 3, 3)).astype(np.float32)
    model, x = conv_model((2, 4, 16, 16), wt, np.ones(8, np.float32), [1, 1, 1, 1], "Relu")
    x[1, 2, 9, 4] = np.nan
    kir = compile_to("kernel-ir", model, conv_algorithm="winograd-f2-fused")
    v_size = 16 * 8 * 4  # alpha^2 x a group's 8 tiles x C
    assert f"memref<{4 * v_size}xf32>" in str(kir)  # V: a slot per chunk
    chunks = [op for op in kir.walk() if isinstance(op, krnl.IterateOp)
              and op.bound_list() == [(0, 4), (0, 2)]]
    assert len(chunks) == 1 and krnl.parallel_loop(chunks[0]) is not None
    cm = ck.compile(model, asm=False, conv_algorithm="winograd-f2-fused")
    one = cm.run(x, num_threads=1)[0]
    for threads in (2, 3):
        np.testing.assert_array_equal(cm.run(x, num_threads=threads)[0], one)
    from ckhelpers import ort_run

    ref = ort_run(model, [x])[0]
    np.testing.assert_array_equal(np.isnan(one), np.isnan(ref))
    np.testing.assert_allclose(one, ref, rtol=1e-4, atol=1e-4)


def test_large_three_d_rows_group_by_lines():
    """A 3-D layer whose tile row (a plane of tiles) holds more V and M than LINE_GROUP_BYTES
    groups its tiles by lines of the second axis, as many as LINE_GROUP_BYTES holds
    (`conv_tiles.fused_lines`).
    Hand-worked: 64 -> 64 at 32^3, F(2,3): 16 x 16 tiles per row, 64 x (64 + 64) x 4 bytes
    per tile, 8 MB per row, 512 KB per line of 16 tiles: groups of 2 lines (32 tiles), V a
    slot of 64 x 32 x 64 per chunk, 8 chunks of the 16 rows. A 2-D layer keeps whole rows:
    64 -> 64 at 224 x 224, 112 tiles per row, V 8 slots of 16 x 112 x 64."""
    tile = 64 * (64 + 64) * 4
    assert conv_tiles.fused_lines([16, 16, 16], tile) == 2
    assert conv_tiles.fused_lines([8, 8, 8], tile) == 4  # 2 MB rows, 256 KB lines
    assert conv_tiles.fused_lines([4, 4, 4], tile) is None  # 512 KB rows fit
    assert conv_tiles.fused_lines([112, 112], 16 * 128 * 4) is None  # 2-D: whole rows
    wt = np.ones((64, 64, 3, 3, 3), np.float32)
    model, _ = conv_model((1, 64, 32, 32, 32), wt, pads=[1] * 6)
    text = str(compile_to("kernel-ir", model, conv_algorithm="winograd-f2-fused"))
    assert f"memref<{8 * 64 * 32 * 64}xf32>" in text
    assert f"memref<{8 * 64 * 256 * 64}xf32>" not in text
    model, _ = conv_model((1, 64, 224, 224), wt[..., 0], pads=[1] * 4)
    text = str(compile_to("kernel-ir", model, conv_algorithm="winograd-f2-fused"))
    assert f"memref<{8 * 16 * 112 * 64}xf32>" in text


def test_line_groups_with_a_ragged_last_group(monkeypatch):
    """Line groups of 2 over 5 tile lines (F(2,3), 6 x 10 x 6 output: 3 x 5 x 3 tiles), so
    each row has two groups of 2 lines and one of 1; a NaN in one tile's window (recomputed
    directly, with the chunk's accumulator) and a 1e30 in another. The same bits as whole-row
    groups at 1, 2 and 3 threads, and onnxruntime's answer."""
    from ckhelpers import ort_run

    monkeypatch.setattr(conv_tiles, "FUSED_BYTES", 1)
    monkeypatch.setattr(conv_tiles, "MIN_GROUP_TILES", 1)
    wt = np.random.default_rng(9).standard_normal((4, 4, 3, 3, 3)).astype(np.float32)
    model, x = conv_model((2, 4, 6, 10, 6), wt, np.ones(4, np.float32), [1] * 6, "Relu")
    x[1, 2, 3, 7, 1] = np.nan
    x[0, 1, 1, 2, 4] = 1e30
    line_bytes = 3 * 64 * (4 + 4) * 4  # a line of 3 tiles, alpha^3 x (C + K) floats each
    answers = {}
    for name, limit in (("lines", 2 * line_bytes), ("rows", 10**12)):
        monkeypatch.setattr(conv_tiles, "LINE_GROUP_BYTES", limit)
        text = str(compile_to("kernel-ir", model, conv_algorithm="winograd-f2-fused"))
        group = 6 if name == "lines" else 15  # tiles per group
        slots = chunk_count(3, winograd.MAX_BAND_CHUNKS, 1 if name == "lines" else
                            winograd.BAND_REUSE)
        assert f"memref<{slots * 64 * group * 4}xf32>" in text, name
        cm = ck.compile(model, asm=False, conv_algorithm="winograd-f2-fused")
        answers[name] = [cm.run(x, num_threads=t)[0] for t in (1, 2, 3)]
    for y in answers["lines"] + answers["rows"][1:]:
        np.testing.assert_array_equal(y, answers["rows"][0])
    ref = ort_run(model, [x])[0]
    one = answers["lines"][0]
    np.testing.assert_array_equal(np.isnan(one), np.isnan(ref))
    np.testing.assert_allclose(one, ref, rtol=1e-4, atol=1e-4 * np.nanmax(np.abs(ref)))


def test_winograd_error_ratio_hand_worked():
    """The transforms' gains per axis (row sums of |A^T|, |G|, |B^T| multiplied): F(2, 3)
    3 x 1.5 x 2 = 9, F(4, 3) 19 x 1 x 10 = 190; over the 9 (27) products of a direct output,
    times max |w| / median |w|."""
    from compilerkit.lowering.conv_algorithm import winograd_error_ratio

    wt = np.ones((16, 16, 3, 3), np.float32)
    wt[0, 0, 0, 0] = 4.0  # max 4, median 1
    model, _ = conv_model((1, 16, 8, 8), wt, pads=[1, 1, 1, 1])
    conv = next(op for op in compile_to("onnx-ir", model).walk() if op.name == "onnx.Conv")
    assert winograd_error_ratio(conv, 2) == pytest.approx(9 ** 2 / 9 * 4)
    assert winograd_error_ratio(conv, 4) == pytest.approx(190 ** 2 / 9 * 4)
    wt3 = np.ones((16, 16, 3, 3, 3), np.float32)
    model, _ = conv_model((1, 16, 8, 8, 8), wt3, pads=[1] * 6)
    conv = next(op for op in compile_to("onnx-ir", model).walk() if op.name == "onnx.Conv")
    assert winograd_error_ratio(conv, 4) == pytest.approx(190 ** 3 / 27)


@pytest.mark.parametrize("spread, expected", [
    (5.0, "winograd-f4-fused"), (15.0, "winograd-f4-fused"), (17.0, "winograd-f2-fused"),
    (900.0, "winograd-f2-fused"), (2000.0, "classic")])
def test_auto_takes_the_tile_whose_error_bound_holds(spread, expected):
    """"auto-f4" on 3x3x3: F(4, 3)'s bound (190^3 / 27 = 254,000 x the spread) holds up to a
    spread of about 16 medians, F(2, 3)'s (27 x the spread) up to AUTO_MAX_RANGE; the 3D
    U-Net's trained layers have 3.8-5.8."""
    from compilerkit.lowering.conv_algorithm import choose

    wt = np.ones((16, 16, 3, 3, 3), np.float32)
    wt[1, 2, 1, 1, 1] = spread
    model, _ = conv_model((1, 16, 16, 16, 16), wt, pads=[1] * 6)
    conv = next(op for op in compile_to("onnx-ir", model).walk() if op.name == "onnx.Conv")
    assert choose(conv, "auto-f4") == expected


def test_every_default_of_the_conv_algorithm_is_the_same():
    """compile(), the pipeline's options, the Kernel IR pipeline, the lower-to-krnl pass and the
    KernelBuilder all default to conv_algorithm.DEFAULT ("auto")."""
    import inspect

    from compilerkit.lowering import LowerToKrnlPass, lower_to_krnl
    from compilerkit.lowering.builder import KernelBuilder
    from compilerkit.lowering.conv_algorithm import DEFAULT
    from compilerkit.passes import kernel_pipeline
    from compilerkit.pipeline import Options

    def default(fn):
        return inspect.signature(fn).parameters["conv_algorithm"].default

    assert DEFAULT == "auto"
    assert {default(ck.compile), default(lower_to_krnl), default(kernel_pipeline),
            default(KernelBuilder), Options().conv_algorithm,
            LowerToKrnlPass().conv_algorithm} == {DEFAULT}
