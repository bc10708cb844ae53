"""The direct 2-D Conv schedule (lowering/depthwise.py: depthwise and grouped Convs over flat
phase planes) against onnxruntime: a grid of channels, plane sizes (1 x 1 to 15 x 15, odd and
non-square), kernels 3 and 5, strides 1 to 3, symmetric and asymmetric pads, dilation 2,
channel multipliers, groups of 2 to 4 channels, fused ReLU and Clip; the same bits at 1 and 2
threads; and a NaN or inf input spoiling exactly the outputs whose window holds it."""

import itertools

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import depthwise as dw
from compilerkit.lowering.builder import chunk_count
from compilerkit.lowering.conv_common import interior
from compilerkit.pipeline import compile_to

N = helper.make_node


def conv_model(c, size, k, stride=1, pads=(0, 0, 0, 0), dil=1, act=None, bias=True, mult=1,
               per_group=1, seed=0):
    """(model, x): x [1, c, h, w] through a Conv of c / per_group groups, each of per_group
    input and `mult` output channels, then an optional ReLU or Clip(0, 6)."""
    rng = np.random.default_rng(seed)
    h, w = size
    groups = c // per_group
    oc = groups * mult
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((oc, per_group, k, k)) * 0.5).astype(np.float32)
    inits = [("w", wt)]
    inputs = ["x", "w"]
    if bias:
        inits.append(("b", rng.standard_normal(oc).astype(np.float32)))
        inputs.append("b")
    nodes = [N("Conv", inputs, ["y"], group=groups, kernel_shape=[k, k], strides=[stride] * 2,
               pads=list(pads), dilations=[dil] * 2)]
    out = "y"
    if act == "Relu":
        nodes.append(N("Relu", ["y"], ["z"]))
        out = "z"
    elif act == "Clip":
        nodes.append(N("Clip", ["y", "lo", "hi"], ["z"]))
        inits += [("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))]
        out = "z"
    return make_model(nodes, [("x", x)], [out], inits, opset=17), x


def fits(size, k, pads, dil):
    """Whether the dilated kernel fits in the padded plane (at least one output)."""
    reach = (k - 1) * dil + 1
    return size[0] + pads[0] + pads[2] >= reach and size[1] + pads[1] + pads[3] >= reach


def compiled(model, algo="classic"):
    """The model compiled, run once on NaN first: a zero row or margin the schedule forgets
    to rewrite then keeps a NaN from that run and spoils the next one (the arena is reused)."""
    cm = ck.compile(model, asm=False, conv_algorithm=algo)
    (_, shape, dtype), = cm.inputs
    cm.run(np.full(shape, np.nan, dtype), num_threads=1)
    return cm


def assert_matches(model, x, algo="classic"):
    ref = ort_run(model, [x])[0]
    got = compiled(model, algo).run(x, num_threads=1)[0]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


SIZES = [(1, 1), (2, 3), (5, 5), (7, 7), (8, 8), (9, 6), (14, 14), (15, 13)]
KERNELS = [(3, 1), (3, 2), (5, 1), (5, 2)]
PADS = [(1, 1, 1, 1), (0, 0, 0, 0), (2, 2, 2, 2), (0, 1, 2, 0), (2, 0, 1, 1), (1, 2, 0, 1)]
CHANNELS = [3, 16, 33]
ACTS = [None, "Relu", "Clip"]


def grid():
    """Every plane size with every (kernel, stride); pads, dilation, channels, activation and
    bias rotate through their values, so each meets many sizes."""
    cases = []
    for n, (size, (k, s)) in enumerate(itertools.product(SIZES, KERNELS)):
        pads = PADS[n % len(PADS)]
        dil = 2 if n % 5 == 4 else 1
        if not fits(size, k, pads, dil):
            pads, dil = (k // 2,) * 4, 1
        if not fits(size, k, pads, dil):
            continue
        cases.append((CHANNELS[n % 3], size, k, s, pads, dil, ACTS[n % 3], n % 4 != 3))
    return cases


@pytest.mark.parametrize("c, size, k, stride, pads, dil, act, bias", grid())
def test_depthwise_grid_matches_onnxruntime(c, size, k, stride, pads, dil, act, bias):
    model, x = conv_model(c, size, k, stride, pads, dil, act, bias, seed=c + size[0])
    assert_matches(model, x)


@pytest.mark.parametrize("c, size, k, stride, pads, dil", [
    (32, (14, 14), 3, 1, (1, 1, 1, 1), 1),   # MobileNetV2's shapes, fewer channels
    (24, (14, 14), 3, 2, (1, 1, 1, 1), 1),
    (16, (7, 7), 3, 1, (1, 1, 1, 1), 1),
    (24, (7, 7), 5, 1, (2, 2, 2, 2), 1),     # EfficientNet-B0's 5x5
    (16, (14, 14), 5, 2, (1, 1, 2, 2), 1),   # TF SAME: the odd pad at the end
    (8, (28, 28), 5, 1, (2, 2, 2, 2), 1),
    (8, (28, 28), 3, 2, (0, 0, 1, 1), 1),
    (4, (56, 56), 3, 1, (1, 1, 1, 1), 1),
    (4, (37, 41), 3, 2, (1, 1, 1, 1), 1),
    (6, (15, 15), 3, 3, (1, 1, 1, 1), 1),    # stride 3: nine phase planes
    (6, (12, 17), 3, 2, (2, 2, 2, 2), 2),    # strided and dilated
    (5, (9, 9), 3, 1, (2, 2, 2, 2), 2),
    (5, (6, 6), 3, 1, (3, 0, 0, 3), 1),      # pads wider than the kernel's reach
    (5, (11, 11), 3, 1, (0, 0, 0, 0), 1),    # unpadded: output rows narrower than input rows
    (5, (11, 10), 5, 2, (0, 0, 0, 0), 1),
    (3, (1, 1), 1, 1, (0, 0, 0, 0), 1),      # 1 x 1 kernel
])
def test_model_shapes_match_onnxruntime(c, size, k, stride, pads, dil):
    model, x = conv_model(c, size, k, stride, pads, dil, "Relu")
    assert_matches(model, x)


@pytest.mark.parametrize("per_group, mult, stride", [(1, 2, 1), (1, 3, 2), (2, 1, 1),
                                                     (3, 2, 2), (4, 1, 1), (4, 2, 2)])
def test_grouped_and_multiplied_channels_match_onnxruntime(per_group, mult, stride):
    """Groups of 2 to 4 input channels (each output sums over its group's planes) and channel
    multipliers (several output channels read one group's planes)."""
    model, x = conv_model(12, (9, 8), 3, stride, (1, 0, 1, 2), 1, "Clip", mult=mult,
                          per_group=per_group)
    assert_matches(model, x)


@pytest.mark.parametrize("c, stride", [(1, 1), (1, 2), (3, 1)])
def test_dense_conv_forced_direct_matches_onnxruntime(c, stride):
    """conv_algorithm="direct" takes ungrouped Convs too (one group of all C channels): a single
    channel (the grid's 1) and three."""
    model, x = conv_model(c, (10, 9), 3, stride, (1, 1, 1, 1), per_group=c, mult=2)
    assert_matches(model, x, algo="direct")


@pytest.mark.parametrize("c, size, k, stride, pads", [
    (33, (14, 14), 3, 1, (1, 1, 1, 1)),
    (16, (7, 7), 5, 1, (2, 2, 2, 2)),
    (48, (15, 15), 3, 2, (1, 1, 1, 1)),
    (24, (12, 12), 5, 2, (1, 1, 2, 2)),
])
def test_one_and_two_threads_give_the_same_bits(c, size, k, stride, pads):
    model, x = conv_model(c, size, k, stride, pads, act="Relu")
    cm = compiled(model)
    one = cm.run(x, num_threads=1)[0]
    two = cm.run(x, num_threads=2)[0]
    assert np.array_equal(one, two)
    np.testing.assert_allclose(one, ort_run(model, [x])[0], rtol=1e-5, atol=1e-5)


def test_blocks_of_a_chunk_reuse_its_planes():
    """The threads take chunks of blocks, each chunk one slot of phase planes that its blocks
    fill in turn (`builder.chunk_count`): 40 channels at 20 x 20, stride 2, make 8 slots of
    5 blocks each, not 40. Two batch entries, NaN run first (a slot keeping the last
    block's or the last call's values would show), the same bits at 1 and 2 threads,
    onnxruntime's values."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 40, 20, 20)).astype(np.float32)
    wt = rng.standard_normal((40, 1, 3, 3)).astype(np.float32)
    model = make_model([N("Conv", ["x", "w"], ["y"], group=40, kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1])], [("x", x)], ["y"], [("w", wt)],
                       opset=17)
    assert chunk_count(40, dw.MAX_CHUNKS) == 8
    assert "memref<8x1x4x" in str(compile_to("kernel-ir", model))
    cm = compiled(model)
    one, two = cm.run(x, num_threads=1)[0], cm.run(x, num_threads=2)[0]
    assert np.array_equal(one, two)
    np.testing.assert_allclose(one, ort_run(model, [x])[0], rtol=1e-5, atol=1e-5)


def test_small_planes_run_on_threads():
    """The loop over (batch entry, block of groups) is marked parallel even where each output
    plane is small (576 x 14 x 14 stride 2: 28k outputs, under the parallelize pass's
    threshold when counted by the flat loops alone)."""
    for c, size, k, stride in [(576, (14, 14), 3, 2), (960, (7, 7), 3, 1)]:
        model, _ = conv_model(c, size, k, stride, (1, 1, 1, 1))
        assert "krnl.parallel" in str(compile_to("kernel-ir", model))


@pytest.mark.parametrize("k, stride, pads", [(3, 1, (1, 1, 1, 1)), (5, 1, (2, 2, 2, 2)),
                                             (3, 2, (1, 1, 1, 1)), (5, 2, (1, 1, 2, 2))])
def test_nan_and_inf_spoil_only_their_windows(k, stride, pads):
    """A NaN and an inf in different channels, at plane edges (where a tap left or right of
    the input reads a neighbouring row's pixel, discarded by the column select) and inside:
    NaN and inf outputs exactly where onnxruntime has them, the rest equal."""
    model, x = conv_model(4, (9, 9), k, stride, pads, act=None)
    x = x.copy()
    x[0, 0, 4, 0] = np.nan    # left edge: wraps to the row above's right taps
    x[0, 1, 3, 8] = np.inf    # right edge
    x[0, 2, 0, 0] = np.nan    # corner
    x[0, 3, 5, 4] = -np.inf   # inside
    ref = ort_run(model, [x])[0]
    got = compiled(model).run(x, num_threads=1)[0]
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    assert np.array_equal(got[np.isinf(got)], ref[np.isinf(ref)])
    finite = np.isfinite(ref)
    assert finite.sum() > got.size // 2
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-5, atol=1e-5)


def _with_edges(monkeypatch, min_rows, model):
    """The model compiled with depthwise.EDGE_MIN_ROWS = min_rows, and whether any Conv read
    its interior in place (`_Planes.edges`)."""
    taken = []
    edges = dw._Planes.edges
    monkeypatch.setattr(dw, "EDGE_MIN_ROWS", min_rows)
    monkeypatch.setattr(dw._Planes, "edges", lambda self: taken.append(edges(self)) or taken[-1])
    cm = compiled(model)
    monkeypatch.undo()
    return cm, any(e is not None for e in taken)


@pytest.mark.parametrize("c, size, k, pads, dil", [
    (4, (56, 56), 3, (1, 1, 1, 1), 1),       # MobileNetV2's 144 x 56 x 56, fewer channels
    (3, (50, 61), 5, (2, 2, 2, 2), 1),
    (3, (48, 48), 3, (0, 1, 2, 0), 1),       # asymmetric pads: no zero row above
    (3, (52, 40), 5, (2, 0, 1, 1), 1),
    (2, (49, 49), 3, (2, 2, 2, 2), 2),       # dilated
    (5, (14, 14), 3, (1, 1, 1, 1), 1),       # small planes, taken with the bound lowered
    (5, (9, 9), 5, (2, 2, 2, 2), 1),
])
def test_interior_read_in_place_gives_the_planes_bits(monkeypatch, c, size, k, pads, dil):
    """Stride-1 Convs with padding read the interior of x in place and copy only the first and
    last rows with the zeros around them (`_Planes.edges`): the same bits as copying whole
    planes, onnxruntime's values, and special values spoiling exactly their windows (a NaN in
    the first row, an inf in the last, one each at a left and right edge inside)."""
    model, x = conv_model(c, size, k, 1, pads, dil, act="Relu")
    h, w = size
    x = x.copy()
    x[0, 0, 0, w // 2] = np.nan
    x[0, 1 % c, h - 1, 1] = np.inf
    x[0, 2 % c, h // 2, 0] = np.nan
    x[0, 0, h // 3, w - 1] = -np.inf
    edged, took = _with_edges(monkeypatch, 1, model)
    whole, took_whole = _with_edges(monkeypatch, 10**9, model)
    assert took and not took_whole
    got, want = edged.run(x, num_threads=1)[0], whole.run(x, num_threads=1)[0]
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(edged.run(x, num_threads=2)[0], got, equal_nan=True)
    ref = ort_run(model, [x])[0]
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-5, atol=1e-5)


def test_interior_in_place_only_where_it_pays():
    """The bound (EDGE_MIN_ROWS) and the cases that copy whole planes: strided, unpadded (x's
    own planes, nothing copied), too few rows."""
    from types import SimpleNamespace

    def planes(size, k, stride, pads):
        conv = SimpleNamespace(in_sp=list(size), st=[stride] * 2, dil=[1, 1],
                               pads=list(pads[:2]), k_sp=[k, k],
                               out_sp=[(size[i] + pads[i] + pads[i + 2] - k) // stride + 1
                                       for i in range(2)])
        return dw._Planes(conv)

    assert planes((112, 112), 3, 1, (1, 1, 1, 1)).edges() is not None
    assert planes((56, 56), 5, 1, (2, 2, 2, 2)).edges() is not None
    assert planes((112, 112), 3, 2, (1, 1, 1, 1)).edges() is None
    assert planes((56, 56), 3, 1, (0, 0, 0, 0)).edges() is None
    assert planes((28, 28), 3, 1, (1, 1, 1, 1)).edges() is None


def _strided(monkeypatch, min_columns, model):
    """The model compiled with depthwise.STRIDED_MIN_COLUMNS = min_columns, and whether any
    Conv took `strided_2d`."""
    taken = []
    rule = dw.strided_in_place
    monkeypatch.setattr(dw, "STRIDED_MIN_COLUMNS", min_columns)
    monkeypatch.setattr(dw, "strided_in_place", lambda conv: taken.append(rule(conv)) or
                        taken[-1])
    cm = compiled(model)
    monkeypatch.undo()
    return cm, any(taken)


@pytest.mark.parametrize("c, size, k, pads, per_group, mult", [
    (4, (112, 112), 3, (1, 1, 1, 1), 1, 1),  # MobileNetV2's 96 x 112 x 112, fewer channels
    (3, (112, 112), 3, (0, 0, 1, 1), 1, 1),  # EfficientNet-B0's (TF SAME: pad at the end)
    (3, (97, 101), 3, (1, 0, 0, 1), 1, 2),   # odd sizes, asymmetric pads, channel multiplier
    (4, (20, 23), 3, (1, 1, 1, 1), 2, 1),    # groups of two channels, the bound lowered
    (3, (9, 9), 2, (0, 1, 1, 0), 1, 1),      # 2x2 kernel
    (3, (15, 12), 1, (0, 0, 0, 0), 1, 1),    # 1x1: every output interior
])
def test_strided_in_place_gives_the_planes_bits(monkeypatch, c, size, k, pads, per_group, mult):
    """Stride-2 Convs on wide planes read x in place (`strided_2d`): interior outputs load
    their taps directly, border outputs clamp and drop what is outside. The same bits as the
    phase planes at 1 and 2 threads, onnxruntime's values, and special values at the borders
    and inside spoiling exactly their windows."""
    model, x = conv_model(c, size, k, 2, pads, 1, act="Clip", mult=mult, per_group=per_group)
    h, w = size
    x = x.copy()
    x[0, 0, 0, w // 2] = np.nan
    x[0, 1, h - 1, w - 1] = np.inf
    x[0, 2, h // 2, 0] = np.nan
    x[0, 0, h // 3, w - 2] = -np.inf
    inplace, took = _strided(monkeypatch, 1, model)
    planes, took_planes = _strided(monkeypatch, 10**9, model)
    assert took and not took_planes
    got, want = inplace.run(x, num_threads=1)[0], planes.run(x, num_threads=1)[0]
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(inplace.run(x, num_threads=2)[0], got, equal_nan=True)
    ref = ort_run(model, [x])[0]
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-5, atol=1e-5)


def test_strided_in_place_only_where_it_pays():
    """Stride 2, kernels up to 3, STRIDED_MIN_COLUMNS output columns and an interior of half
    the plane or more; 5x5 kernels and narrower planes keep the phase planes (slower in
    place: their rows are one vector and a long remainder)."""
    from types import SimpleNamespace

    def conv(size, k, stride, pads):
        return SimpleNamespace(in_sp=list(size), st=[stride] * 2, dil=[1, 1], k_sp=[k, k],
                               pads=list(pads[:2]),
                               out_sp=[(size[i] + pads[i] + pads[i + 2] - k) // stride + 1
                                       for i in range(2)])

    assert dw.strided_in_place(conv((112, 112), 3, 2, (1, 1, 1, 1)))
    assert dw.strided_in_place(conv((112, 112), 3, 2, (0, 0, 1, 1)))
    assert not dw.strided_in_place(conv((56, 56), 3, 2, (1, 1, 1, 1)))
    assert not dw.strided_in_place(conv((112, 112), 5, 2, (2, 2, 2, 2)))
    assert not dw.strided_in_place(conv((112, 112), 3, 1, (1, 1, 1, 1)))
    assert not dw.strided_in_place(conv((150, 150), 3, 3, (1, 1, 1, 1)))
    assert interior(conv((112, 112), 3, 2, (1, 1, 1, 1))) == [(1, 56), (1, 56)]
