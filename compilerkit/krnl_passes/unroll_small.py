"""-O2/-O3 schedule: fully unroll the short innermost loops of every loop nest (a 3x3 pooling
window, a 3-tap im2col row), written into Kernel IR as `krnl.unroll`.

LLVM's own loop unroller is switched off in the host pipeline: it fully unrolled every short
constant-trip nest of the model (a bias fill over 6x28x28 became 1000 stores), which cost most of
-O3's compile time. Unrolling here is explicit in the IR, bounded, and only where it pays: the
innermost loops, whose trip counts multiply to at most MAX_BODY copies of the body.
Assumes loops that are not blocked (blocked loops are left alone).

One short loop stays rolled: the innermost one when it walks memory with unit stride, has at
least VECTOR_TRIP iterations, and the loop around it walks memory with a stride (`_strides`).
Unrolled, it would leave LLVM's vectoriser the strided loop, vectorised with gathers and
scatters; rolled, its own loop becomes one contiguous vector. Winograd's transforms over 8
channels (channels innermost, positions around them) ran 1.5-3.3x faster rolled (2-D F(4,3)
8 channels at 112x112: 0.98 -> 0.48 ms; 3-D at 24^3: 2.09 -> 0.63 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.options import UNROLL_CAP, check_int
from compilerkit.krnl_passes.schedule import unroll

MAX_TRIP = 8
MAX_BODY = 16
VECTOR_TRIP = 4  # the fewest f32 lanes of a vector (SSE, NEON, s390x's VX)


def _coefficient(value, iv, depth: int = 0):
    """The integer c with value = c * iv + (terms without iv), or None where the index
    arithmetic is not linear in iv (or too deep to follow)."""
    if value is iv:
        return 1
    op = getattr(value, "owner", None)
    if not isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        # a constant, another loop's variable, a load: iv does not reach it through arith
        return 0 if not _depends(value, iv, depth) else None
    if depth > 32:
        return None
    a, b = (_coefficient(x, iv, depth + 1) for x in op.operands)
    if a is None or b is None:
        return None
    if isinstance(op, arith.AddiOp):
        return a + b
    if isinstance(op, arith.SubiOp):
        return a - b
    if not a and not b:
        return 0
    if a and b:
        return None  # iv * iv
    const = _constant(op.operands[1] if a else op.operands[0])
    return None if const is None else (a or b) * const


def _constant(value):
    op = getattr(value, "owner", None)
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _depends(value, iv, depth: int) -> bool:
    """Whether iv reaches `value` through the ops that compute it."""
    if value is iv:
        return True
    op = getattr(value, "owner", None)
    if not isinstance(op, Operation) or depth > 32:
        return False
    return any(_depends(x, iv, depth + 1) for x in op.operands)


def _strides(body, iv) -> set:
    """How the loads and stores of `body` walk memory as `iv` steps: "unit" (the last
    subscript moves by one, the others stay), "strided" (any other move, or one not known),
    no entry for accesses iv does not move."""
    found = set()
    for op in body.walk():
        if isinstance(op, krnl.LoadOp | krnl.StoreOp):
            coefs = [_coefficient(x, iv) for x in op.indices]
            if all(c == 0 for c in coefs):
                continue
            found.add("unit" if coefs[-1] == 1 and not any(coefs[:-1]) else "strided")
    return found


def _keep_rolled(it, pos: int, trip: int) -> bool:
    """The innermost loop at `pos` is contiguous and the loop around it strided (the module
    docstring says why that loop stays rolled)."""
    if trip < VECTOR_TRIP or pos == 0 or pos != len(it.emitted) - 1:
        return False
    original = list(it.original)
    outer = it.emitted[pos - 1]
    if outer not in original:
        return False
    args = it.body.block.args
    inner_iv, outer_iv = args[original.index(it.emitted[pos])], args[original.index(outer)]
    return (_strides(it.body, inner_iv) == {"unit"}
            and "strided" in _strides(it.body, outer_iv))


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
            if trip > max_trip or body * trip > max_body or _keep_rolled(it, pos, trip):
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

    def __post_init__(self):
        # a fully unrolled loop is trip copies of its body: both stay small
        check_int(self.name, "max_trip", self.max_trip, 0, UNROLL_CAP)
        check_int(self.name, "max_body", self.max_body, 0, UNROLL_CAP * 16)

    def apply(self, ctx, op) -> None:
        unroll_small(op, self.max_trip, self.max_body)
