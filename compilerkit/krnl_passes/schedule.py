"""Schedule transformations on one `krnl.iterate`, written into the IR as krnl.block,
krnl.permute and krnl.unroll ops (so the printed Kernel IR shows the schedule).

`block(it, pos, tile)` splits the emitted loop at position `pos` into an outer loop stepping by
`tile` and an inner loop walking the tile (placed right after it); `permute(it, order)` emits
the loops in `order` (a list of current positions); `unroll(it, pos)` marks a loop to be fully
unrolled; `parallel(it)` runs the outermost emitted loop on threads (krnl.parallel; the verifier
checks it is safe). Assumes loops are blocked at most once; an inner loop must stay inside its
outer one. A hand schedule replaces the nest's schedule: block, permute and drop remove a
krnl.parallel mark the nest had (the `parallelize` pass put it on the old outermost loop);
call `parallel(it)` again to keep the nest threaded.
"""

from __future__ import annotations

from compilerkit.dialects import krnl


def _insert_before(it, op):
    it.parent_block().insert_op_before(op, it)


def _unmark_parallel(it):
    mark = krnl.parallel_loop(it)
    if mark is not None:
        mark.detach()
        mark.erase()


def parallel(it: krnl.IterateOp) -> krnl.IterateOp:
    """Run the outermost emitted loop of `it` on the thread pool (`krnl.parallel`, last before
    the nest, as onnx-mlir places it)."""
    if krnl.parallel_loop(it) is None:
        _insert_before(it, krnl.ParallelOp(it.emitted[0]))
    return it


def block(it: krnl.IterateOp, pos: int, tile: int) -> krnl.IterateOp:
    _unmark_parallel(it)
    emitted = list(it.emitted)
    op = krnl.BlockOp(emitted[pos], tile)
    _insert_before(it, op)
    emitted[pos:pos + 1] = [op.outer, op.inner]
    it.operands = list(it.original) + emitted
    return it


def permute(it: krnl.IterateOp, order: list[int]) -> krnl.IterateOp:
    emitted = list(it.emitted)
    if sorted(order) != list(range(len(emitted))):
        raise ValueError(f"permute order {order} is not a permutation of {len(emitted)} loops")
    _unmark_parallel(it)
    new = [emitted[k] for k in order]
    depth = [order.index(k) for k in range(len(emitted))]
    _insert_before(it, krnl.PermuteOp(emitted, depth))
    _check_nesting(new)
    it.operands = list(it.original) + new
    return it


def drop(it: krnl.IterateOp, positions: list[int]) -> krnl.IterateOp:
    """Stop emitting the loops at `positions` (inner tile loops a micro-kernel walks itself)."""
    _unmark_parallel(it)
    emitted = [h for k, h in enumerate(it.emitted) if k not in positions]
    it.operands = list(it.original) + emitted
    return it


def unroll(it: krnl.IterateOp, pos: int) -> krnl.IterateOp:
    _insert_before(it, krnl.UnrollOp(it.emitted[pos]))
    return it


def _check_nesting(loops):
    for k, h in enumerate(loops):
        op = h.owner
        if isinstance(op, krnl.BlockOp) and h is op.inner and op.outer not in loops[:k]:
            raise ValueError("an inner tile loop must be nested inside its outer loop")
