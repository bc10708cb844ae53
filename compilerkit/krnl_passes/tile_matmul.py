"""-O3 schedule for matrix products: tile and permute every (i, j, k) nest around a
`krnl.matmul` and let the op work on whole tiles.

Before: iterate (i, j, k) { krnl.matmul tile [1, 1, 1] }  -- one multiply-add per iteration.
After:  block i by TM, j by TN, k by TK; permute to (j_o, k_o, i_o) (GotoBLAS order: a TK x TN
panel of B stays in cache while all row blocks of A pass over it); the inner tile loops are not
emitted and the matmul gets tile [TM, TN, TK] and `simd` lanes, which codegen turns into the
shared micro-kernel (microkernel.py: B panel packed on the stack, 6-row x 2-vector register
blocks). Conv (im2col), MatMul and Gemm all go through this, since their lowerings emit the
same nest.

Tile sizes follow the shape (`tile_sizes`), as MLAS's strides do: TK = 256 (UNIT_TK = 128
when A's rows are one element apart) and TN = 128 (a 128 KiB f32 panel of B, in L2), TN
widened up to PANEL / TK columns when K is short (a short panel is cheap to keep, and more
columns reuse each row of A more) or to all of N when the whole K x N panel fits (a Conv's
168-column output panel is one tile, not 128 + 40); TM covers up to 480 rows of A, so each
panel is packed once per 480 rows. Each is clamped to its dimension. A narrow B (N <= 16)
takes all of K (long runs of A's rows stream better); a single row (M = 1) takes all of K
and up to 4096 columns: the kernel then streams B's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.options import LIMIT, check_int, check_simd
from compilerkit.krnl_passes.schedule import block, drop, permute

TILE = (480, 128, 256)  # (TM, TN, TK) for large matrices
PANEL = 32768  # elements of B one tile may hold: microkernel.PANEL
# TK when A's rows are one element apart (krnl.matmul strides[0] == 1: the tap schedule and
# the transposed GEMMs, A column-major): each k of a register block reads its own line of A,
# so a chunk's A lines (TK of them) share L1 with its TK x 32 strip of B; 256 filled it.
UNIT_TK = 128


def tile_sizes(m: int, n: int, k: int, tile=TILE, unit_rows: bool = False
               ) -> tuple[int, int, int]:
    """(TM, TN, TK) for an M x N x K product (see the module docstring); `unit_rows`: A's
    rows are one element apart (UNIT_TK)."""
    tm, tn, tk = tile
    if m == 1:
        # One row (x @ W): the kernel streams B row by row into a C row kept in L1.
        return 1, min(n, 4096), k
    if unit_rows:
        tk = min(tk, UNIT_TK)
    tk = min(tk, k) if n > 16 else k  # narrow B: long runs of A's rows stream better
    tn = max(tn, min(4 * tn, PANEL // tk // 16 * 16))  # short K: a wider panel
    if n * tk <= PANEL:
        tn = n  # all columns fit one panel: no second pass over A, no extra narrow strip
    return min(tm, m), min(tn, n), tk


def matmul_nests(op):
    """(krnl.iterate, krnl.matmul) for every loop nest whose body is one krnl.matmul."""
    return list(_matmul_nests(op))


def _matmul_nests(op):
    for region in op.regions:
        for blk in region.blocks:
            for inner in blk.ops:
                if isinstance(inner, krnl.IterateOp):
                    ops = list(inner.body.block.ops)
                    if len(ops) == 1 and isinstance(ops[0], krnl.MatMulOp):
                        yield inner, ops[0]
                    else:
                        yield from _matmul_nests(inner)
                else:
                    yield from _matmul_nests(inner)


def tile_matmul(module, simd: int = 8, tile=None) -> int:
    """Schedules every untiled matmul nest under `module`; returns how many. `tile` (TM, TN,
    TK), when given, is used as it is (clamped to the sizes) instead of `tile_sizes`."""
    check_simd("tile-matmul", simd)
    if tile is not None:
        tile = [check_int("tile-matmul", "tile", t, 1, LIMIT) for t in tile]
    count = 0
    for it, mm in list(_matmul_nests(module)):
        if krnl.ints_of(mm.tile) != [1, 1, 1] or len(it.emitted) != 3:
            continue
        m, n, k = krnl.ints_of(mm.sizes)
        if tile is None:
            tm, tn, tk = tile_sizes(m, n, k, unit_rows=krnl.ints_of(mm.strides)[0] == 1)
        else:
            tm, tn, tk = min(tile[0], m), min(tile[1], n), min(tile[2], k)
        block(it, 2, tk)   # emitted: i, j, k_o, k_i
        block(it, 1, tn)   # i, j_o, j_i, k_o, k_i
        block(it, 0, tm)   # i_o, i_i, j_o, j_i, k_o, k_i
        permute(it, [2, 4, 0, 1, 3, 5])  # j_o, k_o, i_o, i_i, j_i, k_i
        drop(it, [3, 4, 5])
        mm.attributes["tile"] = ArrayAttr([IntegerAttr(t, i64) for t in (tm, tn, tk)])
        mm.attributes["simd"] = IntegerAttr(simd, i64)
        count += 1
    return count


@dataclass(frozen=True)
class TileMatmulPass(ModulePass):
    """`tile-matmul{simd=8}`: the -O3 matmul schedule; `simd` is the target's f32 lanes."""

    name = "tile-matmul"
    simd: int = 8

    def __post_init__(self):
        check_simd(self.name, self.simd)

    def apply(self, ctx, op) -> None:
        tile_matmul(op, simd=self.simd)
