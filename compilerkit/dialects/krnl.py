"""Kernel IR: the `krnl` dialect, loops and memory after onnx-mlir's krnl.

Values are memrefs with static shapes; the schedule is explicit in the IR text:

    %l:2 = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    %o, %t = "krnl.block"(%l#1) {tile = 8 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.permute"(%l#0, %o, %t) {map = [1, 0, 2]} : ...        // loop i moves to depth 1
    "krnl.iterate"(%l#0, %l#1, %o, %l#0, %t) {bounds = [[0, 4], [0, 32]], n_original = 2}
        ({ ^bb0(%i: index, %j: index): ... })

`krnl.iterate` takes first the original loops (one block argument each, the induction
variables, in order), then the loops to emit, in nesting order, after `block`/`permute`.
A blocked loop's induction variable is outer+inner when both are emitted, the tile start when
only the outer loop is (the body then works on a whole tile, e.g. with `krnl.matmul`).
`krnl.permute`'s map gives, for each loop operand, its depth in the nest; the emitted order in
`krnl.iterate` must agree with it (the verifier checks). `"krnl.parallel"(%o)`, placed last
before the nest, runs the outermost emitted loop's iterations on threads (ParallelOp).
"""

from __future__ import annotations

import functools
import math

from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from compilerkit.dialects.krnl_ranges import ints_of  # noqa: F401 (krnl.ints_of: API)


def int_attr(value: int, type_: Attribute = i64) -> IntegerAttr:
    """IntegerAttr(value, type_), one shared instance per Python int and type: attributes are
    immutable, and making one took about 6 us, a tenth of lowering a real model (every loop
    nest's bounds, every index constant)."""
    if type(value) is not int:
        return IntegerAttr(value, type_)
    return _int_attr(value, type_)


@functools.lru_cache(maxsize=1 << 14)
def _int_attr(value: int, type_: Attribute) -> IntegerAttr:
    return IntegerAttr(value, type_)


def _build(op, operands=(), result_types=(), attributes=None, regions=()) -> None:
    """`op` made from its operands, result types, attributes and regions as they are stored
    (variadic operands flattened): Operation's constructor without IRDL's generic builder,
    which took two thirds of the time of making the ops a loop nest is built of. For the krnl
    ops that have neither properties nor more than one variadic group; the verifier checks
    what the builder would have."""
    Operation.__init__(op, operands=operands, result_types=result_types,
                       attributes=attributes or {}, regions=regions)


@irdl_attr_definition
class LoopType(ParametrizedAttribute, TypeAttribute):
    """A loop handle: names a loop so schedule ops can transform it before it is emitted."""

    name = "krnl.loop"


@irdl_op_definition
class DefineLoopsOp(IRDLOperation):
    """Creates n loop handles."""

    name = "krnl.define_loops"
    loops = var_result_def(LoopType)

    def __init__(self, n: int):
        _build(self, result_types=[LoopType() for _ in range(n)])


@irdl_op_definition
class BlockOp(IRDLOperation):
    """Tiles a loop: the outer loop steps by `tile`, the inner one walks inside the tile."""

    name = "krnl.block"
    loop = operand_def(LoopType)
    tile = attr_def(IntegerAttr)
    outer = result_def(LoopType)
    inner = result_def(LoopType)

    def __init__(self, loop, tile: int):
        super().__init__(operands=[loop], result_types=[LoopType(), LoopType()],
                         attributes={"tile": int_attr(tile)})

    def verify_(self):
        if self.tile.value.data < 1:
            raise VerifyException(f"krnl.block tile must be at least 1, got {self.tile.value.data}")


@irdl_op_definition
class PermuteOp(IRDLOperation):
    """Reorders loops: loop operand k is emitted at depth map[k]."""

    name = "krnl.permute"
    loops = var_operand_def(LoopType)
    map = attr_def(ArrayAttr)

    def __init__(self, loops, order: list[int]):
        super().__init__(operands=[list(loops)],
                         attributes={"map": ArrayAttr([int_attr(d) for d in order])})

    def verify_(self):
        depths = sorted(a.value.data for a in self.map.data)
        if depths != list(range(len(self.loops))):
            raise VerifyException("krnl.permute map must be a permutation of the loop depths")


@irdl_op_definition
class UnrollOp(IRDLOperation):
    """Hint: fully unroll this loop (its trip count must be a small constant)."""

    name = "krnl.unroll"
    loop = operand_def(LoopType)

    def __init__(self, loop):
        super().__init__(operands=[loop])


@irdl_op_definition
class ParallelOp(IRDLOperation):
    """Run this loop's iterations on a thread pool (onnx-mlir's krnl.parallel): each thread
    takes a static chunk of them. Placed last before its krnl.iterate, after block / permute /
    unroll, as in onnx-mlir. The loop must be the outermost one the nest emits (a full or a
    tile loop, not unrolled), the nest may not sit inside another parallel loop, and its
    iterations must write disjoint memory (`parallel_conflict` says why not); the verifier
    checks all three. Targets without a thread runtime (the emulated ones, the GPU) run the
    loop serially: the answer does not depend on the thread count."""

    name = "krnl.parallel"
    loop = operand_def(LoopType)

    def __init__(self, loop):
        super().__init__(operands=[loop])

    def verify_(self):
        nests = list({id(u.operation): u.operation for u in self.loop.uses
                      if isinstance(u.operation, IterateOp)
                      and self.loop in u.operation.emitted}.values())
        if len(nests) != 1:
            raise VerifyException("krnl.parallel names a loop that no krnl.iterate emits")
        it = nests[0]
        if it.emitted[0] is not self.loop:
            raise VerifyException("krnl.parallel: only the outermost loop a krnl.iterate "
                                  "emits can run in parallel")
        owner = self.loop.owner
        if isinstance(owner, BlockOp) and self.loop is owner.inner:
            raise VerifyException("krnl.parallel: an inner tile loop cannot run in parallel")
        if any(isinstance(u.operation, UnrollOp) for u in self.loop.uses):
            raise VerifyException("krnl.parallel: a loop cannot be both unrolled and parallel")
        outer = it.parent_op()
        while outer is not None:
            if isinstance(outer, IterateOp) and parallel_loop(outer) is not None:
                raise VerifyException("krnl.parallel: the nest is already inside a parallel "
                                      "loop")
            outer = outer.parent_op()
        why = parallel_conflict(it, 0)
        if why is not None:
            raise VerifyException(f"krnl.parallel: iterations of the loop may touch the same "
                                  f"memory: {why}")


# Values of a krnl.iterate's optional `layout` attribute: the nests lowering/blocked3d.py emits
# to change a buffer from NCDHW to the NCDHW8c blocked layout and back, which
# krnl_passes/fold_layout.py drops between consecutive blocked Convs.
LAYOUT_TO_BLOCKED, LAYOUT_FROM_BLOCKED = "to_nchw8c", "from_nchw8c"


@irdl_op_definition
class IterateOp(IRDLOperation):
    """A loop nest over the emitted loops; block arguments are the original induction vars."""

    name = "krnl.iterate"
    loops = var_operand_def(LoopType)
    bounds = attr_def(ArrayAttr)
    n_original = attr_def(IntegerAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())

    def __init__(self, original, emitted, bounds: list[tuple[int, int]], body: Region):
        _build(
            self,
            operands=[*original, *emitted],
            attributes={
                "bounds": ArrayAttr([ArrayAttr([int_attr(lo), int_attr(hi)])
                                     for lo, hi in bounds]),
                "n_original": int_attr(len(original)),
            },
            regions=[body],
        )

    @property
    def original(self):
        return self.loops[: self.n_original.value.data]

    @property
    def emitted(self):
        return self.loops[self.n_original.value.data:]

    def bound_list(self) -> list[tuple[int, int]]:
        return [(b.data[0].value.data, b.data[1].value.data) for b in self.bounds.data]

    def verify_(self):
        n = self.n_original.value.data
        if len(self.bounds.data) != n or len(self.body.block.args) != n:
            raise VerifyException("krnl.iterate needs one bound and one block argument per loop")
        for a in self.body.block.args:
            if not isinstance(a.type, IndexType):
                raise VerifyException("krnl.iterate induction variables are index values")
        if len(self.loops) < n:
            raise VerifyException("krnl.iterate lists its original loops first")
        for lo, hi in self.bound_list():
            if lo > hi:
                raise VerifyException(f"krnl.iterate bound [{lo}, {hi}) is empty backwards")
        mapping = self.attributes.get("gpu_map")
        if mapping is not None and not isinstance(mapping, GpuMapAttr):
            raise VerifyException(f"krnl.iterate gpu_map must be a #krnl.gpu_map, got {mapping}")
        if mapping is not None and any(p >= n for p in mapping.loop_list):
            raise VerifyException(f"krnl.iterate has {n} loops; its {mapping} names loop "
                                  f"{max(mapping.loop_list)}")


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads one element of a memref at full indices."""

    name = "krnl.load"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    res = result_def()

    def __init__(self, memref, indices):
        _build(self, operands=[memref, *indices], result_types=[memref.type.element_type])

    def verify_(self):
        if len(self.indices) != len(self.memref.type.get_shape()):
            raise VerifyException("krnl.load needs one index per memref dimension")
        if self.res.type != self.memref.type.element_type:
            raise VerifyException(f"krnl.load of a {self.memref.type} yields "
                                  f"{self.memref.type.element_type}, not {self.res.type}")
        _check_bounds(self)


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes one element of a memref at full indices."""

    name = "krnl.store"
    value = operand_def()
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    def __init__(self, value, memref, indices):
        _build(self, operands=[value, memref, *indices])

    def verify_(self):
        if len(self.indices) != len(self.memref.type.get_shape()):
            raise VerifyException("krnl.store needs one index per memref dimension")
        if self.value.type != self.memref.type.element_type:
            raise VerifyException(f"krnl.store of a {self.value.type} value into a "
                                  f"{self.memref.type}")
        _check_bounds(self)


def _check_bounds(op) -> None:
    """Every index inside its buffer, as far as the loops' ranges show (krnl_ranges.py); an
    index that depends on data is checked at run time instead (guard-indices)."""
    from compilerkit.dialects.krnl_ranges import access_problem

    why = access_problem(op)
    if why is not None:
        raise VerifyException(why)


@irdl_op_definition
class GlobalOp(IRDLOperation):
    """A named constant buffer, its value a dense (or dense_resource) attribute."""

    name = "krnl.global"
    sym_name = attr_def(StringAttr)
    value = attr_def(Attribute)
    res = result_def(MemRefType)

    def __init__(self, name: str, value: Attribute, type_: MemRefType):
        super().__init__(result_types=[type_],
                         attributes={"sym_name": StringAttr(name), "value": value})

    def verify_(self):
        t = self.value.get_type() if hasattr(self.value, "get_type") else None
        if t is not None and (list(t.get_shape()) != list(self.res.type.get_shape())
                              or t.element_type != self.res.type.element_type):
            raise VerifyException(f"krnl.global {self.sym_name.data!r}: its value is a {t}, "
                                  f"its buffer a {self.res.type}")


@irdl_op_definition
class AllocOp(IRDLOperation):
    """An intermediate buffer; buffer planning gives it an `offset` in the model's arena."""

    name = "krnl.alloc"
    offset = opt_attr_def(IntegerAttr)
    res = result_def(MemRefType)

    def __init__(self, type_: MemRefType):
        _build(self, result_types=[type_])

    def verify_(self):
        if any(d < 0 for d in self.res.type.get_shape()):
            raise VerifyException(f"krnl.alloc needs a static shape, got {self.res.type}")
        if self.offset is not None:
            self._check_offset(self.offset.value.data)

    def _check_offset(self, offset: int) -> None:
        """The buffer's bytes [offset, offset + size) lie inside the function's arena (its
        `arena_bytes`, 0 when absent: the code generators allocate that many), at an offset
        its elements can be read at; hand-edited offsets used to write past the arena."""
        from compilerkit.dialects.krnl_ranges import _node

        fn = self.parent_op()
        while fn is not None and fn.name != "func.func":
            fn = fn.parent_op()
        if fn is None:
            return  # not in a function yet (being built): no arena to check against
        t = self.res.type
        what = f"krnl.alloc of {t}{_node(self)}"
        width = elem_bytes(t)
        if offset < 0:
            raise VerifyException(f"{what}: its arena offset {offset} is negative")
        if offset % width:
            raise VerifyException(f"{what}: its arena offset {offset} is not a multiple of its "
                                  f"{t.element_type} elements' {width} bytes")
        end = offset + math.prod(t.get_shape()) * width
        arena = fn.attributes.get("arena_bytes")
        if arena is None:
            if end > offset:
                raise VerifyException(f"{what}: it has an arena offset but the function has no "
                                      "arena_bytes (run buffer planning, plan-buffers)")
            return
        size = arena.value.data
        if end > size:
            raise VerifyException(f"{what}: bytes [{offset}, {end}) of the arena, which has "
                                  f"{size} bytes (arena_bytes of @{fn.sym_name.data})")


def elem_bytes(t: MemRefType) -> int:
    """Bytes one element of memref type `t` takes in memory (an i1 takes a byte)."""
    elem = t.element_type
    width = getattr(elem, "bitwidth", None) or elem.width.data
    return max(1, width // 8)


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """A view of a buffer with another static shape of the same size (no copy)."""

    name = "krnl.reshape"
    source = operand_def(MemRefType)
    res = result_def(MemRefType)

    def __init__(self, source, type_: MemRefType):
        _build(self, operands=[source], result_types=[type_])

    def verify_(self):
        a, b = self.source.type, self.res.type
        if math.prod(a.get_shape()) != math.prod(b.get_shape()) or (
                a.element_type != b.element_type):
            raise VerifyException(f"krnl.reshape views a {a} as a {b}: a view must keep the "
                                  "element count and type")


# A krnl.iterate attribute (an integer): this nest copies a whole buffer into the slab of
# another that starts at this element (a Concat's input into its output, lowering/shape_ops.py).
# Buffer planning may give the source buffer that slab and drop the nest (plan_buffers.py).
CONCAT_SLAB = "concat_slab"

MATMUL_STARTS = ("zero", "bias")  # krnl.matmul's `start` values


@irdl_op_definition
class MatMulOp(IRDLOperation):
    """A tile-level matrix-multiply micro-kernel (onnx-mlir's krnl.matmul):

    C[ci + r*ldc + c] += A[ai + r*lda_r + k*lda_k] * B[bi + k*ldb + c]
    for r in [i, min(i+TM, M)), c in [j, min(j+TN, N)), k in [k0, min(k0+TK, K)),
    where ai, bi, ci are element offsets (batch) into the flat buffers. B and C rows are
    contiguous, so the kernel is emitted with `simd`-wide vectors along c.

    `start` says what C holds before the product's first k (the tile at k0 = 0): absent, C's
    own values (the sum is added to them); "zero", nothing (the tile starts from 0); "bias",
    nothing (the tile of row r starts from bias[r], `bias` a buffer of at least M elements).
    So a Conv's output need not be filled with its bias (or a MatMul's with zeros) in a pass
    of its own before the product: the kernel starts its accumulators from them. The sums
    are the same chains of fused multiply-adds as after a fill, the same bits.

    `clamp_lo` / `clamp_hi` (finite floats, either or both) clamp C once its product is
    complete (the tile's last k is K - 1): max(C, lo) then min(C, hi), NaN-propagating as
    ONNX Relu and Clip are. A Conv's fused Relu or Clip is applied as the kernel stores its
    registers, instead of in an epilogue pass that reads the output back: same ops on the
    same values, the same bits.

    `a_taps` (T offsets) reads A's column k at (k // T) * lda_k + a_taps[k % T] instead of
    k * lda_k: k runs over (channel, kernel tap) and A is a Conv's zero-bordered input planes,
    row r an output position, read in place (the taps' offsets within a plane) instead of
    copied into im2col columns.
    """

    name = "krnl.matmul"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    i = operand_def(IndexType)
    j = operand_def(IndexType)
    k = operand_def(IndexType)
    a_off = operand_def(IndexType)
    b_off = operand_def(IndexType)
    c_off = operand_def(IndexType)
    bias = opt_operand_def(MemRefType)
    sizes = attr_def(ArrayAttr)
    tile = attr_def(ArrayAttr)
    strides = attr_def(ArrayAttr)
    simd = attr_def(IntegerAttr)
    start = opt_attr_def(StringAttr)
    clamp_lo = opt_attr_def(FloatAttr)
    clamp_hi = opt_attr_def(FloatAttr)
    a_taps = opt_attr_def(ArrayAttr)

    def __init__(self, a, b, c, i, j, k, offs, sizes, tile, strides, simd, start=None,
                 bias=None, clamp=(None, None), a_taps=None):
        ints = lambda xs: ArrayAttr([int_attr(x) for x in xs])  # noqa: E731
        attributes = {"sizes": ints(sizes), "tile": ints(tile), "strides": ints(strides),
                      "simd": int_attr(simd)}
        if start is not None:
            attributes["start"] = StringAttr(start)
        for name, bound in zip(("clamp_lo", "clamp_hi"), clamp, strict=True):
            if bound is not None:
                attributes[name] = FloatAttr(float(bound), c.type.element_type)
        if a_taps is not None:
            attributes["a_taps"] = ints(a_taps)
        super().__init__(operands=[a, b, c, i, j, k, *offs, [bias] if bias is not None else []],
                         attributes=attributes)

    @property
    def taps(self) -> list[int] | None:
        """The offsets of `a_taps`, or None (A's columns k * lda_k apart)."""
        return ints_of(self.a_taps) if self.a_taps is not None else None

    def a_column(self, k: int) -> int:
        """Where A's column k starts, relative to a row's start."""
        lda_k = ints_of(self.strides)[1]
        taps = self.taps
        if taps is None:
            return k * lda_k
        return (k // len(taps)) * lda_k + taps[k % len(taps)]

    @property
    def clamp(self) -> tuple[float | None, float | None]:
        """(lo, hi) applied to the finished product, None where unbounded."""
        return tuple(None if a is None else a.value.data for a in (self.clamp_lo, self.clamp_hi))

    @property
    def start_kind(self) -> str | None:
        """None (C accumulates), "zero" or "bias"."""
        return self.start.data if self.start is not None else None

    def verify_(self):
        if len(self.sizes.data) != 3 or len(self.tile.data) != 3 or len(self.strides.data) != 4:
            raise VerifyException("krnl.matmul takes sizes [M, N, K], tile [TM, TN, TK] and "
                                  "strides [A rows, A k, B rows, C rows]")
        if any(s < 0 for s in ints_of(self.sizes)) or any(t < 1 for t in ints_of(self.tile)):
            raise VerifyException(f"krnl.matmul sizes must be >= 0 and tiles >= 1, got sizes "
                                  f"{ints_of(self.sizes)}, tile {ints_of(self.tile)}")
        kind = self.start_kind
        if kind is not None and kind not in MATMUL_STARTS:
            raise VerifyException(f"krnl.matmul start must be one of {MATMUL_STARTS}, got "
                                  f"{kind!r}")
        if (kind == "bias") != (self.bias is not None):
            raise VerifyException('krnl.matmul takes a bias operand exactly when its start is '
                                  '"bias"')
        if self.bias is not None:
            t = self.bias.type
            m = ints_of(self.sizes)[0]
            if t.element_type != self.c.type.element_type or math.prod(t.get_shape()) < m:
                raise VerifyException(f"krnl.matmul: its bias ({t}) must hold at least M = {m} "
                                      f"elements of C's type {self.c.type.element_type}")
        for name, bound in zip(("clamp_lo", "clamp_hi"), self.clamp, strict=True):
            if bound is not None and not math.isfinite(bound):
                raise VerifyException(f"krnl.matmul {name} must be a finite number (leave it "
                                      f"out for no bound), got {bound}")
        if self.a_taps is not None and (not self.a_taps.data or any(
                not isinstance(t, IntegerAttr) for t in self.a_taps.data)):
            raise VerifyException("krnl.matmul a_taps must be a non-empty list of integer "
                                  f"offsets, got {self.a_taps}")
        try:
            check_simd(self.simd.value.data, "krnl.matmul simd")
        except ValueError as e:
            raise VerifyException(str(e)) from None
        _check_bounds(self)


MAX_SIMD = 64  # f32 lanes: AVX-512's 16, with room; the micro-kernel's registers hold 12 vectors


def matmul_block_rows(simd: int, elem_bytes: int = 4) -> int:
    """Rows of the micro-kernel's register block (codegen/microkernel.py) for a target with
    `simd` f32 lanes and elements of `elem_bytes`: 8 with 512-bit vectors (32 registers), else
    6 (MLAS's FMA3 block). The schedule passes cut row tiles in multiples of it."""
    lanes = simd if elem_bytes == 4 else max(1, simd // 2)
    return 8 if lanes * elem_bytes >= 64 else 6


def check_simd(simd, what: str = "simd") -> int:
    """`simd` (the micro-kernel's f32 vector lanes) as an int: a power of two, 1..MAX_SIMD;
    anything else is a ValueError naming `what`. (0 divided the tile widths by zero, 3 gave
    LLVM a vector it cannot build, 10**8 a kernel of gigabytes.)"""
    if isinstance(simd, bool) or not isinstance(simd, int):
        raise ValueError(f"{what} must be a whole number of vector lanes, got {simd!r}")
    if not 1 <= simd <= MAX_SIMD or simd & (simd - 1):
        raise ValueError(f"{what} must be a power of two from 1 to {MAX_SIMD} (the f32 lanes "
                         f"of the target's vectors, e.g. 8 for AVX2), got {simd}")
    return simd


@irdl_op_definition
class CheckOp(IRDLOperation):
    """A run-time guard: when `ok` (i1) is false, the compiled function reports `message` (it
    returns a nonzero status and the session raises `RunError` after the call). Codegen keeps
    going with a safe value, so nothing reads or divides wild before the check is reported.
    Used where input *data* can fault: Gather indices out of range, integer division."""

    name = "krnl.check"
    ok = operand_def(IntegerType)
    message = attr_def(StringAttr)

    def __init__(self, ok, message: str):
        super().__init__(operands=[ok], attributes={"message": StringAttr(message)})

    def verify_(self):
        if self.ok.type != i1:
            raise VerifyException("krnl.check takes an i1 condition")


MAX_THREADS = 1024  # CUDA's limit on the threads of one block (every GPU since sm_20)
GPU_MAP_KINDS = ("flat", "matmul", "split", "serial")


@irdl_attr_definition
class GpuMapAttr(ParametrizedAttribute):
    """How one top-level `krnl.iterate` runs on a GPU (krnl_passes/gpu_map.py writes it, the
    GPU code generator reads it; a hand-edited one is obeyed):

        #krnl.gpu_map<flat, loops = [0, 1], block = 256>   loops 0 and 1 flattened into one
            thread index (the last listed loop fastest), `block` threads per block, the grid
            rounded up to cover every point; the other loops run inside each thread
        #krnl.gpu_map<matmul, loops = [0], tile = 16>      the nest's krnl.matmul as a
            tile x tile thread block per tile of C, A and B staged in shared memory; the listed
            (batch) loops on grid z
        #krnl.gpu_map<split, loops = [0, 1]>               the listed outer loops run on the
            host, one launch per outer point and inner nest (each inner nest has its own map)
        #krnl.gpu_map<serial>                              one thread runs the whole nest

    Loops are positions among the nest's original loops. The verifier checks what can be
    checked without the nest (kinds, distinct loops, 1 <= block <= 1024, tile x tile <= 1024);
    the code generator checks the rest against the nest (positions in range, mapped loops
    independent) before it emits anything."""

    name = "krnl.gpu_map"
    kind: StringAttr
    loops: ArrayAttr[IntAttr]
    block: IntAttr  # threads per block of a flat mapping (0 for the other kinds)
    tile: IntAttr  # the matmul tile edge (0 for the other kinds)

    def __init__(self, kind: str, loops=(), block: int = 0, tile: int = 0):
        super().__init__(StringAttr(kind), ArrayAttr([IntAttr(int(x)) for x in loops]),
                         IntAttr(int(block)), IntAttr(int(tile)))

    @property
    def loop_list(self) -> list[int]:
        return [x.data for x in self.loops.data]

    def verify(self) -> None:
        kind, loops = self.kind.data, self.loop_list
        block, tile = self.block.data, self.tile.data
        what = f"#krnl.gpu_map<{kind}>"
        if kind not in GPU_MAP_KINDS:
            raise VerifyException(f"krnl.gpu_map kind must be one of {', '.join(GPU_MAP_KINDS)}, "
                                  f"got {kind!r}")
        if any(x < 0 for x in loops) or len(set(loops)) != len(loops):
            raise VerifyException(f"{what}: loops must be distinct loop positions (>= 0), got "
                                  f"{loops}")
        if kind == "flat":
            if not loops:
                raise VerifyException(f"{what} maps no loop to threads: use serial")
            if not 1 <= block <= MAX_THREADS:
                raise VerifyException(f"{what}: block must be 1..{MAX_THREADS} threads, got "
                                      f"{block}")
        elif block != 0:
            raise VerifyException(f"{what} takes no block size (only flat does), got {block}")
        if kind == "matmul":
            if tile < 1 or tile * tile > MAX_THREADS:
                raise VerifyException(f"{what}: tile must be >= 1 with tile x tile <= "
                                      f"{MAX_THREADS} threads, got {tile}")
        elif tile != 0:
            raise VerifyException(f"{what} takes no tile (only matmul does), got {tile}")
        if kind == "split" and not loops:
            raise VerifyException(f"{what} splits no loop: use serial")
        if kind == "serial" and loops:
            raise VerifyException(f"{what} maps no loop, got loops {loops}")

    def print_parameters(self, printer: Printer) -> None:
        parts = [self.kind.data]
        if self.loop_list or self.kind.data in ("flat", "split"):
            parts.append(f"loops = [{', '.join(map(str, self.loop_list))}]")
        if self.block.data:
            parts.append(f"block = {self.block.data}")
        if self.tile.data:
            parts.append(f"tile = {self.tile.data}")
        printer.print_string("<" + ", ".join(parts) + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            kind = parser.parse_identifier(" (the gpu_map kind)")
            entries = {"loops": [], "block": 0, "tile": 0}
            seen = set()
            while parser.parse_optional_punctuation(",") is not None:
                key = parser.parse_keyword_in(tuple(entries), " (a gpu_map entry)")
                if key in seen:
                    parser.raise_error(f"gpu_map entry {key!r} given twice")
                seen.add(key)
                parser.parse_punctuation("=")
                if key == "loops":
                    entries[key] = parser.parse_comma_separated_list(
                        parser.Delimiter.SQUARE, lambda: parser.parse_integer(
                            allow_boolean=False))
                else:
                    entries[key] = parser.parse_integer(allow_boolean=False)
        return [StringAttr(kind), ArrayAttr([IntAttr(x) for x in entries["loops"]]),
                IntAttr(entries["block"]), IntAttr(entries["tile"])]


def parallel_loop(it: IterateOp):
    """The krnl.parallel op on `it`'s outermost emitted loop, or None."""
    if not it.emitted:
        return None
    return next((u.operation for u in it.emitted[0].uses
                 if isinstance(u.operation, ParallelOp)), None)


def _loop_arg(it: IterateOp, pos: int):
    """(block argument, span) of the emitted loop at `pos`: the induction variable of its
    original loop, and how many consecutive values of it one iteration stands for (the tile
    of an outer tile loop whose inner loop is not emitted, else None: one)."""
    h = it.emitted[pos]
    tile = None
    while isinstance(h.owner, BlockOp):
        if h is h.owner.outer and h.owner.inner not in it.emitted:
            tile = h.owner.tile.value.data
        h = h.owner.loop
    original = list(it.original)
    if h not in original:
        return None, None
    return it.body.block.args[original.index(h)], tile


def root_buffer(v):
    """The buffer a memref value views (through krnl.reshape)."""
    while isinstance(v.owner, ReshapeOp):
        v = v.owner.source
    return v


def _defined_in(v, it) -> bool:
    """Whether value `v` is defined inside `it`'s body (an op or a block argument there)."""
    op = v.owner.parent_op() if isinstance(v.owner, Block) else v.owner
    while op is not None:
        if op is it:
            return True
        op = op.parent_op()
    return False


def _same(u, v) -> bool:
    """Whether index values u and v are the same expression (one SSA value, or the same op
    on the same operands: lowering may spell one index twice)."""
    if u is v:
        return True
    a, b = u.owner, v.owner
    if isinstance(a, Block) or isinstance(b, Block) or a.name != b.name:
        return False
    if a.name == "arith.constant":
        return a.value == b.value
    return (len(a.operands) == len(b.operands) and a.properties == b.properties
            and all(_same(x, y) for x, y in zip(a.operands, b.operands, strict=True)))


def _fixed(v, it) -> bool:
    """Whether `v` has one value for the whole nest `it`: defined outside it, or integer
    arithmetic inside it on such values (lowering recomputes offsets in the body)."""
    if not _defined_in(v, it):
        return True
    op = v.owner
    if isinstance(op, Block) or op.name not in ("arith.constant", "arith.addi", "arith.subi",
                                                   "arith.muli", "arith.index_cast"):
        return False
    return all(_fixed(w, it) for w in op.operands)


def _follows(v, arg, it) -> bool:
    """Whether index `v` takes a different value for every value of `arg` whatever the nest's
    other loops do: arg itself, arg + (a value fixed for the whole nest), arg * (a nonzero
    constant), and such sums of those."""
    if v is arg:
        return True
    op = v.owner
    if isinstance(op, Block) or op.name not in ("arith.addi", "arith.muli"):
        return False
    x, y = op.operands
    fixed = lambda w: _fixed(w, it)  # noqa: E731
    if op.name == "arith.addi":
        return (_follows(x, arg, it) and fixed(y)) or (_follows(y, arg, it) and fixed(x))
    nonzero = lambda w: (not isinstance(w.owner, Block) and w.owner.name == "arith.constant"  # noqa: E731
                         and w.owner.value.value.data != 0)
    return (_follows(x, arg, it) and nonzero(y)) or (_follows(y, arg, it) and nonzero(x))


def nest_accesses(it: IterateOp) -> tuple[str | None, list]:
    """What `parallel_conflict` reads of nest `it`, collected in one walk of its body (the pass
    tries several loops of one nest): (the name of a run-time check op in it, or None; its
    memory accesses in walk order, each ("element", buffer, memref, indices, writes?) for a
    krnl.load / krnl.store or ("tile", the krnl.matmul, its C offset fixed for the nest?))."""
    out = []
    for op in it.body.walk():
        if isinstance(op, CheckOp) or op.name in ("arith.divsi", "arith.remsi"):
            return op.name, []
        if isinstance(op, LoadOp | StoreOp):
            out.append(("element", root_buffer(op.memref), op.memref, list(op.indices),
                        int(isinstance(op, StoreOp))))
        elif isinstance(op, MatMulOp):
            out.append(("tile", op, _fixed(op.c_off, it)))
    return None, out


def parallel_conflict(it: IterateOp, pos: int, accesses=None) -> str | None:
    """None when different iterations of the emitted loop at `pos` of `it` write disjoint
    memory and read nothing another iteration writes, else why not. Conservative: every
    buffer the nest writes must be indexed, in one dimension of every access to it, by one and
    the same expression that takes a different value for each iteration of the loop (the
    induction variable, plus an offset fixed for the nest, times a constant); a krnl.matmul
    writes whole tiles of C, so the loop must give its i (rows) or j (columns) with a tile no
    wider than what one iteration spans, and its C offset fixed for the nest. A buffer that
    fails this rule may still pass the flat-offset rule (krnl_ranges.py: panels and groups
    that write through offsets, matmul tiles at an offset that moves with the loop). Nests with
    run-time checks (krnl.check, integer division) stay serial: which failure a run reports
    would depend on the thread count. `accesses`: nest_accesses(it), when the caller asks
    about several loops of one nest (made here otherwise)."""
    from compilerkit.dialects.krnl_ranges import flat_conflict

    arg, step = _loop_arg(it, pos)
    if arg is None:
        return "the loop is not one of the nest's original loops"
    check, found = nest_accesses(it) if accesses is None else accesses
    if check is not None:
        return f"the nest has a run-time check ({check})"
    uses_of: dict = {}  # buffer -> [(memref value, index operands, writes?)]
    flat: dict = {}  # buffer -> accesses in krnl_ranges.flat_conflict's form
    tile_ok = True  # every matmul follows the loop by its i or j with a fixed C offset
    for access in found:
        if access[0] == "element":
            _, buf, memref, indices, writes = access
            uses_of.setdefault(buf, []).append((memref, indices, writes))
            flat.setdefault(buf, []).append(("element", memref, indices))
            continue
        _, op, c_fixed = access
        m, n, k = ints_of(op.sizes)
        sa, sk, ldb, ldc = ints_of(op.strides)
        tm, tn, _ = ints_of(op.tile)
        if op.i is arg and tm <= (step or 1):
            dim = "rows"
        elif op.j is arg and tn <= (step or 1):
            dim = "columns"
        else:
            dim, tile_ok = None, False
        if not c_fixed:
            tile_ok = False
        uses_of.setdefault(root_buffer(op.c), []).append((op.c, dim, 1))
        uses_of.setdefault(root_buffer(op.a), []).append((op.a, None, 0))
        uses_of.setdefault(root_buffer(op.b), []).append((op.b, None, 0))
        flat.setdefault(root_buffer(op.c), []).append(("tile", op.c_off, m, ldc, n, 1))
        flat.setdefault(root_buffer(op.a), []).append(("tile", op.a_off, m, sa, k, sk))
        flat.setdefault(root_buffer(op.b), []).append(("tile", op.b_off, k, ldb, n, 1))
    fixed = lambda v: _fixed(v, it)  # noqa: E731
    for buf, uses in uses_of.items():
        if not any(w for _, _, w in uses):
            continue  # read only
        why = _dimension_conflict(buf, uses, arg, it, tile_ok)
        if why is None:
            continue
        trips = it.bound_list()[list(it.body.block.args).index(arg)]
        flat_why = flat_conflict(flat[buf], arg, it, fixed, trips)
        if flat_why is not None:
            name = buf.name_hint or "a buffer"
            return f"{why}; by flat offsets, %{name}: {flat_why}"
    return None


def _dimension_conflict(buf, uses, arg, it, tile_ok) -> str | None:
    """The per-dimension rule of parallel_conflict for one written buffer."""
    name = buf.name_hint or "a buffer"
    if any(isinstance(ix, str) or (ix is None and w) for _, ix, w in uses) and not tile_ok:
        return "a krnl.matmul whose C tile does not follow the loop with a fixed offset"
    if len({id(m) for m, _, _ in uses}) > 1:
        return f"%{name} is accessed through two views"
    if any(isinstance(ix, str) for _, ix, _ in uses):
        kinds = {ix if isinstance(ix, str) else "element" for _, ix, _ in uses}
        if len(kinds) > 1:
            return f"%{name} is written as a krnl.matmul tile and accessed otherwise"
        return None
    if any(ix is None for _, ix, _ in uses):
        return f"%{name} is written and also read as a whole"
    first = uses[0][1]
    common = {d for d, v in enumerate(first) if _follows(v, arg, it)}
    for _, ix, _ in uses[1:]:
        common &= {d for d in common if _same(ix[d], first[d])}
    if not common:
        return f"%{name} is written at indices that do not all follow the loop"
    return None


KRNL = Dialect(
    "krnl",
    [DefineLoopsOp, BlockOp, PermuteOp, UnrollOp, ParallelOp, IterateOp, LoadOp, StoreOp,
     GlobalOp, AllocOp, ReshapeOp, MatMulOp, CheckOp],
    [LoopType, GpuMapAttr],
)
