"""PZnet-style blocked 3-D Conv (lowering/blocked3d.py, conv_algorithm="pznet") and the
fold-layout pass (krnl_passes/fold_layout.py): compiled == onnxruntime over random small 3-D
Convs (channel counts that are and are not multiples of 8), the NCDHW8c layout on a
hand-worked case, transforms only at the edges of a chain of Convs, and the fall-back."""

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.lowering import blocked3d, lower_to_krnl
from compilerkit.pipeline import compile_to

N = helper.make_node
TOLERANCE = 1e-3  # of the output's scale (the bound); observed about 1e-6


def conv_chain(channels, side, kernel=3, pads=1, act="Relu", bias=True, seed=0):
    """x [1, channels[0], *side] through Convs channels[i] -> channels[i+1], each followed by
    `act` (fused into the Conv by fuse-conv); returns (model, x)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal([1, channels[0], *side]).astype(np.float32)
    nodes, inits, cur = [], [], "x"
    for i, (ci, co) in enumerate(zip(channels[:-1], channels[1:], strict=True)):
        ks = [kernel] * 3 if isinstance(kernel, int) else list(kernel)
        w = (rng.standard_normal([co, ci, *ks]) / np.sqrt(ci * np.prod(ks))).astype(np.float32)
        inits.append((f"w{i}", w))
        ins = [cur, f"w{i}"]
        if bias:
            inits.append((f"b{i}", rng.standard_normal(co).astype(np.float32)))
            ins.append(f"b{i}")
        p = [pads] * 6 if isinstance(pads, int) else list(pads)
        nodes.append(N("Conv", ins, [f"y{i}"], pads=p))
        cur = f"y{i}"
        if act:
            nodes.append(N(act, [cur], [f"a{i}"]))
            cur = f"a{i}"
    return make_model(nodes, [("x", x)], [cur], inits), x


def error_vs_ort(model, x, algo="pznet"):
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False, num_threads=1, conv_algorithm=algo).run(x)[0]
    assert got.shape == ref.shape
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def kernel_ir(model, algo="pznet") -> str:
    return str(compile_to("kernel-ir", model, opt_level=3, conv_algorithm=algo))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c_in=st.integers(1, 12), c_mid=st.integers(1, 12), c_out=st.integers(1, 10),
       side=st.tuples(st.integers(3, 6), st.integers(3, 6), st.integers(3, 7)),
       kernel=st.tuples(st.sampled_from([1, 3]), st.sampled_from([1, 3]), st.integers(1, 3)),
       pads=st.integers(0, 1), act=st.sampled_from([None, "Relu", "Sigmoid"]),
       bias=st.booleans(), seed=st.integers(0, 3))
def test_pznet_matches_onnxruntime(c_in, c_mid, c_out, side, kernel, pads, act, bias, seed):
    """Two chained 3-D Convs under "pznet" agree with onnxruntime (the fold removes the
    transforms between them, so the second Conv reads the first's blocked output, padded
    lanes and all)."""
    side = [s + (0 if pads else 2 * (k - 1)) for s, k in zip(side, kernel, strict=True)]
    model, x = conv_chain([c_in, c_mid, c_out], side, kernel, pads, act, bias, seed)
    assert error_vs_ort(model, x) <= TOLERANCE


def test_pznet_is_taken_with_wide_channels():
    """Not a vacuous pass: at 12 -> 16 -> 9 channels (partial blocks) both Convs are lowered
    blocked (their re-laid weights are globals) and agree with onnxruntime."""
    model, x = conv_chain([12, 16, 9], (5, 6, 9), act="Relu")
    ir = kernel_ir(model)
    assert ir.count('sym_name = "pznet_w_') == 2
    assert error_vs_ort(model, x) <= TOLERANCE


def test_blocked_layout_hand_worked():
    """NCDHW -> NCDHW8c: channel c of voxel (d, h, w) sits at [c // 8, d, h, w, c % 8]. With
    C = 10 and x[0, c, d, h, w] = 1000c + 100d + 10h + w, block 1 holds channels 8 and 9 in
    lanes 0 and 1 and zeros in lanes 2..7; the weights' re-layout puts W[k, c] at
    [k // 8, c // 8, kd, kh, kw, c % 8, k % 8]."""
    c, d, h, w = 10, 2, 2, 3
    x = np.fromfunction(lambda c_, d_, h_, w_: 1000 * c_ + 100 * d_ + 10 * h_ + w_,
                        (c, d, h, w)).astype(np.float32)[None]
    expected = np.zeros((1, 2, d, h, w, 8), np.float32)
    for ch in range(c):
        expected[0, ch // 8, :, :, :, ch % 8] = x[0, ch]
    assert expected[0, 1, 1, 0, 2, 1] == 9000 + 100 + 2  # channel 9, voxel (1, 0, 2)
    assert not expected[0, 1, ..., 2:].any()
    # The lowering's own transform, run as a model: a 1x1x1 identity Conv whose blocked
    # output is read back by from_nchw8c must give x back exactly (round trip), and
    # blocked_weights places each weight where the rule says.
    eye = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1, 1)
    model = make_model([N("Conv", ["x", "w"], ["y"])], [("x", x)], ["y"], [("w", eye)])
    got = ck.compile(model, asm=False, conv_algorithm="pznet").run(x)[0]
    np.testing.assert_array_equal(got, x)
    wt = np.arange(11 * 10 * 3, dtype=np.float32).reshape(11, 10, 1, 1, 3)
    wb = blocked3d.blocked_weights(wt)
    assert wb.shape == (2, 2, 1, 1, 3, 8, 8)
    for k, ch, kw in [(0, 0, 0), (9, 3, 2), (10, 9, 1), (7, 8, 0)]:
        assert wb[k // 8, ch // 8, 0, 0, kw, ch % 8, k % 8] == wt[k, ch, 0, 0, kw]
    assert wb[1, 1, 0, 0, 0, 2:, :].sum() == 0  # channels 10..15 do not exist
    assert wb[1, 0, 0, 0, 0, :, 3:].sum() == 0  # nor do outputs 11..15


def test_transforms_only_at_chain_edges():
    """Four chained pznet Convs: one to_nchw8c (the chain's input) and one from_nchw8c nest
    per output block kind (here 12 channels: a whole block and a partial one), none in
    between; without the fold every Conv would have its own pair."""
    model, _ = conv_chain([3, 8, 16, 8, 12], (4, 4, 4))
    ir = kernel_ir(model)
    assert ir.count('layout = "to_nchw8c"') == 1
    assert ir.count('layout = "from_nchw8c"') == 2
    # the lowering alone (before fold-layout) has a pair around every Conv
    unfolded = str(lower_to_krnl(compile_to("onnx-ir", model), conv_algorithm="pznet"))
    assert unfolded.count('layout = "to_nchw8c"') == 4
    assert unfolded.count('layout = "from_nchw8c"') == 1 + 1 + 1 + 2


def test_transform_kept_where_ncdhw_is_needed():
    """A Conv output used by both the next pznet Conv and a MaxPool (no blocked lowering):
    the NCDHW copy stays for the pool, the second Conv still reads the blocked buffer."""
    model, x = conv_chain([4, 8, 8], (4, 4, 4))
    g = model.graph
    g.node.append(N("MaxPool", ["a0"], ["p"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]))
    g.output.append(helper.make_empty_tensor_value_info("p"))
    ir = kernel_ir(model)
    assert ir.count('layout = "to_nchw8c"') == 1
    ref = ort_run(model, [x])
    got = ck.compile(model, asm=False, conv_algorithm="pznet").run(x)
    for r, o in zip(ref, got, strict=True):
        assert np.abs(o - r).max() <= TOLERANCE * np.abs(r).max()


@pytest.mark.parametrize("attrs, why", [
    (dict(strides=[2, 2, 2]), "strided"),
    (dict(dilations=[2, 2, 2]), "dilated"),
    (dict(group=2), "grouped"),
])
def test_falls_back_where_it_does_not_apply(attrs, why):
    """Strided, dilated and grouped 3-D Convs keep an existing lowering (no pznet weights in
    the IR) and still agree with onnxruntime."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal([1, 4, 7, 7, 7]).astype(np.float32)
    w = rng.standard_normal([4, 4 // attrs.get("group", 1), 3, 3, 3]).astype(np.float32)
    model = make_model([N("Conv", ["x", "w"], ["y"], **attrs)], [("x", x)], ["y"],
                       [("w", w)])
    ir = kernel_ir(model)
    assert "pznet_w_" not in ir, why
    assert error_vs_ort(model, x) <= TOLERANCE


def test_wide_conv_falls_back():
    """More than MAX_CHANNELS input channels: "auto"'s choice, not the blocked Conv."""
    model, x = conv_chain([blocked3d.MAX_CHANNELS + 1, 8], (4, 4, 4))
    assert "pznet_w_" not in kernel_ir(model)
    assert error_vs_ort(model, x) <= TOLERANCE


def test_2d_conv_falls_back():
    rng = np.random.default_rng(0)
    x = rng.standard_normal([1, 3, 6, 6]).astype(np.float32)
    w = rng.standard_normal([5, 3, 3, 3]).astype(np.float32)
    model = make_model([N("Conv", ["x", "w"], ["y"], pads=[1] * 4)], [("x", x)], ["y"],
                       [("w", w)])
    assert "pznet_w_" not in kernel_ir(model)
    assert error_vs_ort(model, x) <= TOLERANCE
