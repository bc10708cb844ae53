"""GatherElements, GatherND, ScatterElements (and Scatter), ScatterND, OneHot
(lowering/indexing.py), Trilu, Range, DepthToSpace, SpaceToDepth (lowering/layout.py) and Pad's
reflect/wrap modes (lowering/shape_ops.py) against onnxruntime on random shapes and indices
(negative ones included), bit-exact; indices out of range raise RunError naming the node and the
valid range (never a wild read or write); what is not lowered is refused naming the attribute;
ONNX's own node tests for each op."""

import numpy as np
import pytest
from ckhelpers import make_model, node_test_passes, ort_run
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck

N = helper.make_node
R = np.random.default_rng(29)
FAST = settings(max_examples=6, deadline=None)


def _exact(model, arrays):
    ref = ort_run(model, arrays)
    got = ck.compile(model, asm=False).run(*arrays)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g, r)
    return got


def _indices(rng, shape, d):
    """Random indices in [-d, d - 1] (both signs)."""
    return rng.integers(-d, d, shape).astype(np.int64)


@FAST
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_gather_elements_random(dims, data):
    axis = data.draw(st.integers(-len(dims), len(dims) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal(dims).astype(np.float32)
    idims = [data.draw(st.integers(1, d)) for d in dims]
    idims[axis] = data.draw(st.integers(1, 5))
    i = _indices(rng, idims, dims[axis])
    _exact(make_model([N("GatherElements", ["x", "i"], ["y"], axis=axis)],
                      [("x", x), ("i", i)], ["y"]), [x, i])


@FAST
@given(dims=st.lists(st.integers(1, 4), min_size=2, max_size=4), data=st.data())
def test_gather_nd_random(dims, data):
    nb = data.draw(st.integers(0, 1))
    k = data.draw(st.integers(1, len(dims) - nb))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.integers(-100, 100, dims).astype(np.int32)
    lead = [data.draw(st.integers(1, 3))]
    i = np.stack([_indices(rng, dims[:nb] + lead, dims[nb + c]) for c in range(k)], -1)
    _exact(make_model([N("GatherND", ["x", "i"], ["y"], batch_dims=nb)],
                      [("x", x), ("i", i)], ["y"]), [x, i])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, -1])
def test_scatter_elements_reductions_with_duplicates(reduction, axis):
    x = R.standard_normal((4, 5)).astype(np.float32)
    i = np.array([[0, 1, -1], [3, 1, 1], [-4, 0, 2]], np.int64)  # duplicates on both axes
    u = R.standard_normal(i.shape).astype(np.float32)
    model = make_model([N("ScatterElements", ["x", "i", "u"], ["y"], axis=axis,
                          reduction=reduction)], [("x", x), ("i", i), ("u", u)], ["y"],
                       opset=18)
    if reduction == "none":  # duplicates: the order decides; onnxruntime's last write wins
        i = np.array([[0, 1, -1], [3, 2, 1], [-3, 0, 2]], np.int64)
    _exact(model, [x, i, u])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction):
    x = R.integers(-9, 9, (4, 3, 2)).astype(np.int64)
    i = np.array([[1, 2], [-1, 0], [1, 2], [0, -3]], np.int64)  # a duplicate pair
    if reduction == "none":
        i[2] = [2, 1]
    u = R.integers(-9, 9, (4, 2)).astype(np.int64)
    model = make_model([N("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)],
                       [("x", x), ("i", i), ("u", u)], ["y"], opset=18)
    _exact(model, [x, i, u])


@FAST
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_scatter_nd_random_slices(dims, data):
    k = data.draw(st.integers(1, len(dims)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal(dims).astype(np.float32)
    n = data.draw(st.integers(1, 3))
    # Distinct index tuples: with duplicates and no reduction ONNX leaves the result open.
    flat = rng.permutation(int(np.prod(dims[:k])))[:n]
    i = np.stack(np.unravel_index(flat, dims[:k]), -1).astype(np.int64)
    i = np.where(rng.random(i.shape) < 0.5, i - np.array(dims[:k]), i)  # some negative
    u = rng.standard_normal([len(flat)] + dims[k:]).astype(np.float32)
    _exact(make_model([N("ScatterND", ["x", "i", "u"], ["y"])], [("x", x), ("i", i), ("u", u)],
                      ["y"], opset=16), [x, i, u])


def test_scatter_opset10_is_scatter_elements():
    x = np.zeros((3, 3), np.float32)
    i = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
    u = np.arange(6, dtype=np.float32).reshape(2, 3)
    _exact(make_model([N("Scatter", ["x", "i", "u"], ["y"], axis=0)],
                      [("x", x), ("i", i), ("u", u)], ["y"], opset=10), [x, i, u])


BAD = [
    ("GatherElements", lambda: [np.ones((2, 3), np.float32), np.array([[0, 3, 1]], np.int64)],
     {"axis": 1}, r"GatherElements\): an index on axis 1 is out of range; valid indices are "
                  r"\[-3, 2\]"),
    ("GatherElements", lambda: [np.ones((2, 3), np.float32), np.array([[-3], [-4]], np.int64)],
     {"axis": -1}, r"GatherElements\): an index on axis 1 .* valid indices are \[-3, 2\]"),
    ("GatherND", lambda: [np.ones((2, 3), np.float32), np.array([[1, 2], [2, 0]], np.int64)],
     {}, r"GatherND\): an index for data axis 0 is out of range; valid indices are \[-2, 1\]"),
    ("ScatterElements", lambda: [np.ones((2, 3), np.float32), np.array([[5, 0]], np.int64),
                                 np.ones((1, 2), np.float32)], {"axis": 1},
     r"ScatterElements\): an index on axis 1 is out of range"),
    ("ScatterND", lambda: [np.ones((2, 3), np.float32), np.array([[0, -4]], np.int64),
                           np.ones((1,), np.float32)], {},
     r"ScatterND\): an index for data axis 1 is out of range; valid indices are \[-3, 2\]"),
]


@pytest.mark.parametrize(("op", "arrays", "attrs", "message"), BAD,
                         ids=[f"{b[0]}-{k}" for k, b in enumerate(BAD)])
def test_out_of_range_indices_raise_run_error(op, arrays, attrs, message):
    arrays = arrays()
    names = ["x", "i", "u"][:len(arrays)]
    model = make_model([N(op, names, ["y"], name="n1", **attrs)], list(zip(names, arrays,
                                                                           strict=True)), ["y"])
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime refuses too
        ort_run(model, arrays)
    cm = ck.compile(model, asm=False)
    with pytest.raises(ck.RunError, match=r"node 'n1' \(" + message):
        cm.run(*arrays)
    good = [a if k != 1 else np.zeros_like(a) for k, a in enumerate(arrays)]
    cm.run(*good)  # the session stays usable after a failed run


F = np.float32
INVALID = [  # models ONNX's shape inference lets through and onnxruntime refuses
    ("DepthToSpace", [("x", np.zeros((1, 6, 2, 2), F))], {"blocksize": 2},
     r"channel count is 6; expected a multiple of blocksize\^2 = 4"),
    ("SpaceToDepth", [("x", np.zeros((1, 2, 3, 4), F))], {"blocksize": 2},
     r"\[height, width\] is \[3, 4\]; expected multiples of blocksize 2"),
    ("GatherElements", [("x", np.zeros((2, 3), F)), ("i", np.zeros(2, np.int64))], {},
     r"the rank of indices is 1; expected the rank of data, 2"),
    ("GatherElements", [("x", np.zeros((2, 3), F)), ("i", np.zeros((2, 3), np.int64))],
     {"axis": 5}, r"attribute axis is 5; expected a value in \[-2, 1\]"),
    ("ScatterElements", [("x", np.zeros((2, 3), F)), ("i", np.zeros((2, 3), np.int64)),
                         ("u", np.zeros((2, 2), F))], {}, r"the shape of updates is \[2, 2\]"),
    ("GatherND", [("x", np.zeros((2, 3), F)), ("i", np.zeros((3, 1), np.int64))],
     {"batch_dims": 1}, r"indices' batch dims is \[3\]; expected \[2\]"),
    ("ScatterND", [("x", np.zeros((2, 3), F)), ("i", np.zeros((2, 1), np.int64)),
                   ("u", np.zeros((2, 2), F))], {}, r"the shape of updates is \[2, 2\]; "
                                                    r"expected \[2, 3\]"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "message"), INVALID,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(INVALID)])
def test_invalid_models_refused_naming_node(op, inputs, attrs, message):
    model = make_model([N(op, [n for n, _ in inputs], ["y"], name="bad", **attrs)], inputs,
                       ["y"])
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime refuses too
        ort_run(model, [a for _, a in inputs])
    with pytest.raises(ck.ModelError, match=rf"node 'bad' \({op}\): .*{message}"):
        ck.compile(model, asm=False)


def test_scatter_reduction_on_bool_refused():
    x = np.zeros((2, 2), bool)
    i = np.zeros((1, 2), np.int64)
    model = make_model([N("ScatterElements", ["x", "i", "u"], ["y"], reduction="add",
                          name="s")], [("x", x), ("i", i), ("u", x[:1])], ["y"], opset=18)
    with pytest.raises(ck.UnsupportedOpError, match=r"node 's'.*reduction 'add' on bool"):
        ck.compile(model, asm=False)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize(("itype", "dtype", "vtype"), [  # type triples onnxruntime implements
    (np.int64, np.int64, np.float32), (np.int32, np.float32, np.float32),
    (np.float32, np.int64, np.int64), (np.int64, np.float32, np.int32)])
def test_one_hot_axes_negative_and_out_of_range(axis, itype, dtype, vtype):
    i = np.array([[0, 3, -1], [-4, 5, -6]]).astype(itype)  # 5 and -6 are out of range: all off
    depth = np.array(4, dtype)
    values = np.array([-2, 7], vtype)
    model = make_model([N("OneHot", ["i", "depth", "v"], ["y"], axis=axis)],
                       [("i", i), ("v", values)], ["y"], inits=[("depth", depth)])
    _exact(model, [i, values])


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-2, 0, 1, 5])
def test_trilu(upper, k):
    x = R.standard_normal((2, 3, 4)).astype(np.float32)
    model = make_model([N("Trilu", ["x", "k"], ["y"], upper=upper)], [("x", x)], ["y"],
                       inits=[("k", np.array(k, np.int64))], opset=14)
    _exact(model, [x])


def test_trilu_k_at_run_time_and_default():
    x = R.integers(-5, 5, (4, 3)).astype(np.int32)
    k = np.array(-1, np.int64)
    _exact(make_model([N("Trilu", ["x", "k"], ["y"], upper=0)], [("x", x), ("k", k)], ["y"],
                      opset=14), [x, k])
    _exact(make_model([N("Trilu", ["x"], ["y"])], [("x", x)], ["y"], opset=14), [x])


@pytest.mark.parametrize(("start", "limit", "delta", "dtype"), [
    (1, 10, 3, np.int64), (10, -3, -4, np.int32), (0.5, 3.0, 0.25, np.float32),
    (2.0, -1.0, -0.7, np.float64)])
def test_range_constant_inputs_not_folded(start, limit, delta, dtype):
    # Range(c) + x: the Range node is lowered (its inputs are constants, its output feeds an
    # Add with a model input), whether or not folding takes it first, the answer must agree.
    n = len(np.arange(start, limit, delta))
    x = np.zeros(n, dtype)
    inits = [(k, np.array(v, dtype)) for k, v in (("s", start), ("l", limit), ("d", delta))]
    model = make_model([N("Range", ["s", "l", "d"], ["r"]), N("Add", ["r", "x"], ["y"])],
                       [("x", x)], ["y"], inits=inits, opset=11)
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False).run(x)[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_range_lowering_itself():
    # Folding is off at -O0, so the lowering computes start + i * delta.
    inits = [("s", np.array(3, np.int64)), ("l", np.array(20, np.int64)),
             ("d", np.array(4, np.int64))]
    model = make_model([N("Range", ["s", "l", "d"], ["y"])], [], ["y"], inits=inits, opset=11)
    kir = ck.compile_to("kernel-ir", model, opt_level=0)
    text = str(kir)
    assert "krnl.iterate" in text
    got = ck.compile(model, opt_level=0, asm=False).run()[0]
    np.testing.assert_array_equal(got, np.arange(3, 20, 4))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("bs", [2, 3])
def test_depth_to_space_and_back(mode, bs):
    x = R.standard_normal((2, 2 * bs * bs, 3, 2)).astype(np.float32)
    model = make_model([N("DepthToSpace", ["x"], ["y"], blocksize=bs, mode=mode)], [("x", x)],
                       ["y"])
    y = _exact(model, [x])[0]
    back = make_model([N("SpaceToDepth", ["y"], ["x"], blocksize=bs)], [("y", y)], ["x"])
    z = _exact(back, [y])[0]
    if mode == "DCR":  # SpaceToDepth (before opset 25) is DCR's inverse
        np.testing.assert_array_equal(z, x)


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
def test_pad_modes_against_onnxruntime(mode):
    x = R.standard_normal((2, 3, 4)).astype(np.float32)
    pads = np.array([1, 2, 0, 0, 1, 3], np.int64)
    model = make_model([N("Pad", ["x", "p"], ["y"], mode=mode)], [("x", x)], ["y"],
                       inits=[("p", pads)])
    _exact(model, [x])


def test_pad_wrap_wider_than_the_axis_follows_numpy():
    # The pattern repeats (ONNX's reference is numpy.pad); onnxruntime agrees for wrap.
    x = R.standard_normal((3, 2)).astype(np.float32)
    model = make_model([N("Pad", ["x", "p"], ["y"], mode="wrap")], [("x", x)], ["y"],
                       inits=[("p", np.array([7, 5, 4, 3], np.int64))])
    got = _exact(model, [x])[0]
    np.testing.assert_array_equal(got, np.pad(x, [(7, 4), (5, 3)], mode="wrap"))


@pytest.mark.parametrize(("shape", "pads"), [((3, 2), [3, 0, 0, 0]), ((0, 2), [1, 0, 1, 0])])
def test_pad_reflect_refused_where_onnxruntime_refuses(shape, pads):
    x = np.zeros(shape, np.float32)
    model = make_model([N("Pad", ["x", "p"], ["y"], mode="reflect", name="p0")], [("x", x)],
                       ["y"], inits=[("p", np.array(pads, np.int64))])
    with pytest.raises(ck.ModelError, match=r"node 'p0' \(Pad\): mode 'reflect' on axis 0"):
        ck.compile(model, asm=False)


NODE_FLOORS = {"GatherElements": 3, "GatherND": 3, "ScatterElements": 7, "Scatter": 2,
               "ScatterND": 7, "OneHot": 5, "Trilu": 18, "Range": 2, "DepthToSpace": 2,
               "SpaceToDepth": 4, "Pad": 6}


def test_onnx_node_tests():
    passed = node_test_passes(set(NODE_FLOORS))
    assert all(passed[op] >= n for op, n in NODE_FLOORS.items()), passed


def test_emulated_s390x_gather_nd_and_scatter():
    # Big-endian: i64 indices read from data, a wrapped negative one, and an f32 scatter.
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    i = np.array([[1, -1], [0, 1]], np.int64)
    u = np.full((2, 4), -1.5, np.float32)
    model = make_model([N("GatherND", ["x", "i"], ["g"]),
                        N("ScatterND", ["x", "i", "u"], ["s"], reduction="add")],
                       [("x", x), ("i", i), ("u", u)], ["g", "s"], opset=18)
    got = ck.compile(model, target="s390x", asm=False).run(x, i, u)
    for g, r in zip(got, ort_run(model, [x, i, u]), strict=True):
        np.testing.assert_array_equal(g, r)


def test_gpu_ptx_and_scatter_order_kept_on_threads():
    # No GPU is needed to generate PTX text. The scatter nest may run its update columns on
    # threads (GPU: loops = [1]; host: krnl.parallel on the column loop) but never its
    # index rows, whose order decides duplicates.
    x = np.zeros((64, 512), np.float32)
    i = np.zeros((256, 512), np.int64)
    model = make_model([N("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="add")],
                       [("x", x), ("i", i), ("u", x[:1])], ["y"], opset=18)
    model.graph.input[2].type.tensor_type.shape.dim[0].dim_value = 256
    kir = str(ck.compile_to("kernel-ir", model, target="gpu"))
    assert kir.rstrip().count("gpu_map<flat, loops = [1]") == 1, kir[-3000:]
    ptx = ck.compile_to("ptx", model, target="gpu")
    assert ptx.count(".entry") >= 3
    rng = np.random.default_rng(3)
    i = rng.integers(-8, 8, (256, 512)).astype(np.int64)  # many duplicates per column
    u = rng.standard_normal((256, 512)).astype(np.float32)
    got = ck.compile(model, asm=False).run(x, i, u)[0]
    np.testing.assert_allclose(got, ort_run(model, [x, i, u])[0], rtol=1e-5, atol=1e-5)
