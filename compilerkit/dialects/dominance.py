"""Every use of an SSA value comes after its definition, in the same block or one enclosing it.

xDSL's parser resolves names anywhere in a region (MLIR allows forward references in graph
regions), and xDSL's verifier does not check dominance, so hand-edited IR that uses a value
before, or outside, the block defining it parses and verifies, and the code generators then
fail deep inside with a KeyError naming an anonymous block argument. The IR compilerkit
writes only has single-block regions in structured ops (krnl.iterate, func.func), where
dominance is textual order; a region of several blocks (a CFG) is not checked here.
"""

from __future__ import annotations

from compilerkit.frontend.checks import ModelError


def _name(value) -> str:
    hint = getattr(value, "name_hint", None)
    if hint:
        return f"%{hint}"
    owner = value.owner
    where = (f"argument {value.index} of a block in {owner.parent_op().name}"
             if hasattr(owner, "parent_op") and owner.parent_op() is not None
             else f"result {value.index} of {getattr(owner, 'name', '?')}")
    return f"a value ({where})"


def check_dominance(module) -> None:
    """Raise ModelError naming the first op that uses a value not defined before it."""
    visible: set[int] = set()

    def walk(block):
        added = [id(a) for a in block.args]
        visible.update(added)
        for op in block.ops:
            for k, v in enumerate(op.operands):
                if id(v) not in visible:
                    raise ModelError(f"{op.name} (operand {k}) uses {_name(v)} that is not "
                                     "defined before it in its block or an enclosing one: "
                                     "every value must be defined before its use")
            for region in op.regions:
                if len(region.blocks) == 1:
                    walk(region.blocks[0])
            ids = [id(r) for r in op.results]
            visible.update(ids)
            added.extend(ids)
        visible.difference_update(added)

    for region in module.regions:
        for block in region.blocks:
            walk(block)
