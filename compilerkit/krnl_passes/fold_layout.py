"""`fold-layout`: drop the NCDHW8c layout transforms between consecutive blocked Convs.

Runs on Kernel IR right after lowering. Assumes the transform nests are the top-level
krnl.iterate ops that lowering/blocked3d.py tags `layout = "from_nchw8c"` (reads one blocked
buffer, writes an NCDHW buffer) and `layout = "to_nchw8c"` (reads an NCDHW buffer, writes a
blocked krnl.alloc), each with the krnl.define_loops just before it.

For every krnl.alloc X that only from-nests write and that some to-nests read: the blocked
buffer a to-nest writes is replaced by the blocked buffer the from-nest read (same shape:
same channel count and positions), and the to-nest goes. When nothing else reads X (no
pool, concat or output that needs NCDHW), the from-nests and X go too. So in a chain of
pznet Convs the layout changes once on the way in and once on the way out, and nothing
changes where a chain ends in an op that has no blocked lowering.

The blocked buffer passed on holds act(0) in its padded lanes where the to-nest wrote
zeros; the consumer, a pznet Conv, multiplies them by its zero weights (blocked3d.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.passes import ModulePass

from compilerkit.dialects import krnl


def _top(op, block):
    """The ancestor of `op` that sits in `block` (a top-level op of the function)."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


def _layout(op) -> str | None:
    a = op.attributes.get("layout") if isinstance(op, krnl.IterateOp) else None
    return a.data if a is not None else None


def _stores_in(nest):
    return [o for o in nest.walk() if isinstance(o, krnl.StoreOp)]


def _loads_in(nest):
    return [o for o in nest.walk() if isinstance(o, krnl.LoadOp)]


def _erase_nest(nest):
    block = nest.parent_block()
    defines = {h.owner for h in nest.operands if isinstance(h.owner, krnl.DefineLoopsOp)}
    block.erase_op(nest)
    for d in defines:
        if all(not r.uses for r in d.results):
            block.erase_op(d)


def fold_layout(module) -> int:
    """Fold the from/to pairs in `module`; returns how many to-nests were removed."""
    removed = 0
    for func in module.body.block.ops:
        if not func.regions or not func.regions[0].blocks:
            continue
        block = func.regions[0].blocks[0]
        for alloc in [o for o in block.ops if isinstance(o, krnl.AllocOp)]:
            x = alloc.results[0]
            users = {}
            for use in list(x.uses):
                top = _top(use.operation, block)
                users.setdefault(top, set()).add(type(use.operation))
            writers = [t for t, kinds in users.items() if krnl.StoreOp in kinds]
            if not writers or any(_layout(t) != krnl.LAYOUT_FROM_BLOCKED for t in writers):
                continue
            readers = [t for t in users if t not in writers]
            tos = [t for t in readers if _layout(t) == krnl.LAYOUT_TO_BLOCKED]
            if not tos:
                continue
            sources = {ld.operands[0] for w in writers for ld in _loads_in(w)}
            if len(sources) != 1:
                continue
            (blocked,) = sources
            for to in tos:
                (dest,) = {st.operands[1] for st in _stores_in(to)}
                if dest.type != blocked.type or not isinstance(dest.owner, krnl.AllocOp):
                    continue
                _erase_nest(to)
                dest.replace_all_uses_with(blocked)
                block.erase_op(dest.owner)
                removed += 1
            if all(_layout(_top(u.operation, block)) == krnl.LAYOUT_FROM_BLOCKED for u in x.uses):
                for w in writers:
                    _erase_nest(w)
                block.erase_op(alloc)
    return removed


@dataclass(frozen=True)
class FoldLayoutPass(ModulePass):
    """`fold-layout`: remove NCDHW8c transforms between consecutive blocked Convs."""

    name = "fold-layout"

    def apply(self, ctx, op) -> None:
        fold_layout(op)
