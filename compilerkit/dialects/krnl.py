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
`krnl.iterate` must agree with it (the verifier checks).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, Region, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException


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
        super().__init__(result_types=[[LoopType() for _ in range(n)]])


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
                         attributes={"tile": IntegerAttr(tile, i64)})

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
                         attributes={"map": ArrayAttr([IntegerAttr(d, i64) for d in order])})

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
class IterateOp(IRDLOperation):
    """A loop nest over the emitted loops; block arguments are the original induction vars."""

    name = "krnl.iterate"
    loops = var_operand_def(LoopType)
    bounds = attr_def(ArrayAttr)
    n_original = attr_def(IntegerAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())

    def __init__(self, original, emitted, bounds: list[tuple[int, int]], body: Region):
        super().__init__(
            operands=[list(original) + list(emitted)],
            attributes={
                "bounds": ArrayAttr([ArrayAttr([IntegerAttr(lo, i64), IntegerAttr(hi, i64)])
                                     for lo, hi in bounds]),
                "n_original": IntegerAttr(len(original), i64),
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


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads one element of a memref at full indices."""

    name = "krnl.load"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    res = result_def()

    def __init__(self, memref, indices):
        super().__init__(operands=[memref, list(indices)],
                         result_types=[memref.type.element_type])

    def verify_(self):
        if len(self.indices) != len(self.memref.type.get_shape()):
            raise VerifyException("krnl.load needs one index per memref dimension")
        if self.res.type != self.memref.type.element_type:
            raise VerifyException(f"krnl.load of a {self.memref.type} yields "
                                  f"{self.memref.type.element_type}, not {self.res.type}")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes one element of a memref at full indices."""

    name = "krnl.store"
    value = operand_def()
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    def __init__(self, value, memref, indices):
        super().__init__(operands=[value, memref, list(indices)])

    def verify_(self):
        if len(self.indices) != len(self.memref.type.get_shape()):
            raise VerifyException("krnl.store needs one index per memref dimension")
        if self.value.type != self.memref.type.element_type:
            raise VerifyException(f"krnl.store of a {self.value.type} value into a "
                                  f"{self.memref.type}")


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
        super().__init__(result_types=[type_])

    def verify_(self):
        if any(d < 0 for d in self.res.type.get_shape()):
            raise VerifyException(f"krnl.alloc needs a static shape, got {self.res.type}")


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """A view of a buffer with another static shape of the same size (no copy)."""

    name = "krnl.reshape"
    source = operand_def(MemRefType)
    res = result_def(MemRefType)

    def __init__(self, source, type_: MemRefType):
        super().__init__(operands=[source], result_types=[type_])

    def verify_(self):
        a, b = self.source.type, self.res.type
        if math.prod(a.get_shape()) != math.prod(b.get_shape()) or (
                a.element_type != b.element_type):
            raise VerifyException(f"krnl.reshape views a {a} as a {b}: a view must keep the "
                                  "element count and type")


@irdl_op_definition
class MatMulOp(IRDLOperation):
    """A tile-level matrix-multiply micro-kernel (onnx-mlir's krnl.matmul):

    C[ci + r*ldc + c] += A[ai + r*lda_r + k*lda_k] * B[bi + k*ldb + c]
    for r in [i, min(i+TM, M)), c in [j, min(j+TN, N)), k in [k0, min(k0+TK, K)),
    where ai, bi, ci are element offsets (batch) into the flat buffers. B and C rows are
    contiguous, so the kernel is emitted with `simd`-wide vectors along c.
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
    sizes = attr_def(ArrayAttr)
    tile = attr_def(ArrayAttr)
    strides = attr_def(ArrayAttr)
    simd = attr_def(IntegerAttr)

    def __init__(self, a, b, c, i, j, k, offs, sizes, tile, strides, simd):
        ints = lambda xs: ArrayAttr([IntegerAttr(x, i64) for x in xs])  # noqa: E731
        super().__init__(operands=[a, b, c, i, j, k, *offs], attributes={
            "sizes": ints(sizes), "tile": ints(tile), "strides": ints(strides),
            "simd": IntegerAttr(simd, i64)})


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


def ints_of(attr: ArrayAttr) -> list[int]:
    return [a.value.data for a in attr.data]


KRNL = Dialect(
    "krnl",
    [DefineLoopsOp, BlockOp, PermuteOp, UnrollOp, IterateOp, LoadOp, StoreOp, GlobalOp,
     AllocOp, ReshapeOp, MatMulOp, CheckOp],
    [LoopType],
)
