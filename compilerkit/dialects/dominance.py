"""Every use of an SSA value comes after its definition, in the same block or one enclosing it.

xDSL's parser resolves names anywhere in a region (MLIR allows forward references in graph
regions), and xDSL's verifier does not check dominance, so hand-edited IR that uses a value
before, or outside, the block defining it parses and verifies, and the code generators then
fail deep inside with a KeyError naming an anonymous block argument. The IR compilerkit
writes only has single-block regions in structured ops (krnl.iterate, func.func), where
dominance is textual order; a region of several blocks (a CFG) is not checked here.
"""

from __future__ import annotations


def _name(value) -> str:
    hint = getattr(value, "name_hint", None)
    if hint:
        return f"%{hint}"
    owner = value.owner
    where = (f"argument {value.index} of a block in {owner.parent_op().name}"
             if hasattr(owner, "parent_op") and owner.parent_op() is not None
             else f"result {value.index} of {getattr(owner, 'name', '?')}")
    return f"a value ({where})"


def dominance_problem(module) -> str | None:
    """Why `module` is not valid SSA (the first op using a value not defined before it), or
    None. A message, not an error: the caller (ir.parse_ir) raises it as a ModelError."""
    visible: set[int] = set()

    def walk(block) -> str | None:
        added = [id(a) for a in block.args]
        visible.update(added)
        for op in block.ops:
            for k, v in enumerate(op.operands):
                if id(v) not in visible:
                    return (f"{op.name} (operand {k}) uses {_name(v)} that is not defined "
                            "before it in its block or an enclosing one: every value must be "
                            "defined before its use")
            for region in op.regions:
                why = walk(region.blocks[0]) if len(region.blocks) == 1 else None
                if why is not None:
                    return why
            ids = [id(r) for r in op.results]
            visible.update(ids)
            added.extend(ids)
        visible.difference_update(added)
        return None

    for region in module.regions:
        for block in region.blocks:
            why = walk(block)
            if why is not None:
                return why
    return None
