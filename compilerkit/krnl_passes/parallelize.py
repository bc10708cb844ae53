"""-O2/-O3 schedule: run the outer loop of each loop nest on a thread pool, written into Kernel IR
as `krnl.parallel` (onnx-mlir's op of that name; its codegen there is OpenMP, here libgomp's
GOMP_parallel, see codegen/emit.py).

For every loop nest, outermost first: pick a loop whose iterations write disjoint memory
(`krnl.parallel_conflict`: output channels, batch, the row or column tiles of a matmul's C, the
outer loop of an elementwise nest; never a reduction into one accumulator), move it to the
front of the nest when it is not there yet (a `krnl.permute`: a loop with independent
iterations can run at any depth without changing any element's arithmetic) and mark it. A nest
whose outer loops share memory (Conv's batch x group loop around its im2col scratch) stays
serial, and the nests inside it are tried instead, once per outer iteration.

A matmul nest (tile-matmul's tiles are large, so a small product is one tile) none of whose
safe loops has SPLIT_BELOW iterations gets its row tile cut to about M / SPLIT_BLOCKS rows (a
multiple of the micro-kernel's ROW_BLOCK rows, at least MIN_ROWS): threads then take row
blocks, as MLAS splits a GEMM among threads. Every element still sums its k terms in the same
order, so the answer is unchanged; the cost is one more packing of B per row block (measured
about 4% of MobileNetV2's 1-thread time with 8 blocks, on a busy machine; hence 4).

Only where it pays: the nest must do at least MIN_WORK innermost iterations (starting threads
costs a few microseconds) and the loop must have at least 2 iterations. Among the safe loops
the outermost one with at least GOOD_TRIP iterations wins (enough chunks for a few threads with
little imbalance); failing that, the one with the most. The innermost element loop is moved out
only when nothing else can run in parallel (every access would become strided). Assumes
tile-matmul and unroll-small ran before (this pass only reads their loops); unrolled loops are
never picked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.options import LIMIT, check_int
from compilerkit.krnl_passes.schedule import permute

MIN_WORK = 1 << 15
GOOD_TRIP = 8
SPLIT_BELOW = 4
SPLIT_BLOCKS = 4
ROW_BLOCK = 6  # rows of the micro-kernel's register block (codegen/microkernel.py MR)
MIN_ROWS = 2 * ROW_BLOCK  # fewer rows are not worth a packed B panel (microkernel.py)


def trip_count(it: krnl.IterateOp, pos: int) -> int:
    """Iterations of the emitted loop at `pos` (an inner tile loop: its tile)."""
    h = it.emitted[pos]
    kind, tile = "full", 1
    if isinstance(h.owner, krnl.BlockOp):
        kind = "outer" if h is h.owner.outer else "inner"
        tile = h.owner.tile.value.data
        h = h.owner.loop
    lo, hi = it.bound_list()[list(it.original).index(h)]
    if kind == "inner":
        return min(tile, hi - lo)
    return math.ceil((hi - lo) / tile)


def work(it: krnl.IterateOp) -> int:
    """Innermost iterations of the nest and the nests inside it (the original loops' trip
    counts multiplied: a matmul nest's M x N x K)."""
    inner = max((work(x) for x in it.body.walk() if isinstance(x, krnl.IterateOp)
                 and x is not it and x.parent_op() is it), default=1)
    return math.prod(hi - lo for lo, hi in it.bound_list()) * inner


def _candidates(it: krnl.IterateOp) -> list[int]:
    unrolled = {u.operation.loop for h in it.emitted for u in h.uses
                if isinstance(u.operation, krnl.UnrollOp)}
    out = []
    for pos, h in enumerate(it.emitted):
        if h in unrolled or (isinstance(h.owner, krnl.BlockOp) and h is h.owner.inner):
            continue
        if trip_count(it, pos) >= 2 and krnl.parallel_conflict(it, pos) is None:
            out.append(pos)
    return out


def choose(it: krnl.IterateOp) -> int | None:
    """The emitted position of the loop to run in parallel, or None (see the docstring)."""
    candidates = _candidates(it)
    if not candidates:
        return None
    last = len(it.emitted) - 1
    if len(candidates) > 1 and candidates[-1] == last and it.emitted[last] in it.original:
        candidates.pop()  # the innermost element loop moved out: every access strided
    good = [p for p in candidates if trip_count(it, p) >= GOOD_TRIP]
    return good[0] if good else max(candidates, key=lambda p: trip_count(it, p))


def split_rows(it: krnl.IterateOp) -> bool:
    """Cut the row tile of a matmul nest into about SPLIT_BLOCKS row blocks (see the module
    docstring); returns whether it did."""
    ops = list(it.body.block.ops)
    if len(ops) != 1 or not isinstance(ops[0], krnl.MatMulOp):
        return False
    mm = ops[0]
    rows = it.original[0]
    blocks = [h.owner for h in it.emitted if isinstance(h.owner, krnl.BlockOp)
              and h is h.owner.outer and h.owner.loop is rows]
    m = krnl.ints_of(mm.sizes)[0]
    per = -(-m // SPLIT_BLOCKS)  # rows per block for SPLIT_BLOCKS blocks, rounded up
    tm = max(MIN_ROWS, -(-per // ROW_BLOCK) * ROW_BLOCK)
    if len(blocks) != 1 or mm.i is not it.body.block.args[0] or -(-m // tm) < 2:
        return False
    if tm >= blocks[0].tile.value.data:
        return False
    blocks[0].attributes["tile"] = IntegerAttr(tm, i64)
    tile = krnl.ints_of(mm.tile)
    mm.attributes["tile"] = ArrayAttr([IntegerAttr(t, i64) for t in [tm, *tile[1:]]])
    return True


def _nests(block):
    for op in block.ops:
        if isinstance(op, krnl.IterateOp):
            yield op
        else:
            for region in op.regions:
                for blk in region.blocks:
                    yield from _nests(blk)


def _parallelize(block, min_work: int) -> int:
    count = 0
    for it in list(_nests(block)):
        if krnl.parallel_loop(it) is not None:
            continue
        if work(it) >= min_work and max(map(partial(trip_count, it), _candidates(it)),
                                        default=0) < SPLIT_BELOW:
            split_rows(it)
        pos = choose(it) if work(it) >= min_work else None
        if pos is not None:
            if pos:
                order = [pos] + [k for k in range(len(it.emitted)) if k != pos]
                permute(it, order)
            it.parent_block().insert_op_before(krnl.ParallelOp(it.emitted[0]), it)
            count += 1
        elif work(it) >= min_work:
            count += _parallelize(it.body.block, min_work)
    return count


def parallelize(module, min_work: int = MIN_WORK) -> int:
    """Mark one loop per profitable nest parallel (see the module docstring); returns how
    many were marked."""
    count = 0
    for op in module.walk():
        if op.name == "func.func":
            count += _parallelize(op.body.block, min_work)
    return count


@dataclass(frozen=True)
class ParallelizePass(ModulePass):
    """`parallelize{min_work=32768}`: mark the outer loop of each nest parallel where safe."""

    name = "parallelize"
    min_work: int = MIN_WORK

    def __post_init__(self):
        check_int(self.name, "min_work", self.min_work, 0, LIMIT)

    def apply(self, ctx, op) -> None:
        parallelize(op, self.min_work)
