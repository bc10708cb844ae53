"""A krnl.matmul's `start` written out as a fill nest before its nest (`expand_matmul_start`),
and its clamp as a nest after it (`expand_matmul_clamp`).

Before:  iterate (i, j, k) { krnl.matmul(A, B, C, ..., bias) {start = "bias", clamp_lo = 0.0} }
After:   C_flat = krnl.reshape(C)                                 -- where C is defined
         iterate (i, j) { C_flat[c_off + i*ldc + j] = bias[i] }   -- or 0.0 for "zero"
         iterate (i, j, k) { krnl.matmul(A, B, C, ...) }
         iterate (i, j) { C_flat[c_off + i*ldc + j] = max(C_flat[...], 0.0) }  -- then min(., hi)

The host's LLVM codegen and the GPU's start a product's tiles and clamp them themselves
(codegen/microkernel.py starts its accumulators from them and clamps them as it stores); the
LoopNest-style generator's kernels sum into C as it is, so driver.finish runs these first and
gets the fill and the epilogue the lowering wrote before `start` and the clamp existed: the
same sums, the same ops, the same bits. Assumes the matmul is the only op of its nest's body
(as lowering/matmul.py emits it and tile-matmul keeps it) and that its C offset is defined
outside that nest.
"""

from __future__ import annotations

import math

from xdsl.ir import Block

from compilerkit.dialects import krnl
from compilerkit.lowering.builder import KernelBuilder, shape


def expand_matmul_start(module) -> int:
    """Expand every krnl.matmul with a `start` in `module`, in place; returns how many."""
    done = 0
    for mm in [op for op in module.walk() if isinstance(op, krnl.MatMulOp)
               and op.start is not None]:
        nest = mm.parent_op()
        if not isinstance(nest, krnl.IterateOp):
            raise ValueError(f"expand_matmul_start: a krnl.matmul{_node(mm)} outside a loop nest")
        m, n, _ = krnl.ints_of(mm.sizes)
        ldc = krnl.ints_of(mm.strides)[3]
        c = mm.c
        flat = _flat_view(c)
        body = Block()
        b = KernelBuilder(body)
        with b.nest([m, n]) as (i, j):
            v = (b.load(mm.bias, [i]) if mm.start_kind == "bias"
                 else b.const(0.0, c.type.element_type))
            b.store(v, flat, [b.affine([(mm.c_off, 1), (i, ldc), (j, 1)])])
        for op in list(body.ops):
            op.detach()
            nest.parent_block().insert_op_before(op, nest)
        mm.attributes.pop("start")
        if mm.bias is not None:
            mm.operands = list(mm.operands)[:9]
        done += 1
    return done


def expand_matmul_clamp(module) -> int:
    """Write out the clamp of every krnl.matmul in `module` as a nest after its nest, in place;
    returns how many."""
    done = 0
    for mm in [op for op in module.walk() if isinstance(op, krnl.MatMulOp)
               and any(x is not None for x in op.clamp)]:
        nest = mm.parent_op()
        if not isinstance(nest, krnl.IterateOp):
            raise ValueError(f"expand_matmul_clamp: a krnl.matmul{_node(mm)} outside a loop nest")
        m, n, _ = krnl.ints_of(mm.sizes)
        ldc = krnl.ints_of(mm.strides)[3]
        lo, hi = mm.clamp
        flat = _flat_view(mm.c)
        t = mm.c.type.element_type
        body = Block()
        b = KernelBuilder(body)
        with b.nest([m, n]) as (i, j):
            at = [b.affine([(mm.c_off, 1), (i, ldc), (j, 1)])]
            v = b.load(flat, at)
            if lo is not None:  # as lowering/elementwise.activation's Relu and Clip
                v = b.binary("max", v, b.const(lo, t))
            if hi is not None:
                v = b.binary("min", v, b.const(hi, t))
            b.store(v, flat, at)
        after = nest
        for op in list(body.ops):
            op.detach()
            nest.parent_block().insert_op_after(op, after)
            after = op
        for name in ("clamp_lo", "clamp_hi"):
            mm.attributes.pop(name, None)
        done += 1
    return done


def _flat_view(c):
    """C as one flat row, viewed right where C is defined (a code generator takes views among
    the definitions, not between the nests of a node)."""
    block = Block()
    view = KernelBuilder(block).view(c, [math.prod(shape(c))])
    if view is c:
        return c
    (op,) = list(block.ops)
    op.detach()
    owner = c.owner
    if isinstance(owner, Block):  # a function argument: at the top of the function
        if owner.first_op is None:
            owner.add_op(op)
        else:
            owner.insert_op_before(op, owner.first_op)
    else:
        owner.parent_block().insert_op_after(op, owner)
    return view


def _node(op) -> str:
    tag = op.attributes.get("onnx_node")
    return f" of {tag.data!r}" if tag is not None else ""
