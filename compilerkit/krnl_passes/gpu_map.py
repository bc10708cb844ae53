"""GPU schedule: decide, for every top-level `krnl.iterate` (one CUDA kernel each), which loops
run as CUDA threads, and write the decision into Kernel IR as a `#krnl.gpu_map` attribute
(dialects/krnl.py GpuMapAttr) that the GPU code generator reads, so a reader sees it next to the
loops and a hand-edited one is what runs:

    "krnl.iterate"(...) {bounds = [[0, 8], [0, 64]],
                         gpu_map = #krnl.gpu_map<flat, loops = [0, 1], block = 256>, ...}
        -- loops 0 and 1 flattened into one 1-D index over grid x block; the rest run in order
           inside each thread
    "krnl.iterate"(...) {gpu_map = #krnl.gpu_map<matmul, loops = [0], tile = 16>, ...}
        -- a (batched) krnl.matmul: a 16x16 output tile per thread block, A and B tiles staged
           through shared memory; batch loops on grid z
    "krnl.iterate"(...) {gpu_map = #krnl.gpu_map<split, loops = [0, 1]>, ...}
        -- outer loops (Conv's batch x group) that share a scratch buffer stay sequential: one
           launch per outer point and inner nest, each inner nest mapped as above
    "krnl.iterate"(...) {gpu_map = #krnl.gpu_map<serial>, ...}  -- nothing provably parallel

A flat block is BLOCK threads, fewer (whole warps) when the nest has fewer points.
`mapping_of(it)` reads a nest's attribute back for the code generator and refuses one that does
not fit the nest (a loop position out of range, a mapped loop whose iterations write the same
elements, matmul on a nest without a krnl.matmul, ...), so an edited mapping never races.

A loop may become threads only when its iterations are independent: every memref the nest
writes (krnl.store, krnl.matmul's C) is indexed, in every store and every load of it inside the
nest, by that loop's induction variable at one fixed position (the variable itself, or plus
the same terms in every access, terms that do not change inside the nest: a Conv panel's first
column, a padding shift), so two iterations never touch the same element. Reductions
therefore keep their reduction loops sequential inside a thread and in their original order,
so sums are added in the same order as on the host.
Only whole (unblocked) loops are mapped. Assumes buffers of one nest are distinct unless one is
a `krnl.reshape` view of another (views are traced to their root and then refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.frontend.checks import ModelError
from compilerkit.onnx_passes.single_node import main_func

BLOCK = 256  # threads per block for flat 1-D mappings (8 warps: enough to hide latency)
TILE = 16  # matmul output tile edge: 16x16 threads per block, 2 x 1 KiB f32 shared tiles
MAX_GRID_Z = 65535
MAX_SPLIT = 1024  # launches per split nest (a depthwise Conv: batch x channels)


@dataclass(frozen=True)
class Mapping:
    kind: str  # "flat", "matmul", "split" or "serial"
    loops: tuple[int, ...]  # positions in the original loops: flat threads, or matmul batch
    matmul: object = None  # the krnl.MatMulOp of a "matmul" mapping
    matmul_nest: object = None  # the krnl.iterate around it (the iterate itself when 2-D)
    block: int = 0  # threads per block of a flat mapping
    tile: int = 0  # the tile edge of a matmul mapping

    def attr(self) -> krnl.GpuMapAttr:
        return krnl.GpuMapAttr(self.kind, self.loops, self.block, self.tile)

    def describe(self) -> str:
        ls = ",".join(map(str, self.loops))
        if self.kind == "flat":
            return f"flat({ls}) block {self.block}"
        if self.kind == "matmul":
            z = f", grid z = loops ({ls})" if self.loops else ""
            return f"matmul tile {self.tile}x{self.tile} smem{z}"
        if self.kind == "split":
            return f"split({ls}): one launch per outer point and inner nest"
        return "serial"


def _accesses(it):
    """memref root -> (memref values seen, [index lists of stores+loads]); and the written roots."""
    seen, written = {}, set()
    for op in it.walk():
        if isinstance(op, (krnl.StoreOp, krnl.LoadOp)):
            r = krnl.root_buffer(op.memref)
            mems, idx = seen.setdefault(r, (set(), []))
            mems.add(op.memref)
            idx.append(list(op.indices))
            if isinstance(op, krnl.StoreOp):
                written.add(r)
        elif isinstance(op, krnl.MatMulOp):
            for m in (op.a, op.b, op.c):
                mems, idx = seen.setdefault(krnl.root_buffer(m), (set(), []))
                mems.add(m)
                idx.append(None)  # flat offset arithmetic: handled by the matmul mapping
            written.add(krnl.root_buffer(op.c))
    return seen, written


def _invariant(v, it):
    """A key naming `v` when it is the same in every iteration of nest `it` (defined outside
    it, or index arithmetic inside it on such values: a group's first channel), else None.
    Equal keys: equal values."""
    if not it.is_ancestor(v.owner):
        return ("value", id(v))
    op = v.owner
    if isinstance(op, arith.ConstantOp):
        return ("const", str(op.value))
    if isinstance(op, (arith.AddiOp, arith.MuliOp)):
        keys = [_invariant(x, it) for x in op.operands]
        if None not in keys:
            return (op.name, *sorted(keys, key=repr))
    return None


def _offset_by(v, iv, it):
    """When index `v` is `iv` plus terms that are the same in every iteration of nest `it` (a
    panel's first column, a padding shift), the sorted keys of those terms, else None.
    Distinct iterations of `iv` then give distinct values of `v`."""
    terms = []
    while v is not iv:
        op = v.owner
        if not isinstance(op, arith.AddiOp):
            return None
        rhs, lhs = _invariant(op.rhs, it), _invariant(op.lhs, it)
        if rhs is not None:
            v, term = op.lhs, rhs
        elif lhs is not None:
            v, term = op.rhs, lhs
        else:
            return None
        terms.append(term)
    return tuple(sorted(terms, key=repr))


def _independent(iv, seen, written, it) -> bool:
    """Iterations of `iv` touch disjoint elements of every written memref: each of its stores
    and loads indexes one fixed position by `iv` plus the same invariant offset (out[i] and
    out[i - 1] in one nest is a dependence between iterations, not independence)."""
    for r in written:
        mems, idx = seen[r]
        if len(mems) != 1 or any(ix is None for ix in idx):
            return False
        offsets = None  # position -> the offset every access so far has there
        for ix in idx:
            here = {p: key for p, v in enumerate(ix)
                    if (key := _offset_by(v, iv, it)) is not None}
            offsets = here if offsets is None else {
                p: key for p, key in offsets.items() if here.get(p) == key}
        if not offsets:
            return False
    return True


def _matmul_of(it):
    """(matmul op, its iterate) when `it` is an (i, j, k) matmul nest, or batch loops around
    exactly one such nest, else None."""
    ops = [op for op in it.body.block.ops]
    if len(ops) == 1 and isinstance(ops[0], krnl.MatMulOp):
        return (ops[0], it) if len(it.original) == 3 else None
    nests = [op for op in ops if isinstance(op, krnl.IterateOp)]
    others = [op for op in ops if not isinstance(op, krnl.IterateOp)]
    if len(nests) != 1 or any(isinstance(op, (krnl.StoreOp, krnl.LoadOp)) for op in others):
        return None
    inner = [op for op in nests[0].body.block.ops]
    if len(inner) == 1 and isinstance(inner[0], krnl.MatMulOp) and len(nests[0].original) == 3:
        return inner[0], nests[0]
    return None


def plan(it: krnl.IterateOp) -> Mapping:
    """The mapping of one top-level loop nest (pure: the emitter calls it too)."""
    original = list(it.original)
    bounds = it.bound_list()
    found = _matmul_of(it)
    if found is not None and isinstance(found[0].a.type.element_type, (Float32Type, Float64Type)):
        mm, nest = found
        m, n, k = krnl.ints_of(mm.sizes)
        if nest is it:
            return Mapping("matmul", (), mm, nest, tile=TILE)
        # Batch loops: each matmul of the batch writes its own C block (lowering's c_off is
        # batch index x M*N), so whole unblocked batch loops go on grid z.
        batch = 1
        for lo, hi in bounds:
            batch *= hi - lo
        if all(h in it.emitted for h in original) and batch <= MAX_GRID_Z:
            return Mapping("matmul", tuple(range(len(original))), mm, nest, tile=TILE)
    seen, written = _accesses(it)
    emitted = list(it.emitted)
    args = list(it.body.block.args)
    par = tuple(p for p, h in enumerate(original)
                if h in emitted and bounds[p][1] > bounds[p][0]
                and _independent(args[p], seen, written, it))
    if par:
        total = 1
        for p in par:
            total *= bounds[p][1] - bounds[p][0]
        return Mapping("flat", par, block=min(BLOCK, (total + 31) // 32 * 32))
    if _splittable(it):
        return Mapping("split", tuple(range(len(original))))
    return Mapping("serial", ())


def _splittable(it) -> bool:
    """Outer loops around whole nests (Conv: batch x group around im2col + matmul) whose
    iterations share a scratch buffer: run the outer loops on the host side instead, one launch
    per (outer point, inner nest), each inner nest mapped on its own."""
    trips = 1
    for lo, hi in it.bound_list():
        trips *= hi - lo
    ops = list(it.body.block.ops)
    return (0 < trips <= MAX_SPLIT and all(h in it.emitted for h in it.original)
            and any(isinstance(op, krnl.IterateOp) for op in ops)
            and all(isinstance(op, (krnl.IterateOp, krnl.DefineLoopsOp, krnl.BlockOp,
                                    krnl.PermuteOp, krnl.UnrollOp))
                    or op.name.startswith("arith.") for op in ops))


def _node(it) -> str:
    tag = it.attributes.get("onnx_node")
    return f"node {tag.data!r}" if tag is not None else "a nest without an onnx_node tag"


def mapping_of(it: krnl.IterateOp) -> Mapping:
    """The mapping a nest's `gpu_map` attribute gives (what the code generator runs), after
    checking that it fits the nest: a mapping that would make two threads write one element,
    or name loops the nest does not have, is refused with a ModelError naming the node."""
    attr = it.attributes.get("gpu_map")
    where = _node(it)
    if not isinstance(attr, krnl.GpuMapAttr):
        raise ModelError(f"krnl.iterate of {where} has no #krnl.gpu_map attribute (found "
                         f"{attr}): run the gpu-map pass (krnl_passes.gpu_map) before GPU code "
                         "generation")
    kind, loops = attr.kind.data, tuple(attr.loop_list)
    original, bounds = list(it.original), it.bound_list()
    what = f"{where}: {attr}"
    bad = [p for p in loops if p >= len(original)]
    if bad:
        raise ModelError(f"{what} names loop(s) {bad}, but the nest has {len(original)} loops")
    everything = tuple(range(len(original)))
    if kind == "flat":
        seen, written = _accesses(it)
        args = list(it.body.block.args)
        for p in loops:
            if original[p] not in it.emitted:
                raise ModelError(f"{what}: loop {p} is blocked; only whole loops become threads")
            if bounds[p][1] <= bounds[p][0]:
                raise ModelError(f"{what}: loop {p} has no iterations")
            if not _independent(args[p], seen, written, it):
                raise ModelError(f"{what}: iterations of loop {p} write the same elements (a "
                                 "reduction or an indirect index): as threads they would race")
        return Mapping("flat", loops, block=attr.block.data)
    if kind == "matmul":
        found = _matmul_of(it)
        if found is None or not isinstance(found[0].a.type.element_type,
                                           (Float32Type, Float64Type)):
            raise ModelError(f"{what}: the nest is not a float krnl.matmul nest (or batch "
                             "loops around one)")
        mm, nest = found
        want = () if nest is it else everything
        if loops != want:
            raise ModelError(f"{what}: the batch loops on grid z must be {list(want)}")
        batch = 1
        for lo, hi in bounds if nest is not it else ():
            batch *= hi - lo
        if nest is not it and (batch > MAX_GRID_Z or not all(h in it.emitted for h in original)):
            raise ModelError(f"{what}: the batch loops must be whole and at most {MAX_GRID_Z} "
                             "points (grid z)")
        return Mapping("matmul", loops, mm, nest, tile=attr.tile.data)
    if kind == "split":
        if loops != everything or not _splittable(it):
            raise ModelError(f"{what}: only a nest of whole outer loops ({list(everything)}) "
                             f"around inner nests, at most {MAX_SPLIT} points, can be split")
        return Mapping("split", loops)
    return Mapping("serial", ())


def kernels(kmodule):
    """The top-level loop nests of the main function, one kernel each."""
    return [op for op in main_func(kmodule).body.block.ops if isinstance(op, krnl.IterateOp)]


def gpu_map(kmodule) -> dict:
    """Annotate every kernel with its mapping; returns {kind: count}."""
    count = {}
    for it in kernels(kmodule):
        nests = [it]
        while nests:
            it = nests.pop()
            m = plan(it)
            it.attributes["gpu_map"] = m.attr()
            count[m.kind] = count.get(m.kind, 0) + 1
            if m.kind == "split":  # the inner nests are the kernels: show theirs too
                nests += [op for op in it.body.block.ops if isinstance(op, krnl.IterateOp)]
    return count


@dataclass(frozen=True)
class GpuMapPass(ModulePass):
    """`gpu-map`: decide each top-level nest's CUDA mapping and record it on the nest."""

    name = "gpu-map"

    def apply(self, ctx, op) -> None:
        gpu_map(op)
