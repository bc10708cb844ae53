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
safe loops has SPLIT_BELOW iterations gets its column tile cut to N / SPLIT_BLOCKS columns,
rounded down to whole strips of the micro-kernel's 2 vectors (`split_cols`): threads take column
blocks, each packing only its own columns of B. Where N is a single strip, the row tile is
cut instead to about M / SPLIT_BLOCKS rows (a multiple of the micro-kernel's register rows,
krnl.matmul_block_rows, at least MIN_BLOCKS blocks of them, `split_rows`), as MLAS splits a
GEMM among threads; its cost is one more packing of B per row block (measured about 4% of
MobileNetV2's 1-thread time with 8 blocks, on a busy machine; hence 4). Every element still
sums its k terms in the same order, so the answer is unchanged.

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

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.options import LIMIT, check_int
from compilerkit.krnl_passes.schedule import permute

MIN_WORK = 1 << 15
GOOD_TRIP = 8
SPLIT_BELOW = 4
SPLIT_BLOCKS = 4
MIN_BLOCKS = 2  # row blocks of a split: fewer rows are not worth a packed B panel


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


def work(it: krnl.IterateOp, memo: dict | None = None) -> int:
    """Innermost iterations of the nest and the nests inside it (the original loops' trip
    counts multiplied: a matmul nest's M x N x K). `memo` ({nest: work}) keeps them across the
    calls of one pass, which asks again for each nest inside a serial one."""
    if memo is not None and it in memo:
        return memo[it]
    inner = max((work(x, memo) for x in it.body.block.ops if isinstance(x, krnl.IterateOp)),
                default=1)
    w = math.prod(hi - lo for lo, hi in it.bound_list()) * inner
    if memo is not None:
        memo[it] = w
    return w


class _Safety:
    """Whether the emitted loop at a position of nest `it` may run in parallel
    (krnl.parallel_conflict), decided once per loop, from one walk of the nest
    (krnl.nest_accesses) made on first use: the pass asks about one nest's loops several
    times, and parallel_conflict on its own walks the whole nest for each answer."""

    def __init__(self, it: krnl.IterateOp):
        self.it, self.accesses, self.known = it, None, {}

    def __call__(self, pos: int) -> bool:
        if pos not in self.known:
            if self.accesses is None:
                self.accesses = krnl.nest_accesses(self.it)
            self.known[pos] = krnl.parallel_conflict(self.it, pos, self.accesses) is None
        return self.known[pos]

    def forget(self) -> None:
        """After the nest's tiles changed (split_rows): the answers may change too."""
        self.known = {}


def _loops(it: krnl.IterateOp) -> list[tuple[int, int]]:
    """[(emitted position, trip count)] of the loops that could run in parallel if their
    iterations are independent: not unrolled, not an inner tile loop, 2 iterations or more."""
    unrolled = {u.operation.loop for h in it.emitted for u in h.uses
                if isinstance(u.operation, krnl.UnrollOp)}
    out = []
    for pos, h in enumerate(it.emitted):
        if h in unrolled or (isinstance(h.owner, krnl.BlockOp) and h is h.owner.inner):
            continue
        trips = trip_count(it, pos)
        if trips >= 2:
            out.append((pos, trips))
    return out


def choose(it: krnl.IterateOp, safe: _Safety | None = None) -> int | None:
    """The emitted position of the loop to run in parallel, or None (the module docstring):
    among the safe loops ("candidates"), the outermost one with GOOD_TRIP iterations, else the
    one with the most; the innermost element loop only when it is the one candidate. A loop's
    safety is decided only when the rule needs it: the outermost safe loop with GOOD_TRIP
    iterations settles it (unless it is that innermost loop) without looking at the rest."""
    safe = _Safety(it) if safe is None else safe
    loops = _loops(it)
    last = len(it.emitted) - 1
    innermost = it.emitted[last] in it.original if it.emitted else False
    for pos, trips in loops:
        if trips >= GOOD_TRIP and safe(pos) and not (pos == last and innermost):
            return pos
    trip = dict(loops)
    candidates = [pos for pos, _ in loops if safe(pos)]
    if not candidates:
        return None
    if len(candidates) > 1 and candidates[-1] == last and innermost:
        candidates.pop()  # the innermost element loop moved out: every access strided
    good = [p for p in candidates if trip[p] >= GOOD_TRIP]
    return good[0] if good else max(candidates, key=trip.__getitem__)


def _one_matmul(it: krnl.IterateOp) -> bool:
    """Whether the nest's body is one krnl.matmul (the nests split_rows may cut)."""
    ops = list(it.body.block.ops)
    return len(ops) == 1 and isinstance(ops[0], krnl.MatMulOp)


def _blocked_matmul(it: krnl.IterateOp, axis: int):
    """(the nest's krnl.matmul, the krnl.block of its rows (axis 0) or columns (axis 1)) where
    the nest's body is that one matmul, the loop is blocked once and gives the matmul's i or
    j; else None."""
    ops = list(it.body.block.ops)
    if len(ops) != 1 or not isinstance(ops[0], krnl.MatMulOp) or len(it.original) <= axis:
        return None
    mm, loop = ops[0], it.original[axis]
    blocks = [h.owner for h in it.emitted if isinstance(h.owner, krnl.BlockOp)
              and h is h.owner.outer and h.owner.loop is loop]
    if len(blocks) != 1 or (mm.i, mm.j)[axis] is not it.body.block.args[axis]:
        return None
    return mm, blocks[0]


def _retile(mm, block, axis: int, size: int) -> bool:
    """The block's tile and the matmul's tile on `axis` set to `size`, if smaller."""
    if size >= block.tile.value.data:
        return False
    block.attributes["tile"] = IntegerAttr(size, i64)
    tile = krnl.ints_of(mm.tile)
    tile[axis] = size
    mm.attributes["tile"] = ArrayAttr([IntegerAttr(t, i64) for t in tile])
    return True


def split_cols(it: krnl.IterateOp) -> bool:
    """Cut the column tile of a matmul nest into SPLIT_BLOCKS or more column blocks, each a
    whole number of the micro-kernel's column strips (2 vectors); returns whether it did
    (not where the columns are fewer than 2 strips: then `split_rows`). Threads then take
    column blocks: each packs only its own columns of B, where row blocks each pack all of
    B (the micro-kernel reads A's rows afresh for every strip of columns either way). 30
    chained 1x1 Convs 32 -> 32 channels at 32 x 32 (N 1024, one tile), best us per Conv, row
    blocks -> column blocks: 2 threads 16.6 -> 15.1 (chunks from both ends, codegen's
    `_take_chunk`: 12.8), 1 thread 15.3 -> 17.3 (more, narrower tiles); in the models, 1
    thread as fast or faster (ResNet-50 73.2 -> 69.8 ms, SqueezeNet 7.13 -> 6.89, best of
    30, with the other changes of that commit)."""
    found = _blocked_matmul(it, 1)
    if found is None:
        return False
    mm, block = found
    m, n = krnl.ints_of(mm.sizes)[:2]
    if m == 1:
        # a row times B (x @ W): the micro-kernel streams B's rows whole (tile_matmul), and
        # column blocks made it read pieces of them: [1, 1280] x [1280, 1000], 1 thread 0.23
        # -> 0.31 ms, 2 threads no faster than 1
        return False
    size = mm.c.type.element_type.bitwidth // 8
    strip = 2 * (mm.simd.value.data if size == 4 else max(1, mm.simd.value.data // 2))
    # whole strips, at least SPLIT_BLOCKS blocks where there are that many strips (N 169:
    # blocks of 32, 6 of them, not 64 x 3: two threads then share them evenly)
    tn = max(strip, n // SPLIT_BLOCKS // strip * strip)
    return -(-n // tn) >= 2 and _retile(mm, block, 1, tn)


def split_rows(it: krnl.IterateOp) -> bool:
    """Cut the row tile of a matmul nest into about SPLIT_BLOCKS row blocks (see the module
    docstring); returns whether it did."""
    found = _blocked_matmul(it, 0)
    if found is None:
        return False
    mm, block = found
    m = krnl.ints_of(mm.sizes)[0]
    # the micro-kernel's register rows for this matmul (8 with AVX-512's vectors, else 6)
    rows = krnl.matmul_block_rows(mm.simd.value.data,
                                  mm.c.type.element_type.bitwidth // 8)
    per = -(-m // SPLIT_BLOCKS)  # rows per block for SPLIT_BLOCKS blocks, rounded up
    tm = max(MIN_BLOCKS * rows, -(-per // rows) * rows)
    return -(-m // tm) >= 2 and _retile(mm, block, 0, tm)


def _nests(block):
    for op in block.ops:
        if isinstance(op, krnl.IterateOp):
            yield op
        else:
            for region in op.regions:
                for blk in region.blocks:
                    yield from _nests(blk)


def _parallelize(block, min_work: int, works: dict) -> int:
    count = 0
    for it in list(_nests(block)):
        if krnl.parallel_loop(it) is not None or work(it, works) < min_work:
            continue
        safe = _Safety(it)
        if _one_matmul(it) and not any(trips >= SPLIT_BELOW and safe(pos)
                                       for pos, trips in _loops(it)):
            if split_cols(it) or split_rows(it):
                safe.forget()
        pos = choose(it, safe)
        if pos is not None:
            if pos:
                order = [pos] + [k for k in range(len(it.emitted)) if k != pos]
                permute(it, order)
            it.parent_block().insert_op_before(krnl.ParallelOp(it.emitted[0]), it)
            count += 1
        else:
            count += _parallelize(it.body.block, min_work, works)
    return count


def parallelize(module, min_work: int = MIN_WORK) -> int:
    """Mark one loop per profitable nest parallel (see the module docstring); returns how
    many were marked."""
    count = 0
    for op in module.walk():
        if op.name == "func.func":
            count += _parallelize(op.body.block, min_work, {})
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
