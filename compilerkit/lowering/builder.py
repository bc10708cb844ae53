"""The helper every lowering uses to emit Kernel IR: loop nests, loads/stores, scalar math
(arith/math ops), index arithmetic, and the broadcasting rule (which input element feeds an
output element)."""

from __future__ import annotations

import functools
from contextlib import contextmanager

from xdsl.dialects import arith, math, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerType,
    MemRefType,
    i1,
)
from xdsl.ir import Block, Region

from compilerkit.dialects import krnl

INDEX = IndexType()


def is_float(elem) -> bool:
    return isinstance(elem, AnyFloat)


def memref_type(shape, elem) -> MemRefType:
    """The memref of `shape` and `elem`, one shared instance per shape and element type (types
    are immutable, and making one took about 25 us)."""
    return _memref_type(tuple(int(d) for d in shape), elem)


@functools.lru_cache(maxsize=1 << 12)
def _memref_type(dims: tuple[int, ...], elem) -> MemRefType:
    return MemRefType(elem, list(dims))


def shape(mem) -> tuple[int, ...]:
    return tuple(mem.type.get_shape())


def strides(dims) -> list[int]:
    out, acc = [], 1
    for d in reversed(list(dims)):
        out.append(acc)
        acc *= d
    return out[::-1]


def chunk_count(blocks: int, most: int, least: int = 1) -> int:
    """How many chunks the threads' loop over `blocks` iterations hands out, where each chunk
    has a slot of scratch buffers that its blocks reuse one after another while it is in
    cache (depthwise.py's phase planes, winograd.py's V, M and temps): the largest divisor of
    `blocks` up to `most` that leaves at least `least` blocks per chunk (1 if none does), an
    even one if there is one (two threads share an even count evenly)."""
    divisors = [d for d in range(1, min(blocks, most) + 1)
                if blocks % d == 0 and blocks // d >= least] or [1]
    even = [d for d in divisors if d % 2 == 0]
    return max(even or divisors)


def fill_outside(b: KernelBuilder, buf, lead, inside, value) -> None:
    """buf[lead..., j...] = `value` wherever some j_d falls outside inside[d] = (lo, hi) (None:
    the whole axis is inside): a padded buffer's border, written a slab per side and axis
    (the corners more than once) so that the inside, which the caller fills, is written once.
    `lead`: index values of buf's leading axes; `inside` covers the rest, one entry each."""
    dims = shape(buf)[len(lead):]
    for d, span in enumerate(inside):
        if span is None:
            continue
        for lo, hi in ((0, span[0]), (span[1], dims[d])):
            if hi > lo:
                with b.nest([(lo, hi) if e == d else n for e, n in enumerate(dims)]) as ivs:
                    b.store(b.const(value, buf.type.element_type), buf, list(lead) + ivs)


class KernelBuilder:
    """Emits Kernel IR into `block`. `conv_algorithm`, `lanes` and `taps` are the lowering's
    compile choices (the options of the `lower-to-krnl` pass): the Conv algorithm asked for
    (lowering/conv_algorithm.py), the target's f32 lanes, which set the width of the strips
    constant matrices are stored in (matmul.strip_width), and whether Convs may take the tap
    schedule (conv_taps.py: products reading A through krnl.matmul's a_taps, which the
    LoopNest generator does not write)."""

    def __init__(self, block: Block, conv_algorithm: str = "auto", lanes: int = 16,
                 taps: bool = True):
        self.block = block
        self.conv_algorithm = conv_algorithm
        self.lanes = lanes
        self.taps = taps

    def add(self, op):
        self.block.add_op(op)
        return op.results[0] if len(op.results) == 1 else op

    # ---- buffers ---------------------------------------------------------------------------
    def alloc(self, dims, elem):
        return self.add(krnl.AllocOp(memref_type(dims, elem)))

    def constant(self, array, module, hint: str, elem):
        """A krnl.global holding `array` (weights the lowering transformed at compile time),
        stored in `module` like the model's own constants, named after `hint`."""
        from compilerkit.dialects import onnx as onnx_d

        attr = onnx_d.dense_attr(array, module, hint)
        name = getattr(getattr(attr, "resource_handle", None), "data", None) or hint
        return self.add(krnl.GlobalOp(name, attr, memref_type(array.shape, elem)))

    def view(self, mem, dims):
        if tuple(dims) == shape(mem):
            return mem
        return self.add(krnl.ReshapeOp(mem, memref_type(dims, mem.type.element_type)))

    def load(self, mem, idx):
        return self.add(krnl.LoadOp(mem, list(idx)))

    def store(self, value, mem, idx):
        self.block.add_op(krnl.StoreOp(value, mem, list(idx)))

    # ---- constants and scalar math ----------------------------------------------------------
    def index(self, n: int):
        return self.add(arith.ConstantOp(krnl.int_attr(int(n), INDEX)))

    def const(self, value, elem):
        if is_float(elem):
            return self.add(arith.ConstantOp(FloatAttr(float(value), elem)))
        if elem == i1:
            return self.add(arith.ConstantOp(krnl.int_attr(int(bool(value)), elem)))
        return self.add(arith.ConstantOp(krnl.int_attr(int(value), elem)))

    def binary(self, kind: str, a, b):
        """kind in add/sub/mul/div/max/min/maxnum; picks the float or integer arith op."""
        f = is_float(a.type)
        op = {
            "add": (arith.AddfOp, arith.AddiOp), "sub": (arith.SubfOp, arith.SubiOp),
            "mul": (arith.MulfOp, arith.MuliOp), "div": (arith.DivfOp, arith.DivSIOp),
            "max": (arith.MaximumfOp, arith.MaxSIOp), "min": (arith.MinimumfOp, arith.MinSIOp),
            # the larger number, a NaN ignored (IEEE maxNum): MaxPool's taps
            "maxnum": (arith.MaxnumfOp, arith.MaxSIOp),
        }[kind][0 if f else 1]
        return self.add(op(a, b))

    def add_(self, a, b):
        return self.binary("add", a, b)

    def mul(self, a, b):
        return self.binary("mul", a, b)

    def fma(self, a, x, y):
        """a * x + y rounded once (math.fma: llvm.fma on every target, as the micro-kernel's
        products are)."""
        return self.add(math.FmaOp(a, x, y))

    def cmpf(self, pred: str, a, b):
        return self.add(arith.CmpfOp(a, b, pred))

    def cmpi(self, pred: str, a, b):
        return self.add(arith.CmpiOp(a, b, pred))

    def select(self, cond, a, b):
        return self.add(arith.SelectOp(cond, a, b))

    def and_(self, a, b):
        return self.add(arith.AndIOp(a, b))

    def unary(self, kind: str, x):
        op = {"exp": math.ExpOp, "log": math.LogOp, "tanh": math.TanhOp, "sqrt": math.SqrtOp,
              "abs": math.AbsFOp, "floor": math.FloorOp, "ceil": math.CeilOp,
              "erf": math.ErfOp}[kind]
        return self.add(op(x))

    def neg(self, x):
        return self.add(arith.NegfOp(x))

    def cast(self, x, elem):
        src = x.type
        if src == elem:
            return x
        if src == i1:  # true is 1, not the signed -1 (codegen has select, no uitofp/extui)
            return self.select(x, self.const(1, elem), self.const(0, elem))
        if elem == i1 and is_float(src):
            return self.cmpf("une", x, self.const(0.0, src))
        if elem == i1 and isinstance(src, IntegerType):
            return self.cmpi("ne", x, self.const(0, src))
        if is_float(src) and isinstance(elem, IntegerType):
            return self.add(arith.FPToSIOp(x, elem))
        if isinstance(src, IntegerType) and is_float(elem):
            return self.add(arith.SIToFPOp(x, elem))
        if is_float(src) and is_float(elem):
            wider = src.bitwidth < elem.bitwidth
            return self.add(arith.ExtFOp(x, elem) if wider else arith.TruncFOp(x, elem))
        if isinstance(src, IntegerType) and isinstance(elem, IntegerType):
            if src.width.data < elem.width.data:
                return self.add(arith.ExtSIOp(x, elem))
            return self.add(arith.TruncIOp(x, elem))
        if isinstance(src, IndexType) or isinstance(elem, IndexType):
            return self.add(arith.IndexCastOp(x, elem))
        raise NotImplementedError(f"cast {src} -> {elem}")

    # ---- index arithmetic -------------------------------------------------------------------
    def affine(self, terms, const: int = 0):
        """sum(iv * coef for iv, coef in terms) + const, as index arithmetic."""
        acc = None
        for iv, coef in terms:
            if coef == 0:
                continue
            t = iv if coef == 1 else self.add(arith.MuliOp(iv, self.index(coef)))
            acc = t if acc is None else self.add(arith.AddiOp(acc, t))
        if acc is None:
            return self.index(const)
        if const:
            acc = self.add(arith.AddiOp(acc, self.index(const)))
        return acc

    def in_range(self, idx_and_limits):
        """i1: every idx in [0, limit). Used to guard padded reads."""
        cond = None
        zero = None
        for idx, limit in idx_and_limits:
            zero = zero or self.index(0)
            lo = self.cmpi("sge", idx, zero)
            hi = self.cmpi("slt", idx, self.index(limit))
            c = self.and_(lo, hi)
            cond = c if cond is None else self.and_(cond, c)
        return cond

    def clamp(self, idx, limit: int):
        """idx clamped into [0, limit-1], so a guarded load never leaves its buffer."""
        lo = self.add(arith.MaxSIOp(idx, self.index(0)))
        return self.add(arith.MinSIOp(lo, self.index(limit - 1)))

    def guarded_load(self, mem, idx, fill):
        """mem[idx] when idx is inside mem, else `fill` (padding)."""
        dims = shape(mem)
        if 0 in dims:
            # An empty buffer (a Slice that kept nothing) has no element to read: every index
            # is outside it, and a clamped load would still address element 0 of nothing.
            return self.const(fill, mem.type.element_type)
        cond = self.in_range(list(zip(idx, dims, strict=True)))
        safe = [self.clamp(i, d) for i, d in zip(idx, dims, strict=True)]
        value = self.load(mem, safe)
        if cond is None:
            return value
        return self.select(cond, value, self.const(fill, mem.type.element_type))

    # ---- loops ------------------------------------------------------------------------------
    @contextmanager
    def if_then(self, cond):
        """Ops built inside the `with` run only when the i1 `cond` holds (an scf.if without
        results; codegen branches around it)."""
        body = Block()
        saved, self.block = self.block, body
        try:
            yield
        finally:
            self.block = saved
        body.add_op(scf.YieldOp())
        self.block.add_op(scf.IfOp(cond, [], Region([body])))

    @contextmanager
    def nest(self, bounds):
        """A krnl.iterate over `bounds` ([(lo, hi)] or [hi]); yields the induction variables."""
        bounds = [(0, b) if isinstance(b, int) else tuple(b) for b in bounds]
        loops = []
        if bounds:
            define = krnl.DefineLoopsOp(len(bounds))
            self.block.add_op(define)
            loops = list(define.results)
        body = Block(arg_types=[INDEX] * len(bounds))
        self.block.add_op(krnl.IterateOp(loops, loops, bounds, Region(body)))
        saved, self.block = self.block, body
        try:
            yield list(body.args)
        finally:
            self.block = saved


def broadcast_index(b: KernelBuilder, ivs, in_dims, zero=None):
    """Indices into an input of shape in_dims broadcast (numpy rules) to the output indexed by
    ivs: leading output dims are dropped, size-1 dims read index 0."""
    offset = len(ivs) - len(in_dims)
    out = []
    for k, d in enumerate(in_dims):
        if d == 1:
            zero = zero or b.index(0)
            out.append(zero)
        else:
            out.append(ivs[offset + k])
    return out
