"""Plain data views of compilerkit's IR for the workbench's pictures (`mlsys_viz`):

- ir_view_data(cm): the stage texts, the ONNX nodes and which lines of each stage came from each
  node (measure/provenance.py), ready for `viz.ir_side_by_side` / `viz.ir_panes`;
- loop_nest(it): one `krnl.iterate` as the list of loops it emits, outermost first (name,
  bounds, step, which original loop a tile loop splits, depth, unrolled or not) and a one-line
  summary of its body, ready for `viz.loopnest_figure`.

Assumes the schedule ops of the krnl dialect as krnl_passes writes them: a loop handle comes
from `krnl.define_loops` or from one `krnl.block` of such a handle (blocked at most once).
Nothing here draws.
"""

from __future__ import annotations

from collections import Counter

from compilerkit.dialects import krnl
from compilerkit.measure.provenance import FUNCTION_LINES, IR_STAGES
from compilerkit.measure.provenance import of as provenance_of

STAGES = ("onnx-ir", "kernel-ir", "llvm-ir", "asm", "ptx")
LOOP_NAMES = "ijklmnpqrstuvw"


def ir_view_data(cm, stages=STAGES, provenance=None) -> dict:
    """{"stages": {stage: text}, "nodes": [{"name", "op"}], "ranges": {node: {stage:
    [(first, last)]}}} for a CompiledModel (or a mapping stage -> text) and the stages asked for
    that it has. The ranges come from the IR and codegen's function record (measure/provenance.py):
    the CompiledModel's, or `provenance` (a provenance.Provenance) for texts; reading "asm"
    generates it if it was not yet (a second code generation)."""
    texts = getattr(cm, "stages", cm)
    prov = provenance if provenance is not None else provenance_of(cm)
    picked = {s: texts[s] for s in stages if s in texts}
    mapped = {s: t for s, t in picked.items() if s in IR_STAGES or s in FUNCTION_LINES}
    return {"stages": picked, "nodes": prov.nodes, "ranges": prov.ranges(mapped)}


def _handles(it: krnl.IterateOp, names):
    """Loop handle -> (kind, original position, tile) for every handle the nest can emit."""
    out = {}
    for k, h in enumerate(it.original):
        out[h] = ("full", k, None)
    for op in _schedule_ops(it):
        if isinstance(op, krnl.BlockOp) and op.loop in out:
            _, k, _ = out[op.loop]
            tile = op.tile.value.data
            out[op.outer] = ("outer", k, tile)
            out[op.inner] = ("inner", k, tile)
    return out


def _schedule_ops(it):
    block = it.parent_block()
    return [op for op in block.ops if isinstance(op, (krnl.BlockOp, krnl.UnrollOp,
                                                       krnl.PermuteOp))]


def _body_summary(it) -> str:
    ops = list(it.body.block.ops)
    if len(ops) == 1 and isinstance(ops[0], krnl.MatMulOp):
        tile = krnl.ints_of(ops[0].tile)
        return f"krnl.matmul on a {'x'.join(map(str, tile))} tile (TM x TN x TK)"
    counts = Counter(op.name for op in it.body.walk() if op is not it)
    nested = counts.pop("krnl.iterate", 0)
    parts = [f"{n} {name}" if n > 1 else name for name, n in counts.most_common(4)]
    more = len(counts) - 4
    text = ", ".join(parts) + (f", +{more} kinds" if more > 0 else "")
    return (f"{nested} inner nest(s); " if nested else "") + text


def loop_nest(it: krnl.IterateOp, names=None) -> dict:
    """{"loops": [...], "body": str, "node": str | None} for one krnl.iterate.

    Each loop, outermost first: name (original loops are named i, j, k, ... or by `names`;
    a tile loop pair `j_o` / `j_i`), lo, hi, step (the tile for an outer tile loop), tile_of
    (the original loop's name for tile loops, else None), kind ("full", "outer", "inner"),
    order (depth, 0 outermost), original (the original loop's position), unroll (bool).
    An inner tile loop walks [outer, min(outer + tile, hi)); its lo/hi are given as 0 and the
    tile. Original loops that are not emitted (a micro-kernel walks the tile) are left out."""
    n = len(it.original)
    names = list(names) if names is not None else list(LOOP_NAMES[:n])
    if len(names) != n:
        raise ValueError(f"{n} loops but {len(names)} names: {names}")
    bounds = it.bound_list()
    handles = _handles(it, names)
    unrolled = {op.loop for op in _schedule_ops(it) if isinstance(op, krnl.UnrollOp)}
    loops = []
    for depth, h in enumerate(it.emitted):
        if h not in handles:
            raise ValueError("krnl.iterate emits a loop handle that is not defined next to it")
        kind, k, tile = handles[h]
        lo, hi = bounds[k]
        base = names[k]
        name = {"full": base, "outer": f"{base}_o", "inner": f"{base}_i"}[kind]
        loops.append({
            "name": name, "lo": 0 if kind == "inner" else lo,
            "hi": tile if kind == "inner" else hi,
            "step": tile if kind == "outer" else 1,
            "tile_of": base if kind != "full" else None, "kind": kind, "order": depth,
            "original": k, "unroll": h in unrolled,
        })
    return {"loops": loops, "body": _body_summary(it), "node": _node_of(it)}


def _node_of(op):
    # Lowering tags top-level ops only; a nested nest belongs to its outermost ancestor's node.
    while op is not None:
        tag = op.attributes.get("onnx_node")
        if tag is not None:
            return tag.data
        op = op.parent_op()
    return None


__all__ = ["ir_view_data", "loop_nest", "STAGES"]
