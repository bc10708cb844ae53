"""Lowering of elementwise ONNX ops (unary, binary and variadic, numpy broadcasting) to one
krnl.iterate over the output: load each input at its broadcast index, scalar math, store.
In big nests, short trailing dimensions are merged into one loop (see merged_dims) so the
innermost loop is long enough for LLVM to vectorise.

Assumes static shapes; float math on f32/f64, add/sub/mul/div/max/min also on integers.
"""

from __future__ import annotations

import math

import numpy as np

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, broadcast_index, is_float, shape
from compilerkit.onnx_passes.fuse_conv import fused_activation


def _sigmoid(b, x, op):
    # 1 / (1 + e) with e = exp(-|x|) <= 1, and e / (1 + e) for x < 0: the textbook
    # 1 / (1 + exp(-x)) overflows exp for x < -88.7 and returns 0 where the answer is still a
    # subnormal float (down to x = -103.9). Branch-free (a select), so the loop vectorises.
    one = b.const(1.0, x.type)
    e = b.unary("exp", b.neg(b.unary("abs", x)))
    s = b.binary("div", one, b.add_(one, e))
    neg = b.cmpf("olt", x, b.const(0.0, x.type))
    return b.select(neg, b.mul(e, s), s)


def _leaky(b, x, op, default=0.01):
    alpha = b.const(onnx_d.get_attr(op, "alpha", default), x.type)
    neg = b.cmpf("olt", x, b.const(0.0, x.type))
    return b.select(neg, b.mul(alpha, x), x)


def _elu(b, x, op):
    alpha = b.const(onnx_d.get_attr(op, "alpha", 1.0), x.type)
    one = b.const(1.0, x.type)
    neg = b.cmpf("olt", x, b.const(0.0, x.type))
    return b.select(neg, b.mul(alpha, b.binary("sub", b.unary("exp", x), one)), x)


def _selu(b, x, op):
    gamma = b.const(onnx_d.get_attr(op, "gamma", 1.05070102214813232421875), x.type)
    alpha = b.const(onnx_d.get_attr(op, "alpha", 1.67326319217681884765625), x.type)
    neg = b.cmpf("ole", x, b.const(0.0, x.type))
    e = b.mul(alpha, b.binary("sub", b.unary("exp", x), b.const(1.0, x.type)))
    return b.mul(gamma, b.select(neg, e, x))


def _hard_sigmoid(b, x, op):
    alpha = b.const(onnx_d.get_attr(op, "alpha", 0.2), x.type)
    beta = b.const(onnx_d.get_attr(op, "beta", 0.5), x.type)
    y = b.add_(b.mul(alpha, x), beta)
    return b.binary("min", b.binary("max", y, b.const(0.0, x.type)), b.const(1.0, x.type))


def _softplus(b, x, op):
    # log(1 + exp(x)) computed as max(x, 0) + log1p(exp(-|x|)) so large x does not overflow.
    # log1p(e) as Kahan's log(u) * e / (u - 1), u = 1 + e (e where u rounds to 1): a plain
    # log(1 + e) is 0 once e < 2^-24, where softplus(-87.5) is still 1e-38.
    zero = b.const(0.0, x.type)
    one = b.const(1.0, x.type)
    e = b.unary("exp", b.neg(b.unary("abs", x)))
    u = b.add_(one, e)
    log1p = b.mul(b.unary("log", u), b.binary("div", e, b.binary("sub", u, one)))
    log1p = b.select(b.cmpf("oeq", u, one), e, log1p)
    return b.add_(b.binary("max", x, zero), log1p)


def _neg(b, x):
    # Signed integers (Neg and Abs take int8-int64 too): 0 - x, which wraps at the minimum
    # as onnxruntime's and numpy's do (-(-128) is -128 in int8).
    if is_float(x.type):
        return b.neg(x)
    return b.binary("sub", b.const(0, x.type), x)


def _abs(b, x):
    if is_float(x.type):
        return b.unary("abs", x)
    return b.select(b.cmpi("slt", x, b.const(0, x.type)), _neg(b, x), x)


def _relu(b, x, op):
    if is_float(x.type):
        return b.binary("max", x, b.const(0.0, x.type))
    return b.binary("max", x, b.const(0, x.type))


UNARY = {
    "Relu": _relu,
    "Sigmoid": _sigmoid,
    "Tanh": lambda b, x, op: b.unary("tanh", x),
    "Exp": lambda b, x, op: b.unary("exp", x),
    "Log": lambda b, x, op: b.unary("log", x),
    "Sqrt": lambda b, x, op: b.unary("sqrt", x),
    "Abs": lambda b, x, op: _abs(b, x),
    "Neg": lambda b, x, op: _neg(b, x),
    "Floor": lambda b, x, op: b.unary("floor", x),
    "Ceil": lambda b, x, op: b.unary("ceil", x),
    "Reciprocal": lambda b, x, op: b.binary("div", b.const(1.0, x.type), x),
    "LeakyRelu": _leaky,
    "Elu": _elu,
    "Selu": _selu,
    "HardSigmoid": _hard_sigmoid,
    "Softplus": _softplus,
    "Softsign": lambda b, x, op: b.binary(
        "div", x, b.add_(b.const(1.0, x.type), b.unary("abs", x))),
    "HardSwish": lambda b, x, op: activation(b, x, "HardSwish", []),
    "Identity": lambda b, x, op: x,
    "Dropout": lambda b, x, op: x,
}

def activation(b: KernelBuilder, x, name: str, params):
    """A fused activation (a Conv's `activation` / `activation_params`, see
    onnx_passes/fuse_conv.py) applied to the scalar x, with the same ops as the standalone
    lowering of that ONNX op, so fusing never changes a result."""
    t = x.type
    if name == "Relu":
        return _relu(b, x, None)
    if name == "LeakyRelu":
        neg = b.cmpf("olt", x, b.const(0.0, t))
        return b.select(neg, b.mul(b.const(params[0], t), x), x)
    if name == "Clip":
        lo, hi = params
        if lo != -np.inf:
            x = b.binary("max", x, b.const(lo, t))
        if hi != np.inf:
            x = b.binary("min", x, b.const(hi, t))
        return x
    if name == "Sigmoid":
        return _sigmoid(b, x, None)
    if name == "Tanh":
        return b.unary("tanh", x)
    if name == "HardSigmoid":
        y = b.add_(b.mul(b.const(params[0], t), x), b.const(params[1], t))
        return b.binary("min", b.binary("max", y, b.const(0.0, t)), b.const(1.0, t))
    if name == "HardSwish":
        return b.mul(x, activation(b, x, "HardSigmoid", [1.0 / 6.0, 0.5]))
    if name == "Swish":
        z = x if params[0] == 1.0 else b.mul(b.const(params[0], t), x)
        return b.mul(x, _sigmoid(b, z, None))
    raise NotImplementedError(f"fused activation {name!r}")


BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
VARIADIC = {"Sum": "add", "Max": "max", "Min": "min", "Mean": "add"}


# Trailing dimensions are merged (through krnl.reshape views, no copy) while the innermost loop
# has fewer than MIN_INNER iterations, in nests of at least MIN_MERGE elements. LLVM's loop
# vectoriser leaves a loop of fewer than 16 iterations scalar when it needs run-time alias
# checks (it does in a parallel loop's body, where the buffers come from the thread context):
# a Sigmoid over 1x672x14x14 ran a 14-iteration loop, scalar; merged, it runs 196 at a time in
# <8 x float>. Small nests keep one loop per dimension (nothing to gain, easier to read).
MIN_INNER = 64
MIN_MERGE = 4096


def merged_dims(out_dims, in_dims):
    """How many leading output dims stay as they are (k) when dims k.. are merged into one, or
    None when nothing is merged. Dims join only where every input is either full in all of
    them or broadcast (size 1) in all of them, so each input stays a plain view."""
    rank = len(out_dims)
    if rank < 2 or math.prod(out_dims) < MIN_MERGE:
        return None
    aligned = [(1,) * (rank - len(d)) + tuple(d) for d in in_dims]
    k = rank - 1
    while k > 0 and math.prod(out_dims[k:]) < MIN_INNER:
        span = range(k - 1, rank)
        if not all(all(a[j] == out_dims[j] for j in span) or all(a[j] == 1 for j in span)
                   for a in aligned):
            break
        k -= 1
    return None if k == rank - 1 else k


def _merge(b, mem, rank, k):
    dims = (1,) * (rank - len(shape(mem))) + shape(mem)
    return b.view(mem, [*dims[:k], math.prod(dims[k:])])


def _map(b: KernelBuilder, inputs, out, scalar):
    """out[ivs] = scalar([in[broadcast(ivs)] for in in inputs]), short trailing dims merged
    (merged_dims)."""
    rank = len(shape(out))
    k = merged_dims(shape(out), [shape(m) for m in inputs])
    if k is not None:
        inputs = [_merge(b, m, rank, k) if shape(m) else m for m in inputs]
        out = _merge(b, out, rank, k)
    with b.nest(shape(out)) as ivs:
        values = [b.load(m, broadcast_index(b, ivs, shape(m))) for m in inputs]
        b.store(scalar(values), out, ivs)


def lower_unary(b: KernelBuilder, op, ins):
    kind = onnx_d.op_type(op)
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    _map(b, ins[:1], out, lambda v: UNARY[kind](b, v[0], op))
    return [out]


def lower_binary(b: KernelBuilder, op, ins):
    """out = a op b, then the activation fuse-elementwise attached, if any."""
    kind = BINARY[onnx_d.op_type(op)]
    act = fused_activation(op)
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)

    def scalar(v):
        y = b.binary(kind, v[0], v[1])
        return activation(b, y, *act) if act is not None else y

    _map(b, ins, out, scalar)
    return [out]


def lower_variadic(b: KernelBuilder, op, ins):
    name = onnx_d.op_type(op)
    kind = VARIADIC[name]
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)

    def scalar(values):
        acc = values[0]
        for v in values[1:]:
            acc = b.binary(kind, acc, v)
        if name == "Mean":
            acc = b.binary("div", acc, b.const(float(len(values)), acc.type))
        return acc

    _map(b, ins, out, scalar)
    return [out]


def _clip_bounds(op, module, opset):
    if opset < 11:
        return onnx_d.get_attr(op, "min", -np.inf), onnx_d.get_attr(op, "max", np.inf)
    bounds = []
    for k, default in ((1, -np.inf), (2, np.inf)):
        if len(op.operands) > k and not onnx_d.is_absent(op.operands[k]):
            v = onnx_d.constant_value(op.operands[k], module)
            if v is None:
                raise NotImplementedError("Clip with non-constant min/max")
            bounds.append(float(v))
        else:
            bounds.append(default)
    return bounds


def lower_clip(b: KernelBuilder, op, ins, module=None, opset=13):
    lo, hi = _clip_bounds(op, module, opset)
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)

    def scalar(v):
        x = v[0]
        if lo != -np.inf:
            x = b.binary("max", x, b.const(lo, x.type))
        if hi != np.inf:
            x = b.binary("min", x, b.const(hi, x.type))
        return x

    _map(b, ins[:1], out, scalar)
    return [out]


def lower_expand(b: KernelBuilder, op, ins):
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    _map(b, ins[:1], out, lambda v: v[0])
    return [out]


def lower_cast(b: KernelBuilder, op, ins):
    elem = op.results[0].type.element_type
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    _map(b, ins[:1], out, lambda v: b.cast(v[0], elem))
    return [out]
