"""-O2/-O3 schedule: fully unroll the short innermost loops of every loop nest (a 3x3 pooling
window, a 3-tap im2col row), written into Kernel IR as `krnl.unroll`.

LLVM's own loop unroller is switched off in the host pipeline: it fully unrolled every short
constant-trip nest of the model (a bias fill over 6x28x28 became 1000 stores), which cost most of
-O3's compile time. Unrolling here is explicit in the IR, bounded, and only where it pays: the
innermost loops, whose trip counts multiply to at most MAX_BODY copies of the body.
Assumes loops that are not blocked (blocked loops are left alone).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.schedule import unroll

MAX_TRIP = 8
MAX_BODY = 16


def _innermost(op):
    for region in op.regions:
        for blk in region.blocks:
            for inner in blk.ops:
                if isinstance(inner, krnl.IterateOp):
                    nested = (x for x in inner.walk() if x is not inner)
                    if not any(isinstance(x, krnl.IterateOp) for x in nested):
                        yield inner
                    else:
                        yield from _innermost(inner)
                else:
                    yield from _innermost(inner)


def unroll_small(module, max_trip: int = MAX_TRIP, max_body: int = MAX_BODY) -> int:
    """Mark short innermost loops for unrolling; returns how many loops were marked."""
    count = 0
    for it in list(_innermost(module)):
        if any(isinstance(x, krnl.MatMulOp) for x in it.body.block.ops):
            continue  # the matmul nest has its own schedule
        original = list(it.original)
        bounds = it.bound_list()
        body = 1
        for pos in reversed(range(len(it.emitted))):
            h = it.emitted[pos]
            if h not in original:
                break  # a blocked loop
            lo, hi = bounds[original.index(h)]
            trip = hi - lo
            if trip > max_trip or body * trip > max_body:
                break
            body *= trip
            unroll(it, pos)
            count += 1
    return count


@dataclass(frozen=True)
class UnrollSmallPass(ModulePass):
    """`unroll-small{max_trip=8 max_body=16}`: unroll short innermost loops."""

    name = "unroll-small"
    max_trip: int = MAX_TRIP
    max_body: int = MAX_BODY

    def apply(self, ctx, op) -> None:
        unroll_small(op, self.max_trip, self.max_body)
