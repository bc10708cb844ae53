"""`guard-indices`: a run-time check on every load and store index the verifier cannot bound.

The verifier (krnl.py, krnl_ranges.py) refuses an index whose range, known from the loops,
leaves its buffer. An index computed from data (a value loaded from a tensor and used as an
index without a clamp, as hand-edited Kernel IR may do) has no known range; here it gets, in
front of its krnl.load / krnl.store,

    %ok = 0 <= %i < size          "krnl.check"(%ok) {message = "node 'n': krnl.load of ..."}
    %safe = min(max(%i, 0), size - 1)

and the access uses %safe: when the check fails the call reports `RunError` naming the op and
the buffer (codegen/emit.py: the status word), and the code carried on inside the buffer, so
nothing is read or written outside it. A nest that gets a check runs serially (its
krnl.parallel, and those of the nests around it, are dropped): which failure a run reports must
not depend on the thread count (krnl.parallel_conflict). Lowering clamps its own data-dependent
indices (Gather), so a model's normal compile gets nothing from this pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.dialects.krnl_ranges import _buffer, _node, unproven_dims


def unguarded(module) -> list:
    """The krnl.load / krnl.store ops of `module` with an index the verifier cannot bound."""
    memo: dict = {}
    return [op for op in module.walk() if isinstance(op, (krnl.LoadOp, krnl.StoreOp))
            and unproven_dims(op, memo)]


def guard_indices(module) -> int:
    """Check and clamp every unbounded index of `module` (see the module docstring); returns
    how many accesses were guarded."""
    ops = unguarded(module)
    memo: dict = {}
    for op in ops:
        dims = op.memref.type.get_shape()
        new = []
        indices = list(op.indices)
        cond = None
        for d in unproven_dims(op, memo):
            ix, size = indices[d], dims[d]
            zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
            top = arith.ConstantOp(IntegerAttr(size, IndexType()))
            last = arith.ConstantOp(IntegerAttr(max(size - 1, 0), IndexType()))
            lo = arith.CmpiOp(ix, zero, "sge")
            hi = arith.CmpiOp(ix, top, "slt")
            both = arith.AndIOp(lo, hi)
            new += [zero, top, last, lo, hi, both]
            if cond is not None:
                both = arith.AndIOp(cond, both)
                new.append(both)
            cond = both
            low = arith.MaxSIOp(ix, zero)
            safe = arith.MinSIOp(low, last)
            new += [low, safe]
            indices[d] = safe.result
        node = _node(op).strip(" ()") or "a nest with no node"
        message = (f"{node}: {op.name} {'to' if isinstance(op, krnl.StoreOp) else 'of'} "
                   f"{_buffer(op.memref)}: an index computed from data is out of range")
        new.append(krnl.CheckOp(cond.result, message))
        op.parent_block().insert_ops_before(new, op)
        first = len(op.operands) - len(indices)  # the value (a store's) and the memref
        op.operands = [*op.operands[:first], *indices]
        _serial_around(op)
    return len(ops)


def _serial_around(op) -> None:
    """Drop the krnl.parallel of every nest around `op` (a checked nest runs serially)."""
    p = op.parent_op()
    while p is not None:
        if isinstance(p, krnl.IterateOp):
            par = krnl.parallel_loop(p)
            if par is not None:
                par.detach()
                par.erase()
        p = p.parent_op()


@dataclass(frozen=True)
class GuardIndicesPass(ModulePass):
    """`guard-indices`: check at run time every index the verifier cannot bound."""

    name = "guard-indices"

    def apply(self, ctx, op) -> None:
        guard_indices(op)
