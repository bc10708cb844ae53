"""Buffer planning: give every `krnl.alloc` an offset in one arena, reusing memory between
buffers whose lifetimes do not overlap.

Assumes allocs sit in the function's top-level block (lowering puts them there). A buffer is
live from its alloc to the last top-level op that uses it or any `krnl.reshape` view of it.
Offsets are chosen first-fit, largest buffers first, and aligned to 64 bytes. The function gets
`arena_bytes` (what the plan needs) and `naive_bytes` (the sum of all buffers).

Concat in place (`slabs`, on by default): a nest lowering tagged `krnl.CONCAT_SLAB` copies a
whole buffer into one contiguous slab of a Concat's output (nothing before the axis but ones).
Where the nest is still that copy (its loads all read one top-level `krnl.alloc`, its stores all
write another with the loaded values; a schedule may have tiled it, fusion may not have added to
it) and the source is placed in no other slab, the source buffer is given that slab of the
output and the nest goes: its producer writes the output directly. DenseNet's chain of Concats
(each layer's features appended to the block's) then copies nothing, and the buffers of a chain
are planned as one, live from its first member's alloc to its last use. Sharing bytes is safe
because a buffer is written only before its first reader: the slab's producer runs before the
Concat, every reader of the output after it. Kernel IR given by hand is planned without it
(pipeline.planned): the tag's offset is trusted, not re-derived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import IndexType
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.single_node import main_func

ALIGN = 64
# What else a pure copy nest may hold besides index arithmetic: its loops' schedule
_LOOP_OPS = (krnl.IterateOp, krnl.DefineLoopsOp, krnl.BlockOp, krnl.PermuteOp, krnl.UnrollOp,
             krnl.ParallelOp)


def _index_arith(op) -> bool:
    return op.name.startswith("arith.") and all(isinstance(r.type, IndexType)
                                                 for r in op.results)


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


def _copy_buffers(nest, block):
    """(source alloc, destination alloc) of a nest that only copies one top-level krnl.alloc's
    elements into another's (loads of one buffer, stores of exactly those loaded values into
    another, index arithmetic and loop ops); None otherwise."""
    loads, stores = set(), []
    for op in nest.walk():
        if isinstance(op, krnl.LoadOp):
            loads.add(op)
        elif isinstance(op, krnl.StoreOp):
            stores.append(op)
        elif not isinstance(op, _LOOP_OPS) and not _index_arith(op):
            return None
    sources = {ld.memref for ld in loads}
    targets = {st.memref for st in stores}
    if len(sources) != 1 or len(targets) != 1 or not stores or \
            any(st.value.owner not in loads for st in stores):
        return None
    src, dst = sources.pop(), targets.pop()
    for v in (src, dst):
        if not isinstance(v.owner, krnl.AllocOp) or v.owner.parent_block() is not block:
            return None
    if src is dst or src.type.element_type != dst.type.element_type:
        return None
    return src.owner, dst.owner


def _erase_nest(nest, block, position):
    """Remove a top-level nest and the loop handles only it used (define_loops, block,
    permute, unroll, parallel ops), users first. `position`: {top-level op: its index in
    `block`} (the order of what is left does not change)."""
    handles = list(nest.loops)
    nest.detach()
    nest.erase()
    dead, todo = set(), [h.owner for h in handles]
    while todo:
        op = todo.pop()
        if op in dead or op.parent_block() is not block:
            continue
        dead.add(op)
        for r in op.results:
            todo.extend(u.operation for u in r.uses)
    for op in sorted(dead, key=position.__getitem__, reverse=True):
        op.detach()
        op.erase()


def _writers(block) -> dict:
    """{buffer (a view's root): the top-level ops that write it, in order}."""
    out = {}
    for top in block.ops:
        for op in top.walk():
            mem = op.memref if isinstance(op, krnl.StoreOp) else (
                op.c if isinstance(op, krnl.MatMulOp) else None)
            if mem is not None:
                ops = out.setdefault(krnl.root_buffer(mem), [])
                if not ops or ops[-1] is not top:
                    ops.append(top)
    return out


def _slabs(block) -> dict:
    """{source alloc: (destination alloc, byte offset)} for the Concat copies that can go
    (see the module docstring); their nests are removed. A copy stays where a source is
    written again after it or the output is written before it by anything but the Concat's
    copies (no lowering does either: the slab would change under a reader)."""
    inside = {}
    position = {op: k for k, op in enumerate(block.ops)}
    writers = _writers(block)

    def clean(src, dst, nest):
        at = position[nest]
        return (all(position[w] <= at for w in writers.get(src.res, ()))
                and all(krnl.CONCAT_SLAB in w.attributes for w in writers.get(dst.res, ())
                        if position[w] < at))

    for nest in [op for op in block.ops if isinstance(op, krnl.IterateOp)]:
        tag = nest.attributes.get(krnl.CONCAT_SLAB)
        if tag is None:
            continue
        pair = _copy_buffers(nest, block)
        if pair is None or pair[0] in inside or not clean(*pair, nest):
            continue
        src, dst = pair
        first = tag.value.data
        n_src, n_dst = math.prod(src.res.type.get_shape()), math.prod(dst.res.type.get_shape())
        if first < 0 or first + n_src > n_dst:
            continue
        inside[src] = (dst, first * krnl.elem_bytes(src.res.type))
        _erase_nest(nest, block, position)
    return inside


def plan_buffers(module, slabs: bool = True) -> dict:
    f = main_func(module)
    block = f.body.block
    inside = _slabs(block) if slabs else {}
    order = {op: k for k, op in enumerate(block.ops)}
    allocs = [op for op in block.ops if isinstance(op, krnl.AllocOp)]
    naive = sum(_nbytes(a.res.type) for a in allocs)

    def root(a):
        shift = 0
        while a in inside:
            a, by = inside[a]
            shift += by
        return a, shift

    # A chain's buffers are planned as their root: live from the first alloc to the last use
    span = {}
    for a in allocs:
        r, _ = root(a)
        lo, hi = span.get(r, (math.inf, -1))
        span[r] = (min(lo, order[a]), max(hi, _last_use(a.res, block, order)))
    intervals = [(span[a][0], span[a][1], _nbytes(a.res.type), a)
                 for a in allocs if a not in inside]
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
    for a in inside:
        r, shift = root(a)
        a.attributes["offset"] = onnx_d.to_mlir_attr(r.offset.value.data + shift)
    f.attributes["arena_bytes"] = onnx_d.to_mlir_attr(total)
    f.attributes["naive_bytes"] = onnx_d.to_mlir_attr(naive)
    return {"arena_bytes": total, "naive_bytes": naive}


@dataclass(frozen=True)
class PlanBuffersPass(ModulePass):
    """`plan-buffers`: arena offsets for every krnl.alloc (see the module docstring)."""

    name = "plan-buffers"
    slabs: bool = True

    def apply(self, ctx, op) -> None:
        plan_buffers(op, slabs=self.slabs)
