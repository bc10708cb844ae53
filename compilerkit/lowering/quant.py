"""Lowering of ONNX's quantisation ops to Kernel IR, in integer arithmetic: QuantizeLinear,
DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear, MatMulInteger,
ConvInteger, QLinearMatMul and QLinearConv.

Products are summed in int32 from the widened, zero-point-shifted operands (quant_conv.py has
the Conv nest; MatMul's is matmul.integer_matmul); only the requantisation of an int32 sum to
the 8-bit output goes through float, as onnxruntime's does (MLAS's MlasRequantizeOutput):
round_half_even(clamp(float(acc) * (a_scale * b_scale / y_scale))) + y_zero_point, so results
match onnxruntime's bit for bit. QuantizeLinear is round_half_even(x / scale) + zero_point,
saturated to the output type (a division, not a multiplication by 1 / scale, as the spec and
MLAS compute it).

Unsigned tensors (uint8, uint16) are i8/i16 in memory; MLIR's integers are signless and arith
widens with sign extension, so every load of an unsigned value is widened here by `widen`
(sign-extend, then mask the high bits: codegen has no zero-extension op). No other lowering
widens unsigned values correctly, so an unsigned tensor reaching one is refused by name
(`check_unsigned`, called by the dispatcher for every op), except in the ops that only move
bytes (MOVES_BYTES).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerType, Signedness, f32, i32

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, UnsupportedOpError
from compilerkit.lowering import matmul
from compilerkit.lowering.builder import KernelBuilder, is_float, shape
from compilerkit.lowering.elementwise import lower_cast as plain_cast
from compilerkit.lowering.mathops import _round
from compilerkit.lowering.quant_conv import int_conv
from compilerkit.onnx_passes.single_node import node_label

# Ops whose lowering only copies elements (no arithmetic, comparison or widening of the
# values), so unsigned tensors pass through them unchanged.
MOVES_BYTES = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                         "Concat", "Split", "Slice", "Gather", "Tile", "Expand"})


def is_unsigned(elem) -> bool:
    return isinstance(elem, IntegerType) and elem.signedness.data == Signedness.UNSIGNED


def _fail(op, msg, error=UnsupportedOpError):
    raise error(f"node {node_label(op)!r} ({onnx_d.op_type(op)}): {msg}")


def check_unsigned(op) -> None:
    """Refuse `op` if an operand or result is unsigned and its lowering does not widen unsigned
    values (every lowering but the quantisation ops and Cast here, and the ops that only move
    bytes). Called by the dispatcher for every op, whatever registered it."""
    kind = onnx_d.op_type(op)
    if kind in MOVES_BYTES or kind in LOWERINGS:
        return
    for k, v in enumerate(list(op.operands) + list(op.results)):
        elem = getattr(v.type, "element_type", None)
        if elem is not None and is_unsigned(elem):
            n_in = len(op.operands)
            which = f"input {k}" if k < n_in else f"output {k - n_in}"
            name = "UINT8" if elem.width.data == 8 else "UINT16"
            _fail(op, f"{which}: element type {name} is not supported by {kind} (unsigned "
                  "integer tensors are lowered only by the quantisation ops, Cast and the ops "
                  "that move bytes: " + ", ".join(sorted(MOVES_BYTES)) + ")")


# ---- scalars ----------------------------------------------------------------------------------

def widen(b: KernelBuilder, v):
    """An integer scalar as i32, its value kept (unsigned values zero-extended)."""
    t = v.type
    if t == i32:
        return v
    if t.width.data > 32:
        raise NotImplementedError(f"{t} values do not fit the int32 accumulation")
    w = b.add(arith.ExtSIOp(v, i32))
    if is_unsigned(t):
        w = b.and_(w, b.const((1 << t.width.data) - 1, i32))
    return w


def to_float(b: KernelBuilder, v, elem=f32):
    """An integer (widened first) or float scalar as `elem`."""
    if is_float(v.type):
        return b.cast(v, elem)
    return b.add(arith.SIToFPOp(widen(b, v), elem))


def q_range(elem) -> tuple[int, int]:
    w = elem.width.data
    return (0, (1 << w) - 1) if is_unsigned(elem) else (-(1 << (w - 1)), (1 << (w - 1)) - 1)


def saturate(b: KernelBuilder, r, zp_f, elem):
    """The integer-valued float r plus the zero point zp_f (float), clamped to `elem`'s range
    and stored as `elem` (exact: both are small whole numbers)."""
    lo, hi = q_range(elem)
    t = r.type
    v = b.add_(r, zp_f) if zp_f is not None else r
    v = b.binary("min", b.binary("max", v, b.const(float(lo), t)), b.const(float(hi), t))
    q = b.add(arith.FPToSIOp(v, i32))
    return q if elem == i32 else b.add(arith.TruncIOp(q, elem))


def quantize(b: KernelBuilder, v, zp_f, elem):
    """round_half_even(v) + zp, saturated to `elem` (v float: x / scale, or acc * multiplier)."""
    return saturate(b, _round(b, None, v), zp_f, elem)


# ---- scale and zero-point operands ------------------------------------------------------------

def param_index(b, op, ivs, pshape, xshape, axis, block=0, what="scale"):
    """Indices into a scale or zero point of shape `pshape` for the element `ivs` of an input
    of shape `xshape`: per tensor (one element), per axis (1-D, xshape[axis] long) or blocked
    (`block` > 0: xshape with axis cut into blocks of `block`)."""
    if math.prod(pshape) == 1 and not block:
        return [b.index(0)] * len(pshape)
    if block:
        want = list(xshape)
        want[axis] = -(-xshape[axis] // block)
        if list(pshape) != want:
            _fail(op, f"the blocked {what} has shape {list(pshape)}; block_size={block} on "
                  f"axis {axis} of an input {list(xshape)} needs {want}", ModelError)
        idx = list(ivs)
        idx[axis] = b.add(arith.DivSIOp(ivs[axis], b.index(block)))
        return idx
    if len(pshape) != 1 or pshape[0] != xshape[axis]:
        _fail(op, f"the {what} has shape {list(pshape)}: per-axis quantisation on axis {axis} "
              f"of an input {list(xshape)} needs a 1-D {what} of {xshape[axis]}", ModelError)
    return [ivs[axis]]


def _axis(op, rank, scale):
    """The quantisation axis, checked only where it is used (the scale is not per tensor)."""
    axis = onnx_d.get_attr(op, "axis", 1)
    if math.prod(shape(scale)) == 1 and not onnx_d.get_attr(op, "block_size", 0):
        return 0
    if not -rank <= axis < rank:
        _fail(op, f"axis={axis} is outside the input's rank {rank}", ModelError)
    return axis % rank


def _same_element(b, zp, at):
    """`at` (an index into the scale) for the zero point; a one-element zero point may be
    shaped [] where its scale is [1], or the other way round."""
    return [b.index(0)] * len(shape(zp)) if math.prod(shape(zp)) == 1 else at


def _check_zp(op, scale, zp):
    per_tensor = zp is not None and math.prod(shape(zp)) == math.prod(shape(scale)) == 1
    if zp is not None and shape(zp) != shape(scale) and not per_tensor:
        _fail(op, f"the zero point has shape {list(shape(zp))}, the scale {list(shape(scale))}"
              " (they must match)", ModelError)


def _check_precision(op):
    precision = onnx_d.get_attr(op, "precision", 0)
    if precision:
        _fail(op, f"precision={precision} (a division in another float type) is not supported;"
              " compilerkit divides in the scale's type")


def lower_quantize(b: KernelBuilder, op, ins):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    _check_zp(op, scale, zp)
    _check_precision(op)
    elem = op.results[0].type.element_type
    xs = shape(x)
    axis = _axis(op, len(xs), scale)
    block = onnx_d.get_attr(op, "block_size", 0)
    st = scale.type.element_type
    out = b.alloc(xs, elem)
    with b.nest(xs) as ivs:
        at = param_index(b, op, ivs, shape(scale), xs, axis, block)
        v = b.binary("div", to_float(b, b.load(x, ivs), st), b.load(scale, at))
        zp_f = to_float(b, b.load(zp, _same_element(b, zp, at)), st) if zp is not None else None
        b.store(quantize(b, v, zp_f, elem), out, ivs)
    return [out]


def lower_dequantize(b: KernelBuilder, op, ins):
    x, scale = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 else None
    _check_zp(op, scale, zp)
    elem = op.results[0].type.element_type
    xs = shape(x)
    axis = _axis(op, len(xs), scale)
    block = onnx_d.get_attr(op, "block_size", 0)
    out = b.alloc(xs, elem)
    with b.nest(xs) as ivs:
        at = param_index(b, op, ivs, shape(scale), xs, axis, block)
        q = widen(b, b.load(x, ivs))
        if zp is not None:
            q = b.binary("sub", q, widen(b, b.load(zp, _same_element(b, zp, at))))
        b.store(b.mul(to_float(b, q, elem), b.load(scale, at)), out, ivs)
    return [out]


def lower_dynamic_quantize(b: KernelBuilder, op, ins):
    """onnxruntime's rule (qmath.h GetQuantizationParameter): the range [min(x, 0), max(x, 0)]
    mapped onto [0, 255]; scale 1 when it is empty (x all zero), zero point
    round(clamp(-min / scale)). Then QuantizeLinear with them."""
    x = ins[0]
    xs = shape(x)
    elem = op.results[0].type.element_type
    t = x.type.element_type
    lo_hi = b.alloc([2], t)
    zero = b.const(0.0, t)
    with b.nest([2]) as (k,):
        b.store(zero, lo_hi, [k])
    i0 = None
    with b.nest(xs) as ivs:
        v = b.load(x, ivs)
        i0, i1 = b.index(0), b.index(1)
        b.store(b.binary("min", b.load(lo_hi, [i0]), v), lo_hi, [i0])
        b.store(b.binary("max", b.load(lo_hi, [i1]), v), lo_hi, [i1])
    scale = b.alloc([], t)
    zp = b.alloc([], elem)
    lo, hi = q_range(elem)
    with b.nest([1]):
        i0, i1 = b.index(0), b.index(1)
        mn, mx = b.load(lo_hi, [i0]), b.load(lo_hi, [i1])
        s = b.binary("div", b.binary("sub", mx, mn), b.const(float(hi - lo), t))
        s = b.select(b.cmpf("oeq", mx, mn), b.const(1.0, t), s)
        b.store(s, scale, [])
        initial = b.binary("sub", b.const(float(lo), t), b.binary("div", mn, s))
        b.store(quantize(b, initial, None, elem), zp, [])
    out = b.alloc(xs, elem)
    with b.nest(xs) as ivs:
        s = b.load(scale, [])
        v = b.binary("div", b.load(x, ivs), s)
        b.store(quantize(b, v, to_float(b, b.load(zp, []), t), elem), out, ivs)
    return [out, scale, zp]


def lower_cast(b: KernelBuilder, op, ins):
    """Cast from or to an unsigned type (C's conversions, as onnxruntime's static_cast: an
    unsigned source zero-extended, a float target converted from its int32 value, an integer
    or float source to an unsigned target keeping the low bits); other Casts are
    elementwise.lower_cast's."""
    x = ins[0]
    src, elem = x.type.element_type, op.results[0].type.element_type
    if not is_unsigned(src) and not is_unsigned(elem):
        return plain_cast(b, op, ins)
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    with b.nest(shape(x)) as ivs:
        v = b.load(x, ivs)
        if is_unsigned(src):
            v = widen(b, v)  # i32 holds every uint8 and uint16 value
        if is_unsigned(elem):
            v = b.cast(v, i32) if v.type != i32 else v
            v = b.add(arith.TruncIOp(v, elem))
        else:
            v = b.cast(v, elem)
        b.store(v, out, ivs)
    return [out]


# ---- integer products -------------------------------------------------------------------------

def shifted(b: KernelBuilder, op, m, zp, axis, what):
    """m - zp as a new int32 buffer (zp per tensor, or 1-D along `axis` of m)."""
    dims = shape(m)
    out = b.alloc(dims, i32)
    if zp is not None and math.prod(shape(zp)) != 1 and (
            len(shape(zp)) != 1 or not dims or shape(zp)[0] != dims[axis]):
        _fail(op, f"the zero point of {what} has shape {list(shape(zp))}: compilerkit takes a "
              f"scalar or a 1-D zero point of {dims[axis] if dims else 1} (axis {axis} of "
              f"{what}'s {list(dims)})")
    with b.nest(dims) as ivs:
        v = widen(b, b.load(m, ivs))
        if zp is not None:
            at = [b.index(0)] * len(shape(zp)) if math.prod(shape(zp)) == 1 else [ivs[axis]]
            v = b.binary("sub", v, widen(b, b.load(zp, _same_element(b, zp, at))))
        b.store(v, out, ivs)
    return out


def _scalar_param(op, v, what):
    if v is not None and math.prod(shape(v)) != 1:
        _fail(op, f"{what} has shape {list(shape(v))}: compilerkit takes it per tensor only "
              "(one element), as onnxruntime does")


def int_matmul(b: KernelBuilder, op, a, bm, a_zp, b_zp):
    """A @ B in int32, A and B shifted by their zero points (A's scalar, B's scalar or one
    per column), numpy's batch broadcasting and 1-D operands as MatMul."""
    sa, sb = list(shape(a)), list(shape(bm))
    _scalar_param(op, a_zp, "a_zero_point")
    a32 = shifted(b, op, a, a_zp, len(sa) - 1, "A")
    b32 = shifted(b, op, bm, b_zp, len(sb) - 1, "B")
    a2 = [1] + sa if len(sa) == 1 else sa
    b2 = sb + [1] if len(sb) == 1 else sb
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = list(np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2])))
    out = b.alloc(onnx_d.shape_of(op.results[0]), i32)
    matmul.fill(b, out, 0)
    if k:
        matmul.integer_matmul(b, b.view(a32, a2), b.view(b32, b2),
                              b.view(out, batch + [m, n]), batch, m, n, k)
    return out


def lower_matmul_integer(b: KernelBuilder, op, ins):
    a, bm = ins[0], ins[1]
    a_zp = ins[2] if len(ins) > 2 else None
    b_zp = ins[3] if len(ins) > 3 else None
    return [int_matmul(b, op, a, bm, a_zp, b_zp)]


def requantize(b: KernelBuilder, acc, multiplier, y_zp, elem):
    """acc (int32) -> round_half_even(float(acc) * multiplier[c]) + y_zp, saturated to `elem`;
    multiplier(ivs) gives the float multiplier of an output element."""
    dims = shape(acc)
    out = b.alloc(dims, elem)
    with b.nest(dims) as ivs:
        v = b.mul(to_float(b, b.load(acc, ivs)), multiplier(ivs))
        zp_f = to_float(b, b.load(y_zp, [b.index(0)] * len(shape(y_zp))))
        b.store(quantize(b, v, zp_f, elem), out, ivs)
    return out


def _multiplier(b, op, in_scale, w_scale, y_scale, axis_len, channel_axis):
    """ivs -> in_scale * w_scale[c] / y_scale (onnxruntime's order of float operations), c
    the index on `channel_axis` when w_scale is per channel."""
    _scalar_param(op, in_scale, "the input scale")
    _scalar_param(op, y_scale, "y_scale")
    per_channel = math.prod(shape(w_scale)) != 1
    if per_channel and (len(shape(w_scale)) != 1 or shape(w_scale)[0] != axis_len):
        _fail(op, f"the weight scale has shape {list(shape(w_scale))}: compilerkit takes a "
              f"scalar or a 1-D scale of {axis_len}")

    def at(m):
        return [b.index(0)] * len(shape(m))

    def mult(ivs):
        ws = b.load(w_scale, [ivs[channel_axis]] if per_channel else at(w_scale))
        s = b.mul(b.load(in_scale, at(in_scale)), ws)
        return b.binary("div", s, b.load(y_scale, at(y_scale)))
    return mult


def lower_qlinear_matmul(b: KernelBuilder, op, ins):
    a, a_s, a_zp, bm, b_s, b_zp, y_s, y_zp = ins
    _check_zp(op, a_s, a_zp)
    _check_zp(op, b_s, b_zp)
    acc = int_matmul(b, op, a, bm, a_zp, b_zp)
    n = shape(bm)[-1] if len(shape(bm)) > 1 else 1
    rank = len(shape(acc))
    mult = _multiplier(b, op, a_s, b_s, y_s, n, rank - 1 if len(shape(bm)) > 1 else 0)
    return [requantize(b, acc, mult, y_zp, op.results[0].type.element_type)]


def _int_conv(b: KernelBuilder, op, x, w, x_zp, w_zp, bias):
    _scalar_param(op, x_zp, "x_zero_point")

    def load_x(ivs):
        v = widen(b, b.load(x, ivs))
        if x_zp is None:
            return v
        return b.binary("sub", v, widen(b, b.load(x_zp, [b.index(0)] * len(shape(x_zp)))))

    w32 = shifted(b, op, w, w_zp, 0, "w")
    return int_conv(b, op, shape(x), load_x, w32, bias)


def lower_conv_integer(b: KernelBuilder, op, ins):
    x, w = ins[0], ins[1]
    x_zp = ins[2] if len(ins) > 2 else None
    w_zp = ins[3] if len(ins) > 3 else None
    return [_int_conv(b, op, x, w, x_zp, w_zp, None)]


def lower_qlinear_conv(b: KernelBuilder, op, ins):
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = ins[:8]
    bias = ins[8] if len(ins) > 8 else None
    _check_zp(op, x_s, x_zp)
    _check_zp(op, w_s, w_zp)
    acc = _int_conv(b, op, x, w, x_zp, w_zp, bias)
    mult = _multiplier(b, op, x_s, w_s, y_s, shape(w)[0], 1)
    return [requantize(b, acc, mult, y_zp, op.results[0].type.element_type)]


LOWERINGS = {
    "QuantizeLinear": lower_quantize,
    "DequantizeLinear": lower_dequantize,
    "DynamicQuantizeLinear": lower_dynamic_quantize,
    "MatMulInteger": lower_matmul_integer,
    "QLinearMatMul": lower_qlinear_matmul,
    "ConvInteger": lower_conv_integer,
    "QLinearConv": lower_qlinear_conv,
    "Cast": lower_cast,
}

__all__ = ["LOWERINGS", "MOVES_BYTES", "check_unsigned", "widen", "quantize", "is_unsigned"]
