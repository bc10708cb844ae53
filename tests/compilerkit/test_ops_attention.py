"""Einsum, Attention, RotaryEmbedding, Swish and SwiGLU (lowering/attention.py) against
onnxruntime (and ONNX's reference implementation where onnxruntime has no kernel or refuses
the input, as a mask shorter than the keys), with the values that tell right from nearly
right: -inf masks, NaN and inf inputs, grouped heads, past keys; and ONNX's own node tests.
What is not lowered is refused naming node and input or attribute."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from onnx import helper
from onnx.reference import ReferenceEvaluator

import compilerkit as ck

N = helper.make_node
R = np.random.default_rng(23)


def _f32(*dims, scale=1.0):
    return (R.standard_normal(dims) * scale).astype(np.float32)


def _close(got, ref, rtol=1e-4, atol=1e-5):
    assert len(got) >= len(ref)
    for g, r in zip(got, ref, strict=False):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)


def _vs_ort(model, arrays, **kw):
    got = ck.compile(model, asm=False).run(*arrays)
    _close(got, ort_run(model, arrays), **kw)
    return got


def _vs_reference(model, arrays, **kw):
    got = ck.compile(model, asm=False).run(*arrays)
    with np.errstate(invalid="ignore"):  # the reference's own exp(NaN - x)
        ref = ReferenceEvaluator(model).run(None, {i.name: a for i, a in zip(
            model.graph.input, arrays, strict=True)})
    _close(got, ref, **kw)
    return got


# ---- Einsum --------------------------------------------------------------------------------

@pytest.mark.parametrize("eq, dims", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit output: ik
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ba", [(3, 2)]),  # implicit output sorted: ab, a transpose
])
def test_einsum_contractions_match_onnxruntime(eq, dims):
    arrays = [_f32(*d) for d in dims]
    names = [f"x{k}" for k in range(len(arrays))]
    model = make_model([N("Einsum", names, ["y"], equation=eq)],
                       list(zip(names, arrays, strict=True)), ["y"], opset=12)
    _vs_ort(model, arrays)


def test_einsum_integers_and_special_values():
    a = np.array([[1, -2], [3, 2**20]], np.int32)
    model = make_model([N("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
                       [("a", a), ("b", a)], ["y"], opset=12)
    got = _vs_ort(model, [a, a])
    assert got[0].dtype == np.int32
    x = np.array([[np.nan, 1.0], [np.inf, 2.0]], np.float32)
    y = np.array([[1.0, 0.0], [2.0, 3.0]], np.float32)
    model = make_model([N("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
                       [("a", x), ("b", y)], ["y"], opset=12)
    got = ck.compile(model, asm=False).run(x, y)[0]
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ y
    np.testing.assert_array_equal(got, want)  # NaN, inf and inf * 0 = NaN


@pytest.mark.parametrize("eq, dims, words", [
    ("...ij->...ji", [(2, 3, 4)], "ellipsis"),
    ("ii->i", [(3, 3)], "diagonal"),
])
def test_einsum_refuses_ellipsis_and_diagonals(eq, dims, words):
    arrays = [_f32(*d) for d in dims]
    model = make_model([N("Einsum", ["x"], ["y"], equation=eq, name="ein")], [("x", arrays[0])],
                       ["y"], opset=12)
    with pytest.raises(ck.UnsupportedOpError, match=f"'ein'.*{words}"):
        ck.compile(model, asm=False)


# ---- Attention -----------------------------------------------------------------------------

def _attention(inputs, outputs=("y",), **attrs):
    names = [n for n, _ in inputs]
    return make_model([N("Attention", names, list(outputs), name="att", **attrs)],
                      [(n, a) for n, a in inputs if n], list(outputs), opset=23)


@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"scale": 0.3, "softcap": 2.0}])
def test_attention_4d_grouped_heads_match_onnxruntime(attrs):
    q, k, v = _f32(2, 4, 3, 8), _f32(2, 2, 5, 8), _f32(2, 2, 5, 6)
    _vs_ort(_attention([("q", q), ("k", k), ("v", v)], **attrs), [q, k, v])


def test_attention_3d_with_float_mask_and_past_matches_onnxruntime():
    q, k, v = _f32(1, 3, 8), _f32(1, 3, 8), _f32(1, 3, 8)
    pk, pv = _f32(1, 2, 2, 4), _f32(1, 2, 2, 4)
    mask = _f32(3, 5)
    mask[1, :2] = -np.inf  # part of a row masked out
    model = _attention([("q", q), ("k", k), ("v", v), ("m", mask), ("pk", pk), ("pv", pv)],
                       outputs=("y", "present_k", "present_v"), q_num_heads=2, kv_num_heads=2,
                       is_causal=1)
    _vs_ort(model, [q, k, v, mask, pk, pv])


def test_attention_short_bool_mask_and_fully_masked_row():
    # A bool mask shorter than the keys counts as false past its end (onnxruntime refuses a
    # short mask, so the reference checks it); a row with every key masked is all zeros.
    q, k, v = _f32(1, 1, 3, 4), _f32(1, 1, 4, 4), _f32(1, 1, 4, 4)
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    got = _vs_reference(_attention([("q", q), ("k", k), ("v", v), ("m", mask)]),
                        [q, k, v, mask])
    assert np.all(got[0][0, 0, 1] == 0)


def test_attention_nan_and_inf_inputs_follow_the_reference():
    q, k, v = _f32(1, 1, 2, 4), _f32(1, 1, 3, 4), _f32(1, 1, 3, 4)
    q[0, 0, 0, 0] = np.nan
    k[0, 0, 1, 2] = np.inf
    got = _vs_reference(_attention([("q", q), ("k", k), ("v", v)]), [q, k, v])
    assert np.isnan(got[0]).any()


def test_attention_refusals_name_node_and_input():
    q = _f32(1, 1, 2, 4)
    nonpad = np.array([2], np.int64)
    model = make_model([N("Attention", ["q", "q", "q", "", "", "", "n"], ["y"], name="att")],
                       [("q", q), ("n", nonpad)], ["y"], opset=24)
    with pytest.raises(ck.UnsupportedOpError, match="'att'.*nonpad_kv_seqlen"):
        ck.compile(model, asm=False)
    model = make_model([N("Attention", ["q", "q", "q"], ["y", "", "", "qk"], name="att")],
                       [("q", q)], ["y", "qk"], opset=23)
    with pytest.raises(ck.UnsupportedOpError, match="'att'.*output 3"):
        ck.compile(model, asm=False)


# ---- RotaryEmbedding -----------------------------------------------------------------------

@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
def test_rotary_embedding_matches_onnxruntime(interleaved, rotary_dim):
    x = _f32(2, 3, 4 * 8)  # 3-D: [batch, seq, heads * head]
    cos, sin = _f32(10, (rotary_dim or 8) // 2), _f32(10, (rotary_dim or 8) // 2)
    pos = np.array([[0, 1, 2], [9, 3, 3]], np.int64)
    model = make_model([N("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], num_heads=4,
                          interleaved=interleaved, rotary_embedding_dim=rotary_dim)],
                       [("x", x), ("c", cos), ("s", sin), ("p", pos)], ["y"], opset=23)
    _vs_ort(model, [x, cos, sin, pos])


def test_rotary_embedding_4d_without_positions_and_a_bad_position():
    x = _f32(1, 2, 3, 4)
    cos, sin = _f32(1, 3, 2), _f32(1, 3, 2)
    model = make_model([N("RotaryEmbedding", ["x", "c", "s"], ["y"])],
                       [("x", x), ("c", cos), ("s", sin)], ["y"], opset=23)
    _vs_ort(model, [x, cos, sin])
    cos, sin = _f32(4, 2), _f32(4, 2)
    pos = np.array([[0, 4, 1]], np.int64)
    model = make_model([N("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], name="rope")],
                       [("x", x), ("c", cos), ("s", sin), ("p", pos)], ["y"], opset=23)
    with pytest.raises(ck.RunError, match="'rope'.*position_ids"):
        ck.compile(model, asm=False).run(x, cos, sin, pos)


# ---- Swish, SwiGLU -------------------------------------------------------------------------

EDGE = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -100.0, 100.0, -1.5, 2.5, 1e-30],
                np.float32)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swish_and_swiglu_on_special_values(alpha):
    def swish(a):
        a = a.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            return a / (1 + np.exp(-alpha * a))

    model = make_model([N("Swish", ["x"], ["y"], alpha=alpha)], [("x", EDGE)], ["y"], opset=24)
    got = ck.compile(model, asm=False).run(EDGE)[0]
    # -inf * sigmoid(-inf) is -inf * 0: NaN in both; subnormal results kept (-100).
    np.testing.assert_allclose(got, swish(EDGE).astype(np.float32), rtol=1e-6, atol=1e-37)
    b = EDGE[::-1].copy()
    model = make_model([N("SwiGLU", ["a", "b"], ["y"], alpha=alpha)], [("a", EDGE), ("b", b)],
                       ["y"], opset=28)
    got = ck.compile(model, asm=False).run(EDGE, b)[0]
    with np.errstate(invalid="ignore"):
        want = (swish(EDGE) * b).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-37)


def test_swiglu_refuses_different_shapes():
    a, b = _f32(2, 4), _f32(1, 4)
    model = make_model([N("SwiGLU", ["a", "b"], ["y"], name="glu")], [("a", a), ("b", b)],
                       ["y"], opset=28)
    with pytest.raises((ck.ModelError, ck.UnsupportedOpError), match="glu"):
        ck.compile(model, asm=False)


NODE_FLOORS = {"Einsum": 5, "Attention": 50, "RotaryEmbedding": 8, "Swish": 3, "SwiGLU": 2}


@pytest.mark.slow
def test_onnx_node_tests_for_attention_ops():
    passed = node_test_passes(set(NODE_FLOORS))
    assert all(passed[op] >= n for op, n in NODE_FLOORS.items()), passed


def test_emulated_s390x_attention_block_matches_onnxruntime():
    # Big-endian: a rotary-embedded query, causal grouped-head attention with its i64 position
    # ids and a bool mask, and an Einsum projection, in one graph.
    q, k, v = _f32(1, 4, 3, 4), _f32(1, 2, 3, 4), _f32(1, 2, 3, 4)
    cos, sin = _f32(5, 2), _f32(5, 2)
    pos = np.array([[4, 0, 2]], np.int64)
    mask = np.array([[True, False, True], [True, True, False], [False, True, True]])
    w = _f32(4, 4)
    nodes = [N("RotaryEmbedding", ["q", "c", "s", "p"], ["qr"]),
             N("Attention", ["qr", "k", "v", "m"], ["a"], is_causal=1),
             N("Einsum", ["a", "w"], ["y"], equation="bhsd,de->bhse")]
    inputs = [("q", q), ("k", k), ("v", v), ("c", cos), ("s", sin), ("p", pos), ("m", mask),
              ("w", w)]
    model = make_model(nodes, inputs, ["y"], opset=23)
    arrays = [a for _, a in inputs]
    got = ck.compile(model, target="s390x", asm=False).run(*arrays)
    _close(got, ort_run(model, arrays))


def test_attention_ops_compile_to_ptx():
    # The GPU target (no device needed for the text): each kernel of the block is emitted.
    q, k, v = _f32(1, 4, 3, 8), _f32(1, 2, 3, 8), _f32(1, 2, 3, 8)
    x = _f32(1, 3, 8)
    model = make_model([N("Attention", ["q", "k", "v"], ["y"], is_causal=1, name="att"),
                        N("RotaryEmbedding", ["x", "c", "s", "p"], ["r"], num_heads=2,
                          name="rope"),
                        N("Einsum", ["y", "y"], ["e"], equation="bhqd,bhkd->bhqk", name="ein")],
                       [("q", q), ("k", k), ("v", v), ("x", x), ("c", _f32(4, 2)),
                        ("s", _f32(4, 2)), ("p", np.array([[0, 1, 3]], np.int64))],
                       ["e", "r"], opset=23)
    ptx = ck.compile_to("ptx", model, target="gpu")
    assert ".entry" in ptx and "att" in ptx and "rope" in ptx and "ein" in ptx
