"""Differential tests against onnxruntime with hypothesis-generated shapes and attributes."""

import numpy as np
from ckhelpers import check, make_model
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

FAST = settings(max_examples=6, deadline=None)
N = helper.make_node


def arr(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@FAST
@given(c=st.integers(1, 4), oc=st.integers(1, 5), hw=st.integers(4, 9), k=st.integers(1, 3),
       s=st.integers(1, 2), p=st.integers(0, 1), d=st.integers(1, 2), g=st.sampled_from([1, 2]),
       opt=st.sampled_from([0, 3]))
def test_conv(c, oc, hw, k, s, p, d, g, opt):
    c, oc = c * g, oc * g
    if hw + 2 * p < d * (k - 1) + 1:
        d = 1  # the dilated kernel would not fit: not a valid Conv
    x, w = arr((1, c, hw, hw), 1), arr((oc, c // g, k, k), 2)
    m = make_model([N("Conv", ["x", "w", "b"], ["y"], strides=[s, s], pads=[p] * 4,
                      dilations=[d, d], group=g)], [("x", x)], ["y"],
                   [("w", w), ("b", arr((oc,), 3))])
    check(m, [x], opt_level=opt, rtol=1e-4, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["MaxPool", "AveragePool"]), hw=st.integers(3, 9),
       k=st.integers(1, 3), s=st.integers(1, 3), p=st.integers(0, 2), ceil=st.integers(0, 1),
       inc=st.integers(0, 1), d=st.integers(1, 2), rank=st.sampled_from([2, 2, 3]),
       opt=st.sampled_from([0, 3]))
def test_pool(kind, hw, k, s, p, ceil, inc, d, rank, opt):
    # ceil_mode with padding included: a last window that would start in the right padding is
    # dropped (onnxruntime and the ONNX spec); dilated AveragePool counts taps, not the span.
    p = min(p, k - 1)
    if (hw + 2 * p - d * (k - 1) - 1) < 0:
        d = 1
    x = arr((1, 2) + (hw,) * rank, 4)
    attrs = dict(kernel_shape=[k] * rank, strides=[s] * rank, pads=[p] * 2 * rank,
                 ceil_mode=ceil, dilations=[d] * rank)
    if kind == "AveragePool":
        attrs["count_include_pad"] = inc
    m = make_model([N(kind, ["x"], ["y"], **attrs)], [("x", x)], ["y"], opset=19)
    check(m, [x], opt_level=opt)


@FAST
@given(c=st.integers(1, 3), oc=st.integers(1, 3), hw=st.integers(2, 6), k=st.integers(1, 3),
       s=st.integers(1, 3), auto=st.sampled_from(["SAME_UPPER", "SAME_LOWER", "NOTSET"]),
       opt=st.sampled_from([0, 3]))
def test_conv_transpose(c, oc, hw, k, s, auto, opt):
    x, w = arr((1, c, hw, hw), 10), arr((c, oc, k, k), 11)
    attrs = dict(strides=[s, s], auto_pad=auto)
    if auto == "NOTSET":
        attrs["pads"] = [min(1, k - 1)] * 4
    m = make_model([N("ConvTranspose", ["x", "w"], ["y"], **attrs)], [("x", x)], ["y"],
                   [("w", w)])
    check(m, [x], opt_level=opt, rtol=1e-4, atol=1e-4)


@FAST
@given(m_=st.integers(1, 70), n=st.integers(1, 40), k=st.integers(1, 300),
       ta=st.integers(0, 1), tb=st.integers(0, 1), opt=st.sampled_from([0, 3]))
def test_gemm(m_, n, k, ta, tb, opt):
    a = arr((k, m_) if ta else (m_, k), 5)
    b = arr((n, k) if tb else (k, n), 6)
    m = make_model([N("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb, alpha=1.5)],
                   [("a", a), ("b", b)], ["y"], [("c", arr((n,), 7))])
    check(m, [a, b], opt_level=opt, rtol=1e-4, atol=1e-4)


@FAST
@given(batch=st.lists(st.integers(1, 3), max_size=2), m_=st.integers(1, 9),
       n=st.integers(1, 40), k=st.integers(1, 20))
def test_matmul(batch, m_, n, k):
    a, b = arr(tuple(batch) + (m_, k), 8), arr((k, n), 9)
    m = make_model([N("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"])
    check(m, [a, b], rtol=1e-4, atol=1e-4)


@st.composite
def broadcast_pair(draw):
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    other = [draw(st.sampled_from([d, 1])) for d in shape][draw(st.integers(0, len(shape) - 1)):]
    return tuple(shape), tuple(other)


@FAST
@given(shapes=broadcast_pair(), op=st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min"]),
       swap=st.booleans())
def test_broadcast_elementwise(shapes, op, swap):
    a, b = arr(shapes[0], 10), arr(shapes[1], 11) + (3.0 if op == "Div" else 0.0)
    if swap:
        a, b = b, a
    m = make_model([N(op, ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"])
    check(m, [a, b])


@FAST
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       opset=st.sampled_from([11, 13]))
def test_softmax(shape, data, opset):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = arr(tuple(shape), 12) * 5
    m = make_model([N("Softmax", ["x"], ["y"], axis=axis)], [("x", x)], ["y"], opset=opset)
    check(m, [x])


@FAST
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       op=st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax"]), keep=st.integers(0, 1))
def test_reductions(shape, data, op, keep):
    axes = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    x = arr(tuple(shape), 13)
    m = make_model([N(op, ["x"], ["y"], axes=axes, keepdims=keep)], [("x", x)], ["y"], opset=11)
    check(m, [x])
