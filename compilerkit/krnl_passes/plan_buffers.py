"""Buffer planning: give every `krnl.alloc` an offset in one arena, reusing memory between
buffers whose lifetimes do not overlap.

Assumes allocs sit in the function's top-level block (lowering puts them there). A buffer is
live from its alloc to the last top-level op that uses it or any `krnl.reshape` view of it.
Offsets are chosen first-fit, largest buffers first, and aligned to 64 bytes. The function gets
`arena_bytes` (what the plan needs) and `naive_bytes` (the sum of all buffers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.single_node import main_func

ALIGN = 64


def _nbytes(t) -> int:
    size = max(1, math.prod(t.get_shape())) * krnl.elem_bytes(t)
    return (size + ALIGN - 1) // ALIGN * ALIGN


def _top(op, block):
    while op.parent_block() is not block:
        op = op.parent_op()
    return op


def _last_use(value, block, order):
    last = order[_top(value.owner, block)]
    stack = [value]
    while stack:
        v = stack.pop()
        for use in v.uses:
            user = use.operation
            last = max(last, order[_top(user, block)])
            if isinstance(user, krnl.ReshapeOp):
                stack.append(user.res)
    return last


def plan_buffers(module) -> dict:
    f = main_func(module)
    block = f.body.block
    order = {op: k for k, op in enumerate(block.ops)}
    allocs = [op for op in block.ops if isinstance(op, krnl.AllocOp)]
    intervals = [(order[a], _last_use(a.res, block, order), _nbytes(a.res.type), a)
                 for a in allocs]
    placed = []  # (offset, size, start, end)
    total = 0
    for start, end, size, a in sorted(intervals, key=lambda x: (-x[2], x[0])):
        busy = sorted((o, s) for o, s, st, en in placed if not (en < start or st > end))
        offset = 0
        for o, s in busy:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        placed.append((offset, size, start, end))
        a.attributes["offset"] = onnx_d.to_mlir_attr(offset)
        total = max(total, offset + size)
    f.attributes["arena_bytes"] = onnx_d.to_mlir_attr(total)
    f.attributes["naive_bytes"] = onnx_d.to_mlir_attr(sum(x[2] for x in intervals))
    return {"arena_bytes": total, "naive_bytes": sum(x[2] for x in intervals)}


@dataclass(frozen=True)
class PlanBuffersPass(ModulePass):
    """`plan-buffers`: arena offsets for every krnl.alloc (see the module docstring)."""

    name = "plan-buffers"

    def apply(self, ctx, op) -> None:
        plan_buffers(op)
