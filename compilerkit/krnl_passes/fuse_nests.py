"""-O1+ (`fuse-nests`): an elementwise nest whose only reader is the next nest, reading it at the
same indices, is computed inside that nest; the buffer between them goes.

A chain of per-element nodes lowers to one nest each: DenseNet-121's pre-activation
BatchNormalization is four ONNX nodes after decomposition (Mul, Add, Mul, Add + Relu), four
passes over the feature map, and four LLVM functions, each optimised and compiled on its own.
LLVM's cost per function is nearly fixed (10-15 ms of -O3 and machine code for a 160-instruction
node function), so the 124 nests this pass removes from DenseNet-121 took about a second of its
compile; the fused nest also reads and writes the feature map once instead of four times.

The consumer keeps its node's `onnx_node` tag (its function is named after it and provenance
gives the function to it; the producer's node emits no code of its own, as an activation that
fuse-elementwise moved into its producer) and lists the producers it absorbed in
`fused_nodes`, oldest first. Each element's arithmetic is the same ops in the same order, on
the same values: the answer is the same bits (no contraction: codegen writes no fast-math
flags). codegen="loopnest" compiles without it (pipeline.Options `fuse_nests`): it writes and
reports its code node by node.

A producer P fuses into the nest C after it when (checked on the Kernel IR, before any
schedule):
- P's body is loads, arith and math ops, then one store, to a view of a `krnl.alloc`ed buffer,
  one element per iteration (`_element`); C's body is the same kind (loads, arith, math, one
  store) and reads that buffer only through views of P's stored type, in each iteration the
  element P wrote in the same iteration;
- nothing else uses the buffer (not a model output, not read by any other nest);
- both nests belong to a node (or neither does), and P holds no op whose code names its node
  (NAMES_NODE) unless both are the same node's;
- P and C iterate the same bounds over loops made by one `krnl.define_loops` each, used by
  nothing else (no schedule yet), and between them are only ops that define values (allocs,
  views, globals, loop handles, constants), so no memory P reads changes in between; C stores
  into no buffer P reads.
A chain fuses from its head: the fused nest is the producer candidate for the nest after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.onnx_passes.single_node import main_func

# Ops whose code names their node (codegen's division guards: "node 'x': integer division by
# zero"): moved into another node's nest they would name that one.
NAMES_NODE = ("arith.divsi", "arith.remsi")
# Top-level ops that may sit between a producer and its consumer: they only define values.
BETWEEN = (krnl.AllocOp, krnl.ReshapeOp, krnl.GlobalOp, krnl.DefineLoopsOp, arith.ConstantOp)


def _elementwise_body(it: krnl.IterateOp):
    """(the loads, the one store) of a nest whose body is loads, arith/math ops and a final
    store; None otherwise."""
    ops = list(it.body.block.ops)
    if not ops or not isinstance(ops[-1], krnl.StoreOp):
        return None
    loads = []
    for op in ops[:-1]:
        if isinstance(op, krnl.LoadOp):
            loads.append(op)
        elif not (op.name.startswith("arith.") or op.name.startswith("math.")) or op.regions:
            return None
    return loads, ops[-1]


def _own_loops(it: krnl.IterateOp) -> bool:
    """Whether `it` iterates, in order, every loop of one krnl.define_loops, unscheduled: the
    handles used by nothing but `it`, emitted as they are defined."""
    loops = list(it.original)
    if not loops or list(it.emitted) != loops:
        return False
    owner = loops[0].owner
    if not isinstance(owner, krnl.DefineLoopsOp) or list(owner.loops) != loops:
        return False
    return all(u.operation is it for h in loops for u in h.uses)


def _element(access, it):
    """The element `access` (a krnl.load or krnl.store in `it`'s body) touches in each
    iteration, as a tuple: ("iv", k) for induction variable k, ("at", c) for a constant index
    (or an induction variable whose loop has one iteration, c). None where an index is
    anything else, or where an induction variable of more than one iteration is missing or
    repeated (then iterations and elements are not one to one)."""
    args = list(it.body.block.args)
    bounds = it.bound_list()
    out = []
    for v in access.indices:
        if v in args:
            k = args.index(v)
            lo, hi = bounds[k]
            out.append(("at", lo) if hi - lo == 1 else ("iv", k))
        elif isinstance(v.owner, arith.ConstantOp) and isinstance(
                getattr(v.owner.value, "value", None), IntAttr):
            out.append(("at", v.owner.value.value.data))
        else:
            return None
    ivs = [x[1] for x in out if x[0] == "iv"]
    wide = {k for k, (lo, hi) in enumerate(bounds) if hi - lo > 1}
    if len(ivs) != len(set(ivs)) or set(ivs) != wide:
        return None
    return tuple(out)


def _views(buffer):
    """Every value viewing `buffer` (itself and its krnl.reshape views, transitively)."""
    out, todo = [], [buffer]
    while todo:
        v = todo.pop()
        out.append(v)
        todo.extend(u.operation.res for u in v.uses if isinstance(u.operation, krnl.ReshapeOp))
    return out


def _fusible(p: krnl.IterateOp, c: krnl.IterateOp):
    """(the buffer P writes, C's loads of it) when P may be computed inside C; else None."""
    pb, cb = _elementwise_body(p), _elementwise_body(c)
    if pb is None or cb is None or p.bound_list() != c.bound_list():
        return None
    p_tag, c_tag = p.attributes.get("onnx_node"), c.attributes.get("onnx_node")
    if (p_tag is None) != (c_tag is None):
        return None  # a node's code would go to a nest of no node, or the other way round
    if p_tag != c_tag and any(op.name in NAMES_NODE for op in p.body.block.ops):
        return None
    if not (_own_loops(p) and _own_loops(c)):
        return None
    p_loads, store = pb
    c_loads, c_store = cb
    buffer = krnl.root_buffer(store.memref)
    where = _element(store, p)
    if not isinstance(buffer.owner, krnl.AllocOp) or where is None:
        return None
    # C reads, in each iteration, the element P wrote in the same iteration (bounds equal).
    reads = [ld for ld in c_loads if krnl.root_buffer(ld.memref) is buffer]
    if not reads or any(ld.memref.type != store.memref.type or _element(ld, c) != where
                        for ld in reads):
        return None
    # The buffer's only users: its views, P's store and those loads.
    allowed = {store, *reads}
    for v in _views(buffer):
        for u in v.uses:
            if not isinstance(u.operation, krnl.ReshapeOp) and u.operation not in allowed:
                return None
    # C must not write what P reads (P's values move to C's iterations).
    if krnl.root_buffer(c_store.memref) in {krnl.root_buffer(ld.memref) for ld in p_loads}:
        return None
    return buffer, reads


def _next_nest(it: krnl.IterateOp):
    """The next top-level op after `it` that is not a BETWEEN op, if it is a nest."""
    op = it.next_op
    while op is not None and isinstance(op, BETWEEN):
        op = op.next_op
    return op if isinstance(op, krnl.IterateOp) else None


def _fused_names(it: krnl.IterateOp) -> list[str]:
    """The nodes `it` computes: those fused into it, then its own."""
    names = [a.data for a in it.attributes["fused_nodes"].data] \
        if "fused_nodes" in it.attributes else []
    tag = it.attributes.get("onnx_node")
    return names + ([tag.data] if tag is not None else [])


def _fuse(p: krnl.IterateOp, c: krnl.IterateOp, buffer, reads) -> None:
    """P's body (but its store) at the top of C's, on C's induction variables; C's loads of
    the buffer replaced by the value P stored; P, its loops and the buffer erased."""
    body = c.body.block
    mapping = dict(zip(p.body.block.args, body.args, strict=True))
    first = body.first_op
    ops = list(p.body.block.ops)
    for op in ops[:-1]:
        body.insert_op_before(op.clone(value_mapper=mapping), first)
    value = mapping.get(ops[-1].value, ops[-1].value)
    for ld in reads:
        ld.res.replace_all_uses_with(value)
        body.erase_op(ld)
    names = _fused_names(p) + _fused_names(c)
    own = c.attributes.get("onnx_node")
    names = [n for n in dict.fromkeys(names) if own is None or n != own.data]
    if names:
        c.attributes["fused_nodes"] = ArrayAttr([StringAttr(n) for n in names])
    loops = p.original[0].owner
    block = p.parent_block()
    block.erase_op(p)
    block.erase_op(loops)
    # The buffer's views, innermost first, then the buffer.
    for v in reversed(_views(buffer)):
        v.owner.parent_block().erase_op(v.owner)


def fuse_nests(module: ModuleOp) -> int:
    """Fuse every producer nest that qualifies (module docstring); returns how many."""
    block = main_func(module).body.block
    fused = 0
    for it in [op for op in block.ops if isinstance(op, krnl.IterateOp)]:
        c = _next_nest(it)
        if c is None:
            continue
        found = _fusible(it, c)
        if found is not None:
            _fuse(it, c, *found)
            fused += 1
    return fused


@dataclass(frozen=True)
class FuseNestsPass(ModulePass):
    """`fuse-nests`: compute an elementwise nest inside the nest that reads it (module
    docstring)."""

    name = "fuse-nests"

    def apply(self, ctx, op: ModuleOp) -> None:
        fuse_nests(op)
