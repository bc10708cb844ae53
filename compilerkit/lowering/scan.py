"""Lowering of the scans along an axis to Kernel IR: CumProd and ReverseSequence.

CumProd (opset 26) is CumSum's nest (reduction.running_scan) with a product starting at 1.
The axis is a compile-time constant.

ReverseSequence reverses the first sequence_lens[b] elements along time_axis of each batch
entry b and copies the rest: out[t] = x[len - 1 - t] for t < len, x[t] after. The lengths are
data, checked at run time (krnl.check: each in [0, T], onnxruntime's range; the message names
the node) and clamped, so a bad length never reads out of bounds.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, shape
from compilerkit.lowering.indexing import fail
from compilerkit.lowering.reduction import running_scan
from compilerkit.lowering.topk import check_signless
from compilerkit.onnx_passes.single_node import node_label


def lower_cumprod(b: KernelBuilder, op, ins, module=None):
    x = ins[0]
    xs = shape(x)
    rank = len(xs)
    axis = onnx_d.constant_value(op.operands[1], module)
    if axis is None:
        raise NotImplementedError("CumProd with a non-constant axis")
    axis = int(axis.reshape(-1)[0])
    if not -rank <= axis < rank:
        fail(op, "axis", axis, f"a value in [{-rank}, {rank - 1}]")
    axis = axis + rank if axis < 0 else axis
    check_signless(op, x.type.element_type)
    return [running_scan(b, op, x, axis, 1, b.mul)]


def lower_reverse_sequence(b: KernelBuilder, op, ins):
    x, lens = ins
    xs = shape(x)
    if len(xs) < 2:
        fail(op, "the rank of input", len(xs), "at least 2")
    time_axis = onnx_d.get_attr(op, "time_axis", 0)
    batch_axis = onnx_d.get_attr(op, "batch_axis", 1)
    if {time_axis, batch_axis} != {0, 1}:
        fail(op, "attributes time_axis, batch_axis", [time_axis, batch_axis],
             "0 and 1, one each")
    steps, batch = xs[time_axis], xs[batch_axis]
    if shape(lens) != (batch,):
        fail(op, "the shape of sequence_lens", list(shape(lens)), f"[{batch}] (the batch)")
    zero, top = b.const(0, i64), b.const(steps, i64)
    with b.nest([batch]) as (n,):
        v = b.cast(b.load(lens, [n]), i64)
        ok = b.and_(b.cmpi("sge", v, zero), b.cmpi("sle", v, top))
        b.add(krnl.CheckOp(ok, f"node {node_label(op)!r} (ReverseSequence): a sequence length "
                               f"is out of range; valid lengths are [0, {steps}]"))
    out = b.alloc(xs, x.type.element_type)
    with b.nest(xs) as ivs:
        t, n = ivs[time_axis], ivs[batch_axis]
        v = b.cast(b.load(lens, [n]), i64)
        v = b.binary("min", b.binary("max", v, zero), top)  # in range once the check passed
        ti = b.cast(t, i64)
        flipped = b.binary("sub", b.binary("sub", v, b.const(1, i64)), ti)
        src_t = b.select(b.cmpi("slt", ti, v), flipped, ti)
        src = list(ivs)
        src[time_axis] = b.clamp(b.add(arith.IndexCastOp(src_t, INDEX)), steps)
        b.store(b.load(x, src), out, ivs)
    return [out]
