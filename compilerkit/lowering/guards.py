"""Run-time guards of conditional regions.

The frontend unrolls control flow (frontend/control_flow.py): an If whose condition is computed
at run time has both branches computed and its outputs selected by Where, and the iterations
of a while loop past its end run with their results discarded. Those computations read safe
values (every guard already carries on with one), but their run-time checks must not report:
`If(i < n) then Gather(x, i)` with i = n is a correct model. The frontend tags the ops of such
a region with `onnx_guards` (the keys of the conditions it runs under, "!k" where it runs
while k is false) and a Where selecting by each condition with `onnx_guard = k` (its operand 0
is the condition, a bool scalar). After lowering, every `krnl.check` and integer division
(arith.divsi / arith.remsi, which codegen guards against zero and overflow) in a tagged op's
nests gets

    %taken = krnl.load %cond[]            (negated for "!k"; several keys: and-ed)
    krnl.check (%ok or not %taken)         the check passes when the region is not taken
    arith.divsi %x, (select %taken, %y, 1) the division cannot fault there either

so an untaken branch computes values nobody reads and reports nothing; a taken one checks as
before. The condition's buffer is defined before the region (the frontend computes it first),
so a load of it inside the region's nests is in scope.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, i1

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import UnsupportedOpError

GUARDS, GUARD = "onnx_guards", "onnx_guard"  # frontend/control_flow.py writes them
_GUARDED = (krnl.CheckOp, arith.DivSIOp, arith.RemSIOp)


class RegionGuards:
    """Collects the guarded ops while a function is lowered; `apply` rewrites them at the
    end, when every condition's buffer is known."""

    def __init__(self):
        self.pending: list = []  # (keys, ops)
        self.conditions: dict = {}  # key -> the condition's memref

    def lowered(self, op, ins, block, first_new) -> None:
        """After `op` (ONNX IR) was lowered into `block`, its new ops following `first_new`
        (None: from the start); `ins` are its operands' memrefs."""
        key = op.attributes.get(GUARD)
        if key is not None and ins:
            self.conditions[key.data] = ins[0]
        keys = op.attributes.get(GUARDS)
        if keys is None:
            return
        found = []
        new = first_new.next_op if first_new is not None else block.first_op
        while new is not None:
            found += [o for o in new.walk() if isinstance(o, _GUARDED)]
            new = new.next_op
        if found:
            self.pending.append(([k.data for k in keys.data], found))

    def apply(self) -> int:
        """Mask every collected check and division; returns how many were changed."""
        changed = 0
        for keys, ops in self.pending:
            conds = [(self.conditions[k.lstrip("!")], k.startswith("!")) for k in keys
                     if k.lstrip("!") in self.conditions]
            if not conds:
                continue  # no Where left selecting by it: nothing of the region is used
            for op in ops:
                _mask(op, conds)
                changed += 1
        return changed


def _mask(op, conds) -> None:
    new = []
    taken = None
    for mem, negated in conds:
        rank = len(mem.type.get_shape())  # a scalar; [1] read at 0 as well
        if rank:
            zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
            new.append(zero)
        load = krnl.LoadOp(mem, [zero.result] * rank if rank else [])
        new.append(load)
        value = load.res
        if value.type != i1:
            z = arith.ConstantOp(IntegerAttr(0, value.type))
            nonzero = arith.CmpiOp(value, z.result, "ne")
            new += [z, nonzero]
            value = nonzero.result
        if negated:
            true = arith.ConstantOp(IntegerAttr(1, i1))
            flip = arith.XOrIOp(value, true.result)
            new += [true, flip]
            value = flip.result
        if taken is not None:
            both = arith.AndIOp(taken, value)
            new.append(both)
            value = both.result
        taken = value
    if isinstance(op, krnl.CheckOp):
        true = arith.ConstantOp(IntegerAttr(1, i1))
        untaken = arith.XOrIOp(taken, true.result)
        ok = arith.OrIOp(op.ok, untaken.result)
        new += [true, untaken, ok]
        op.parent_block().insert_ops_before(new, op)
        op.operands = [ok.result]
    else:
        lhs, rhs = op.operands
        one = arith.ConstantOp(IntegerAttr(1, rhs.type))
        safe = arith.SelectOp(taken, rhs, one.result)
        new += [one, safe]
        op.parent_block().insert_ops_before(new, op)
        op.operands = [lhs, safe.result]


def lower_unexpanded(b, op, ins):  # noqa: ARG001 - the registry's signature
    """If, Loop and Scan are unrolled when the ONNX model is imported (frontend/control_flow.py);
    one that reaches the lowering (ONNX IR written by hand, without its subgraphs) is refused."""
    name = op.attributes.get("onnx_node_name")
    raise UnsupportedOpError(
        f"node {name.data if name else '?'!r}: {onnx_d.op_type(op)} reached the lowering; "
        "compilerkit unrolls control flow when it imports the ONNX model (with its subgraphs), "
        "so compile the model rather than its ONNX IR")
