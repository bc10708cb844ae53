"""-O3 schedule for matrix products: tile and permute every (i, j, k) nest around a
`krnl.matmul` and let the op work on whole tiles.

Before: iterate (i, j, k) { krnl.matmul tile [1, 1, 1] }  -- one multiply-add per iteration.
After:  block i by TM, j by TN, k by TK; permute to (j_o, k_o, i_o) (GotoBLAS order: a TK x TN
panel of B stays in cache while all row blocks of A pass over it); the inner tile loops are not
emitted and the matmul gets tile [TM, TN, TK] and `simd` lanes, which codegen turns into a
4-row x 2-vector register-blocked micro-kernel. Conv (im2col), MatMul and Gemm all go through
this, since their lowerings emit the same nest.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.schedule import block, drop, permute

TILE = (64, 128, 256)


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


def tile_matmul(module, simd: int = 8, tile=TILE) -> int:
    count = 0
    for it, mm in list(_matmul_nests(module)):
        if krnl.ints_of(mm.tile) != [1, 1, 1] or len(it.emitted) != 3:
            continue
        m, n, k = krnl.ints_of(mm.sizes)
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

    def apply(self, ctx, op) -> None:
        tile_matmul(op, simd=self.simd)
