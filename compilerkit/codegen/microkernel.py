"""The matmul micro-kernel, emitted once per (element type, vector width, variant) and shared
by every `krnl.matmul` of the model.

    void ck_matmul_<t>_v<simd>[_unit](A, B, C, i0, i1, j0, j1, k0, k1, a_off, b_off, c_off,
                               sa_r, sa_k, ldb, ldc, bias, start, kend, clamp, lo, hi,
                               a_table)
    C[c_off + r*ldc + c] += A[a_off + r*sa_r + k*sa_k] * B[b_off + k*ldb + c]
    for r in [i0, i1), c in [j0, j1), k in [k0, k1)

`a_table` (krnl.matmul's `a_taps`; null without): A's k-th column is at a_table[k] instead of
k*sa_k, one table entry per k shared by all rows. A Conv's taps then read the zero-bordered
input planes in place (row r an output position, k a channel and kernel tap), no im2col copy.

Two variants (`kernel_rows`), each built when a product first calls it: "general" (any
strides) and "unit", for A's rows one element apart (sa_r == 1: the tap schedule's and the
transposed GEMMs' output positions), which reads every column through a table (the taps', or
k*sa_k) and holds WIDE_ROWS rows per register block. A model compiles only what it calls (each
variant is about 4,500 instructions for LLVM), and the host backend keeps their machine code
for the process (backends/split.py, HELPER_OBJECTS).

`start` (START_CODES: krnl.matmul's `start`) 0: C holds what the sum adds to; 1 ("zero") and
2 ("bias"): when the call begins the product (k0 == 0), the register block's accumulators
start from 0 or from bias[r] instead of from C, which is then only written. (A fill of the
whole output before the product, a Conv's bias or a MatMul's zeros, was a pass over memory of
its own; filling the tile just before summing into it still wrote C once more and read it
back.) `clamp` (CLAMP_LO | CLAMP_HI bits: krnl.matmul's clamp_lo / clamp_hi; `lo`, `hi` are
-inf / +inf where there is no bound) applies max(., lo) then min(., hi) to the accumulators as
they are stored when the call ends the product (k1 == kend): a Conv's fused Relu or Clip,
without an epilogue pass that reads the output back. Same sums, same ops on them: the same
bits.

Sizes and strides are run-time arguments, so one function serves every Conv/Gemm/MatMul tile:
LLVM optimises it once instead of once per op (inlining a vectorised kernel into each op made
-O3 compile times grow with the number of layers).

The body follows onnxruntime's MLAS SGEMM (sgemm.cpp, SgemmKernelFma3.S):
- the tile's panel of B (k x n) is packed into a stack buffer, NR = 2 vectors wide: strip s
  holds B[k, j0 + s*NR : j0 + (s+1)*NR] for every k, contiguous, so the inner loop reads B
  sequentially from L1/L2 whatever `ldb` is (a power-of-two ldb no longer thrashes one cache
  set). The last, narrower strip is zero-padded. Packing pays only when several row blocks
  reuse the panel (rows >= PACK_MIN_ROWS); otherwise full strips read B in place.
- a register block of MR = 6 rows x NR columns: 12 vector accumulators, 2 B vectors and 1
  broadcast of A fill AVX2's 16 ymm registers; each k does 2 vector loads, 6 broadcasts and
  12 FMAs. With 512-bit vectors (AVX-512: 32 registers) the block has 8 rows,
  16 accumulators: fewer B loads per FMA (GEMMs of ResNet-50's and DenseNet-121's shapes
  1.00-1.08x faster, the models 3-5%). Not 12 rows as MLAS's AVX-512 kernel has with any
  row stride: rows are addressed in groups of three off one pointer each (MLAS's
  addressing), and more rows (beside B's, k's and the bounds) overflowed the 16 general
  registers; LLVM then spilled (a 64-channel 3x3 Conv ran 1.35x slower). Rows one element
  apart (the "unit" variant) hang off one pointer, so their block has WIDE_ROWS = 13 rows
  (26 accumulators). Row blocks walk the whole panel (A's rows stay in L1, the panel in L2),
  leftover rows take 8- (after 13), 4-, 2- and 1-row blocks; a narrow column strip works on
  a copy of C's corner.
- a full register block over a packed strip runs k K_UNROLL at a time (as MLAS's
  ComputeBlockLoop does by 4), the rest of k one at a time;
- in the general variant the inner k loop comes twice: for a packed strip (B's row stride the
  constant NR, so the loads take fixed offsets) and for B read in place (any `ldb`); the
  unit variant always packs (or reads W^T's strips, already packed).
- the panel is at most PANEL elements (128 KiB of f32): a larger tile is cut into pieces of
  at most KMAX k and PANEL / k columns, so a hand-written tile of any size cannot overflow the
  stack. The buffer is per call, on the stack: concurrent calls from threads share nothing.
- two shapes take their own path, as in MLAS: one row (x @ W, a classifier's MatMul) streams
  B's rows 4 at a time into the C row (`one_row`); one contiguous column (W @ x, a 1x1 conv on
  1x1 pixels) takes dot products along k (`dot_rows`).

Every C element is a chain of fused multiply-adds over k in increasing order, starting from
the value C holds: packing, blocking and vector width do not change a single bit (AVX2 and
AVX-512 hosts, 4-lane s390x/ppc64 targets agree bit for bit). The one exception, the
one-column dot products, sums in an order fixed in bytes (DOT_LANES), the same on every
target.
"""

from __future__ import annotations

import re

import llvmlite.ir as ir

from compilerkit.dialects.krnl import matmul_block_rows

I64 = ir.IntType(64)
MR, NV = 6, 2  # accumulator block: MR rows x NV vectors (MLAS's FMA3 kernel: 6 x 16 floats)
ROW_TAILS = (4, 2, 1)  # blocks for the rows left over after the full row blocks
# Rows of the register block when A's rows are one element apart (sa_r == 1) on a target with
# 32 vector registers (512-bit vectors): all rows hang off one pointer (no general registers
# per row), so 13 rows x 2 vectors = 26 accumulators, beside B's vectors and a broadcast.
# 14 rows (28 accumulators) left too few registers once k went K_UNROLL at a time (LLVM loads
# the B vectors of two k ahead): two accumulators were spilled to the stack and reloaded at
# every k. 1 thread, AVX-512, in one process, 14 -> 13 rows: 1x1 576 -> 96 at 14 x 14 0.161 ->
# 0.137 ms, 320 -> 1280 at 7 x 7 0.309 -> 0.277, the tap schedule's 16 -> 64 3x3 at 55 x 55
# 0.437 -> 0.407; models 1.03-1.07x (DenseNet-121 1.05x, ResNet-50 1.00-1.02x). 12 rows ran
# as fast as 13.
WIDE_ROWS = 13
PANEL = 32768  # packed-B elements on the stack (128 KiB of f32, 256 KiB of f64)
KMAX = 2048  # longest k run packed at once (and at most PANEL / NR)
DOT_LANES = 32  # bytes of A and B per vector in the N = 1 dot products (fixed: see dot_rows)
# k per trip of a full register block's loop over a packed strip (`_micro`): the walk of
# A's and B's pointers and the loop's count and branch are paid once per K_UNROLL k (MLAS's
# kernels unroll k by 4). 1 thread, AVX-512, in one process, GF/s with 1 -> 4: MatMul 1024^3
# 144 -> 160, 196 x 2304 x 256 135 -> 157, 169 x 512 x 1000 146 -> 162 (onnxruntime 157, 167,
# 166); ResNet-50 1.05x, DenseNet-121 1.02x. 8 was no faster; a software prefetch of B a few
# lines ahead (MLAS's prefetcht0, 256 or 512 bytes) gained nothing measurable: the hardware's
# prefetcher already follows a strip. What it does not do is fetch the next panel (NEXT_PANEL).
K_UNROLL = 4
# Where B is read in place from strips stored one after another (a Conv's W^T strips, Winograd's
# transformed weights), every k of a register block also prefetches the same row of the next
# panel, `kc` rows further on: the next k piece of the strip or the next strip, which the next
# call (or piece) reads. Inside a model a layer's weights come from memory, not cache: the
# first row block waited on every line of its panel, and the other row blocks, computing from
# cache, left memory idle. Prefetched into L2 (`NEXT_PANEL_LOCALITY`, prefetcht1; t0 and t2
# measured the same) while the current panel's row blocks compute, the next panel's lines are
# there when its first row block starts. 1 thread, AVX-512, caches flushed before each call,
# ms, without -> with: F(2, 3) 512 -> 512 at 7 x 7 2.63 -> 1.90, 256 -> 256 at 14 x 14
# 1.44 -> 1.23; 1x1 2048 -> 512 at 7 x 7 0.99 -> 0.85, 512 -> 2048 1.05 -> 0.89; the models,
# calls interleaved in one process: ResNet-50 56.0 -> 51.5, MobileNetV2 7.30 -> 7.02,
# DenseNet-121 44.7 -> 44.0, SqueezeNet 5.92 -> 5.82 (EfficientNet-B0 and the 3D U-Net the
# same within noise). A prefetch changes no value: the same bits.
NEXT_PANEL = True
NEXT_PANEL_LOCALITY = 2
PACK_MIN_ROWS = 4 * MR  # fewer rows read B in place (measured: packing pays from ~4 row blocks)


def counted_loop(b: ir.IRBuilder, lo, hi, step, body):
    """for (iv = lo; iv < hi; iv += step) body(iv); returns the induction variable (its value
    after the loop is the first index not visited)."""
    pre = b.block
    head = b.append_basic_block("loop")
    inner = b.append_basic_block("body")
    done = b.append_basic_block("done")
    b.branch(head)
    b.position_at_end(head)
    iv = b.phi(I64)
    iv.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", iv, hi), inner, done)
    b.position_at_end(inner)
    body(iv)
    iv.add_incoming(b.add(iv, step), b.block)
    b.branch(head)
    b.position_at_end(done)
    return iv


def fmuladd(module, vt):
    """llvm.fmuladd for a vector type or (no `count`) a scalar type."""
    element = getattr(vt, "element", vt)
    suffix = "f32" if element == ir.FloatType() else "f64"
    name = f"llvm.fmuladd.{f'v{vt.count}' if hasattr(vt, 'count') else ''}{suffix}"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(vt, [vt, vt, vt]), name)


START_CODES = {None: 0, "zero": 1, "bias": 2}  # krnl.matmul `start` -> the kernel's argument
CLAMP_LO, CLAMP_HI = 1, 2  # bits of the kernel's `clamp` argument: which bounds apply


def clamp_code(bounds) -> int:
    """The kernel's `clamp` argument for krnl.matmul's (lo, hi) bounds (None: unbounded)."""
    lo, hi = bounds
    return (CLAMP_LO if lo is not None else 0) | (CLAMP_HI if hi is not None else 0)


def minmax(module, kind: str, t):
    """llvm.maximum / llvm.minimum (NaN-propagating, -0 < +0: ONNX Relu's and Clip's, as
    codegen/emit.py lowers arith.maximumf) for a scalar or vector type `t`."""
    element = getattr(t, "element", t)
    suffix = "f32" if element == ir.FloatType() else "f64"
    name = f"llvm.{kind}.{f'v{t.count}' if hasattr(t, 'count') else ''}{suffix}"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(t, [t, t]), name)


def clamp_value(b: ir.IRBuilder, module, v, code, lo, hi):
    """v clamped as krnl.matmul's clamp: max(v, lo) where `code` has CLAMP_LO, then min(., hi)
    where it has CLAMP_HI. `code` an i64 value (the kernel's argument, selects) or an int (a
    compile-time choice); lo and hi values of v's type."""
    for bit, kind, bound in ((CLAMP_LO, "maximum", lo), (CLAMP_HI, "minimum", hi)):
        if isinstance(code, int):
            if code & bit:
                v = b.call(minmax(module, kind, v.type), [v, bound])
            continue
        on = b.icmp_signed("!=", b.and_(code, ir.Constant(I64, bit)), ir.Constant(I64, 0))
        v = b.select(on, b.call(minmax(module, kind, v.type), [v, bound]), v)
    return v


def lanes_for(elem_t, simd: int) -> int:
    """Vector lanes for `elem_t` on a target with `simd` f32 lanes: the same register width."""
    return simd if elem_t == ir.FloatType() else max(1, simd // 2)


def block_rows(elem_t, lanes: int) -> int:
    """Rows of the micro-kernel's register block for `lanes`-wide vectors of `elem_t`
    (krnl.matmul_block_rows, which the schedule passes read too)."""
    esize = 4 if elem_t == ir.FloatType() else 8
    return matmul_block_rows(lanes if esize == 4 else 2 * lanes, esize)


ROWS = ("general", "unit")  # the kernel's variants (matmul_kernel's `rows`)


UNIT_TABLE_MAX = 1 << 16  # longest sum given the "unit" variant (its table: 8 bytes per k)


def kernel_rows(sa_r: int, k: int) -> str:
    """Which variant of the kernel a krnl.matmul with A's row stride `sa_r` and K = `k` calls:
    "unit" (rows one element apart: the tap schedule's and the transposed GEMMs' output
    positions; A's columns always by a table, codegen/emit.py's `a_table`: the taps' or
    k * sa_k) or "general" (any strides; a table with other row strides goes row by row)."""
    return "unit" if sa_r == 1 and k <= UNIT_TABLE_MAX else "general"


def matmul_kernel(module: ir.Module, elem_t, simd: int, rows: str = "general") -> ir.Function:
    """The shared kernel for `elem_t` (float or double) with `simd` f32 lanes and A's rows as
    `rows` says (ROWS, `kernel_rows`), built on first use: a model compiles only the variants
    its products call (each is a few thousand instructions for LLVM to optimise)."""
    if rows not in ROWS:
        raise ValueError(f"matmul kernel rows must be one of {ROWS}, got {rows!r}")
    suffix = "" if rows == "general" else f"_{rows}"
    name = f"ck_matmul_{'f32' if elem_t == ir.FloatType() else 'f64'}_v{simd}{suffix}"
    if name in module.globals:
        return module.globals[name]
    p = elem_t.as_pointer()
    ftype = ir.FunctionType(ir.VoidType(), [p, p, p] + [I64] * 13 + [p, I64]
                            + [I64, I64, elem_t, elem_t, I64.as_pointer()])
    key = (name, str(elem_t), simd, rows, MR, NV, ROW_TAILS, WIDE_ROWS, PANEL, KMAX, DOT_LANES,
           PACK_MIN_ROWS, K_UNROLL, NEXT_PANEL, NEXT_PANEL_LOCALITY)
    kept = _BODIES.get(key)
    if kept is not None:
        body, intrinsics = kept
        fn = _PrintedFunction(module, ftype, name, body)
        for iname, itype in intrinsics:  # declared after it, as its build declares them
            if iname not in module.globals:
                ir.Function(module, itype, iname)
    else:
        fn = ir.Function(module, ftype, name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    for k in range(3):
        fn.args[k].add_attribute("noalias")  # C never overlaps A or B (distinct buffers)
    if kept is None:
        _Body(module, fn, elem_t, lanes_for(elem_t, simd), rows).emit()
        buf = []
        fn.descr_body(buf)
        body = "".join(buf)
        used = set(_INTRINSIC.findall(body))
        intrinsics = [(n, g.ftype) for n, g in module.globals.items() if n in used]
        if len(_BODIES) < BODIES_MAX:
            _BODIES[key] = (body, intrinsics)
    return fn


# Each kernel's body as LLVM IR text, kept from its first build in this process, by its name,
# element type, lanes, variant and the block sizes above: building and printing a variant cost
# about 0.1 s of Python in every compile (a fifth of a small model's), for the same text each
# time. Later compiles print the kept text (_PrintedFunction); the host backend then finds the
# partition's machine code in backends/split.HELPER_OBJECTS as well.
_BODIES: dict = {}
BODIES_MAX = 16
_INTRINSIC = re.compile(r'@"?(llvm\.[\w.]+)"?\(')


class _PrintedFunction(ir.Function):
    """A kernel whose body is text kept from an earlier build (`_BODIES`): one empty block makes
    it a definition (`is_declaration` is False), and printing it writes the kept body. A
    partition that only declares it (backends/split.py) empties `blocks` and prints none."""

    def __init__(self, module, ftype, name, body: str):
        super().__init__(module, ftype, name)
        self.body_text = body
        self.append_basic_block("entry")

    def descr_body(self, buf):
        buf.append(self.body_text)


class _Body:
    """Emits the kernel's body into `fn` (see the module docstring for the algorithm)."""

    def __init__(self, module, fn, elem_t, lanes, rows):
        self.fn, self.elem = fn, elem_t
        # "unit" assumes sa_r == 1 and a table (its caller, codegen/emit.py, knows the strides)
        self.unit = rows == "unit"
        self.lanes, self.nr = lanes, NV * lanes
        self.esize = 4 if elem_t == ir.FloatType() else 8
        self.mr = block_rows(elem_t, lanes)
        self.wide = WIDE_ROWS if lanes * self.esize >= 64 and self.unit else self.mr
        self.vt = ir.VectorType(elem_t, lanes)
        self.fma = fmuladd(module, self.vt)
        self.scalar_fma = fmuladd(module, elem_t)
        self.entry = fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)

    def c(self, v):
        return ir.Constant(I64, v)

    def alloca(self, t, count=None, align=None):
        # Fixed-size allocas in the entry block: SROA turns the accumulators into registers,
        # and the packed panel is one stack frame slot (no stack growth inside loops).
        b = self.b
        with b.goto_block(self.entry):
            b.position_at_start(self.entry)
            out = b.alloca(t, size=count)
            if align:
                out.align = align
            return out

    def vload(self, ptr, align):
        return self.b.load(self.b.bitcast(ptr, self.vt.as_pointer()), align=align)

    def vstore(self, val, ptr, align):
        self.b.store(val, self.b.bitcast(ptr, self.vt.as_pointer()), align=align)

    def emit(self):
        b, c = self.b, self.c
        (self.A, self.B, self.C, i0, i1, j0, j1, k0, k1, self.a_off, self.b_off, self.c_off,
         self.sa_r, self.sa_k, self.ldb, self.ldc, self.bias, start, kend, self.clamp_code,
         lo, hi, self.a_table) = self.fn.args
        self.i0, self.i1 = i0, i1
        self.from_bias = b.icmp_signed("==", start, c(2))
        self.tabled = b.icmp_unsigned("!=", b.ptrtoint(self.a_table, I64), c(0))
        # this call begins the product (its accumulators start from 0 or the bias) / ends it
        # (they are clamped as they are stored)
        fresh = b.and_(b.icmp_signed("!=", start, c(0)), b.icmp_signed("==", k0, c(0)))
        final = b.and_(b.icmp_signed("!=", self.clamp_code, c(0)), b.icmp_signed("==", k1, kend))
        self.lo, self.hi = self.splat(lo), self.splat(hi)
        self.lo_s, self.hi_s = lo, hi
        self.panel = self.alloca(self.elem, c(PANEL + self.nr), align=64)
        self.ctile = self.alloca(self.elem, c(self.wide * self.nr), align=64)
        # B rows exactly one strip wide are a packed strip already (conv.py's W^T strips);
        # rows one element apart always pack (their blocks then read B at one stride only)
        self.pack = b.icmp_signed("!=", self.ldb, c(self.nr))
        # a product one vector wide with B's rows one vector apart (the tap schedule's W^T in
        # strips of one vector, for 16 output channels on AVX-512): `half_rows`
        self.half = (b.and_(b.icmp_signed("==", self.ldb, c(self.lanes)),
                            b.icmp_signed("==", b.sub(j1, j0), c(self.lanes)))
                     if self.unit else None)
        if not self.unit:
            self.pack = b.and_(b.icmp_signed(">=", b.sub(i1, i0), c(PACK_MIN_ROWS)), self.pack)
        # The two special shapes start and clamp their tile in passes of their own (in cache).
        with b.if_then(b.icmp_signed("==", b.sub(i1, i0), c(1))):
            with b.if_then(fresh):
                self.start_tile(i0, i1, j0, j1)
            self.one_row(k0, k1, j0, j1)
            with b.if_then(final):
                self.clamp_tile(i0, i1, j0, j1)
            b.ret_void()
        column = b.and_(b.and_(b.icmp_signed("==", b.sub(j1, j0), c(1)),
                               b.not_(self.tabled)),
                        b.and_(b.icmp_signed("==", self.sa_k, c(1)),
                               b.icmp_signed("==", self.ldb, c(1))))
        if not self.unit:
            with b.if_then(column):
                with b.if_then(fresh):
                    self.start_tile(i0, i1, j0, j1)
                self.dot_rows(k0, k1, j0)
                with b.if_then(final):
                    self.clamp_tile(i0, i1, j0, j1)
                b.ret_void()
        # A table with rows not one element apart (no lowering makes one; the register
        # blocks' tabled loops are the "unit" variant's): row by row.
        with b.if_then(self.tabled if not self.unit else ir.Constant(ir.IntType(1), 0)):
            with b.if_then(fresh):
                self.start_tile(i0, i1, j0, j1)
            counted_loop(b, i0, i1, c(1), lambda r: self.one_row(k0, k1, j0, j1, row=r))
            with b.if_then(final):
                self.clamp_tile(i0, i1, j0, j1)
            b.ret_void()
        kmax = min(KMAX, PANEL // self.nr)

        def k_piece(kb):
            kc = self.imin(b.sub(k1, kb), c(kmax))
            ends = (b.and_(fresh, b.icmp_signed("==", kb, k0)),
                    b.and_(final, b.icmp_signed("==", b.add(kb, kc), k1)))
            # Columns per piece: as many whole strips as fit the panel with this k (>= 1).
            ncb = b.mul(self.imax(b.sdiv(b.sdiv(c(PANEL), kc), c(self.nr)), c(1)), c(self.nr))
            counted_loop(b, j0, j1, ncb, lambda jb: self.piece(
                kb, kc, jb, self.imin(b.sub(j1, jb), ncb), ends))

        counted_loop(b, k0, k1, c(kmax), k_piece)
        b.ret_void()

    def row_start(self, r):
        """The value row r's product starts from: bias[r] or 0 (read only when from_bias)."""
        b = self.b
        value = self.alloca(self.elem)
        b.store(ir.Constant(self.elem, 0.0), value)
        with b.if_then(self.from_bias):
            b.store(b.load(b.gep(self.bias, [r])), value)
        return b.load(value)

    def start_tile(self, i0, i1, j0, j1):
        """C[r, j0:j1] = bias[r] or 0 for r in [i0, i1): the product begins (the one-row and
        one-column paths, which sum into C as it is)."""
        b, c, lanes = self.b, self.c, self.lanes

        def row(r):
            v = self.row_start(r)
            splat = self.splat(v)
            base = b.add(self.c_off, b.mul(r, self.ldc))
            jv = counted_loop(b, j0, b.sub(j1, c(lanes - 1)), c(lanes),
                              lambda j: self.vstore(splat, b.gep(self.C, [b.add(base, j)]),
                                                    self.esize))
            counted_loop(b, jv, j1, c(1), lambda j: b.store(v, b.gep(self.C, [b.add(base, j)])))

        counted_loop(b, i0, i1, c(1), row)

    def clamp_tile(self, i0, i1, j0, j1):
        """C[r, j0:j1] clamped in place for r in [i0, i1): the product ended (the one-row and
        one-column paths)."""
        b, c, lanes = self.b, self.c, self.lanes

        def row(r):
            base = b.add(self.c_off, b.mul(r, self.ldc))

            def vec(j):
                p = b.gep(self.C, [b.add(base, j)])
                self.vstore(self.clamp(self.vload(p, self.esize), self.lo, self.hi), p,
                            self.esize)

            def one(j):
                p = b.gep(self.C, [b.add(base, j)])
                b.store(self.clamp(b.load(p), self.lo_s, self.hi_s),
                        p)

            jv = counted_loop(b, j0, b.sub(j1, c(lanes - 1)), c(lanes), vec)
            counted_loop(b, jv, j1, c(1), one)

        counted_loop(b, i0, i1, c(1), row)

    def one_row(self, k0, k1, j0, j1, row=None):
        """A single row (x @ W, as a classifier's MatMul): C[j0:j1] += A[k] * B[k, j0:j1] for
        k in order, streaming B's rows front to back (as MLAS's M = 1 kernel) while the C row
        stays in L1. Each C element still sees its k in increasing order."""
        b, c, lanes = self.b, self.c, self.lanes
        row = self.i0 if row is None else row
        a_row = b.add(self.a_off, b.mul(row, self.sa_r))
        c_row = b.add(self.c_off, b.mul(row, self.ldc))

        def ks(k, unroll):
            # `unroll` rows of B per pass over C: C's vector stays in a register across them.
            kus = [b.add(k, c(u)) for u in range(unroll)]
            ss = [b.load(b.gep(self.A, [b.add(a_row, self.a_column(ku))])) for ku in kus]
            splats = [self.splat(s) for s in ss]
            b_rows = [b.add(self.b_off, b.mul(ku, self.ldb)) for ku in kus]

            def vec(j):
                cp = b.gep(self.C, [b.add(c_row, j)])
                acc = self.vload(cp, self.esize)
                for splat, b_row in zip(splats, b_rows, strict=True):
                    bv = self.vload(b.gep(self.B, [b.add(b_row, j)]), self.esize)
                    acc = b.call(self.fma, [splat, bv, acc])
                self.vstore(acc, cp, self.esize)

            jv = counted_loop(b, j0, b.sub(j1, c(lanes - 1)), c(lanes), vec)

            def scalar(j):
                cp = b.gep(self.C, [b.add(c_row, j)])
                acc = b.load(cp)
                for s, b_row in zip(ss, b_rows, strict=True):
                    acc = b.call(self.scalar_fma, [s, b.load(b.gep(self.B, [b.add(b_row, j)])),
                                                   acc])
                b.store(acc, cp)

            counted_loop(b, jv, j1, c(1), scalar)

        kv = counted_loop(b, k0, b.sub(k1, c(3)), c(4), lambda k: ks(k, 4))
        counted_loop(b, kv, k1, c(1), lambda k: ks(k, 1))

    def dot_rows(self, k0, k1, j):
        """One contiguous column of B and C (a 1x1 conv on 1x1 pixels, W @ x): C[r, j] +=
        A[r, k0:k1] . B[k0:k1, j], vectorised along k as MLAS does for N = 1, 4 rows at a time.
        The sum order is fixed by DOT_LANES, not by the target's `simd`: 2 vectors of
        DOT_LANES bytes of partial sums per row, added to each other, halved down to one
        value, added to C, then the k left over (fewer than 2 vectors) as fused multiply-adds;
        every target computes the same bits."""
        b, c = self.b, self.c
        lanes = DOT_LANES // self.esize
        dvt = ir.VectorType(self.elem, lanes)
        fma = fmuladd(self.fn.module, dvt)
        k_vec = b.add(k0, b.mul(b.sdiv(b.sub(k1, k0), c(2 * lanes)), c(2 * lanes)))

        def load(ptr):
            return b.load(b.bitcast(ptr, dvt.as_pointer()), align=self.esize)

        def rows_of(rows, ii):
            a_rows = [b.add(self.a_off, b.mul(b.add(ii, c(r)), self.sa_r)) for r in range(rows)]
            accs = [[self.alloca(dvt) for _ in range(2)] for _ in range(rows)]
            for r in range(rows):
                for v in range(2):
                    b.store(ir.Constant(dvt, [0.0] * lanes), accs[r][v])

            def ks(k):
                bvs = [load(b.gep(self.B, [b.add(self.b_off, b.add(k, c(v * lanes)))]))
                       for v in range(2)]
                for r in range(rows):
                    for v in range(2):
                        av = load(b.gep(self.A, [b.add(a_rows[r], b.add(k, c(v * lanes)))]))
                        b.store(b.call(fma, [av, bvs[v], b.load(accs[r][v])]), accs[r][v])

            counted_loop(b, k0, k_vec, c(2 * lanes), ks)
            for r in range(rows):
                v = b.fadd(b.load(accs[r][0]), b.load(accs[r][1]))
                width = lanes
                while width > 1:
                    width //= 2
                    lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), width),
                                                            list(range(width))))
                    hi = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), width),
                                                            list(range(width, 2 * width))))
                    v = b.fadd(lo, hi)
                cp = b.gep(self.C, [b.add(self.c_off, b.add(b.mul(b.add(ii, c(r)), self.ldc), j))])
                acc = self.alloca(self.elem)
                b.store(b.fadd(b.load(cp), b.extract_element(v, ir.Constant(ir.IntType(32), 0))),
                        acc)

                def tail(k, r=r, acc=acc):
                    av = b.load(b.gep(self.A, [b.add(a_rows[r], k)]))
                    bv = b.load(b.gep(self.B, [b.add(self.b_off, k)]))
                    b.store(b.call(self.scalar_fma, [av, bv, b.load(acc)]), acc)

                counted_loop(b, k_vec, k1, c(1), tail)
                b.store(b.load(acc), cp)

        ii = counted_loop(b, self.i0, b.sub(self.i1, c(3)), c(4), lambda ii: rows_of(4, ii))
        counted_loop(b, ii, self.i1, c(1), lambda ii: rows_of(1, ii))

    def a_column(self, k):
        """Where A's column k starts: k*sa_k, or the table's entry (the one-row path's)."""
        b = self.b
        at = self.alloca(I64)
        b.store(b.mul(k, self.sa_k), at)
        with b.if_then(self.tabled):
            b.store(b.load(b.gep(self.a_table, [k])), at)
        return b.load(at)

    def clamp(self, v, lo, hi):
        """min(max(v, lo), hi): the kernel's bounds are -inf / +inf where krnl.matmul has
        none, which leave every value as it is (NaN and -0 too), so no test of which bounds
        apply (`clamp_value`'s selects) per register."""
        module = self.fn.module
        v = self.b.call(minmax(module, "maximum", v.type), [v, lo])
        return self.b.call(minmax(module, "minimum", v.type), [v, hi])

    def splat(self, s):
        b, vt = self.b, self.vt
        return b.shuffle_vector(
            b.insert_element(ir.Constant(vt, None), s, ir.Constant(ir.IntType(32), 0)),
            ir.Constant(vt, None), ir.Constant(ir.VectorType(ir.IntType(32), self.lanes), None))

    def imin(self, x, y):
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    def imax(self, x, y):
        return self.b.select(self.b.icmp_signed(">", x, y), x, y)

    def piece(self, kb, kc, jb, nc, ends):
        """C[i0:i1, jb:jb+nc] += A[i0:i1, kb:kb+kc] @ B[kb:kb+kc, jb:jb+nc]; `ends` (i1
        values): this piece begins the product, ends it."""
        b = self.b
        if self.unit:
            with b.if_else(self.half) as (half, whole):
                with half:
                    self.half_rows(kb, kc, jb, ends)
                with whole:
                    self._piece(kb, kc, jb, nc, ends)
            return
        self._piece(kb, kc, jb, nc, ends)

    def _piece(self, kb, kc, jb, nc, ends):
        """`piece` in strips of NR columns."""
        b, c, nr = self.b, self.c, self.nr
        nfull = b.sdiv(nc, c(nr))
        tail = b.sub(nc, b.mul(nfull, c(nr)))
        strip = b.mul(kc, c(nr))  # elements of one packed strip
        # Pack the full strips when the rows repay it, the narrow last strip always (zero
        # padding lets it use the full-width register block).
        with b.if_then(self.pack):
            self.pack_full(kb, kc, jb, nfull, strip)
        with b.if_then(b.icmp_signed(">", tail, c(0))):
            self.pack_strip(kb, kc, b.add(jb, b.mul(nfull, c(nr))), tail, b.mul(nfull, strip))
        args = (kb, kc, jb, nfull, tail, strip, ends)
        # Rows one element apart take the wide block where it fits (see WIDE_ROWS).
        tails = ((self.mr,) if self.wide > self.mr else ()) + ROW_TAILS
        self.row_blocks(self.wide, tails,
                        lambda rows, ii: self.row_block(rows, ii, *args, self.unit))

    def half_rows(self, kb, kc, jb, ends):
        """`piece` for one vector of columns, B's rows one vector apart (read in place), rows
        one element apart: register blocks of twice WIDE_ROWS rows x one vector, the same
        accumulators as the two-vector blocks (26 on AVX-512), each k one B vector and a
        broadcast per row. Through the NR-wide strips (W^T zero-padded to 32 columns) a
        16-channel Conv computed twice its products. 1 thread, AVX-512, the tap schedule,
        ms NR-wide -> one vector: the 3D U-Net's 3x3x3 4 -> 16 at 64^3 14.4 -> 9.3, 16 -> 16
        at 32^3 6.63 -> 4.39, 3x3 16 -> 16 at 56 x 56 0.229 -> 0.140, 8 -> 16 at 112 x 112
        0.497 -> 0.311. Same sums in the same k order: the same bits."""
        b, c = self.b, self.c
        tails = (self.wide,) + ((self.mr,) if self.wide > self.mr else ()) + ROW_TAILS

        def block(rows, ii):
            starts = [self.row_start(b.add(ii, c(r))) for r in range(rows)]
            a_base = [b.add(self.a_off, b.add(ii, c(r))) for r in range(rows)]
            a_rows = ([b.add(a, b.mul(kb, self.sa_k)) for a in a_base], a_base, kb)
            bptr = b.gep(self.B, [b.add(self.b_off, b.add(b.mul(kb, self.ldb), jb))])
            cptr = b.gep(self.C, [b.add(b.add(self.c_off, b.mul(ii, self.ldc)), jb)])
            self.micro(rows, a_rows, kc, bptr, c(self.lanes), cptr, self.ldc,
                       (ends[0], ends[1], starts), True, nv=1, ahead=b.mul(kc, c(self.lanes)))

        self.row_blocks(2 * self.wide, tails, block)

    def row_blocks(self, first, tails, block):
        """`block(rows, ii)` for blocks of `first` rows over [i0, i1), then at most one block
        of each of `tails` (fewer rows each) for the rows left over."""
        b, c = self.b, self.c
        ii = counted_loop(b, self.i0, b.sub(self.i1, c(first - 1)), c(first),
                          lambda ii: block(first, ii))
        for r in tails:
            cur = ii
            more = b.icmp_signed("<=", b.add(cur, c(r)), self.i1)
            pre = b.block
            with b.if_then(more):
                block(r, cur)
                grown = b.add(cur, c(r))
                then_block = b.block
            ii = b.phi(I64)
            ii.add_incoming(grown, then_block)
            ii.add_incoming(cur, pre)

    def pack_full(self, kb, kc, jb, nfull, strip):
        """panel[s*strip + k*NR + x] = B[kb + k, jb + s*NR + x] for the nfull full strips,
        walking B's rows front to back (row segments read in order stream from memory; a
        strip-by-strip walk reads one cache line per row and waits on each)."""
        b, c, nr = self.b, self.c, self.nr

        def row(k):
            src = b.add(self.b_off, b.add(b.mul(b.add(kb, k), self.ldb), jb))
            dst = b.mul(k, c(nr))

            def one(s):
                for v in range(NV):
                    o = c(v * self.lanes)
                    self.vstore(self.vload(b.gep(self.B, [b.add(b.add(src, b.mul(s, c(nr))), o)]),
                                           self.esize),
                                b.gep(self.panel, [b.add(b.add(dst, b.mul(s, strip)), o)]),
                                self.esize * self.lanes)

            counted_loop(b, c(0), nfull, c(1), one)

        counted_loop(b, c(0), kc, c(1), row)

    def pack_strip(self, kb, kc, j, width, dest):
        """panel[dest + k*NR + x] = B[kb + k, j + x] for x < width, 0 for width <= x < NR."""
        b, c = self.b, self.c
        full = b.icmp_signed("==", width, c(self.nr))

        def row(k):
            src = b.add(self.b_off, b.add(b.mul(b.add(kb, k), self.ldb), j))
            dst = b.add(dest, b.mul(k, c(self.nr)))
            with b.if_else(full) as (then, other):
                with then:
                    for v in range(NV):
                        o = c(v * self.lanes)
                        self.vstore(self.vload(b.gep(self.B, [b.add(src, o)]), self.esize),
                                    b.gep(self.panel, [b.add(dst, o)]), self.esize * self.lanes)
                with other:  # (a loop each: the narrow strip is one per panel)
                    counted_loop(b, c(0), width, c(1), lambda x: b.store(
                        b.load(b.gep(self.B, [b.add(src, x)])),
                        b.gep(self.panel, [b.add(dst, x)])))
                    counted_loop(b, width, c(self.nr), c(1), lambda x: b.store(
                        ir.Constant(self.elem, 0.0), b.gep(self.panel, [b.add(dst, x)])))

        counted_loop(b, c(0), kc, c(1), row)

    def row_block(self, rows, ii, kb, kc, jb, nfull, tail, strip, ends, unit):
        """Rows ii..ii+rows over every strip of the piece (`unit`: see `_micro`)."""
        b, c, nr = self.b, self.c, self.nr
        # the rows' start values, read once for all strips (used when the piece begins)
        starts = [self.row_start(b.add(ii, c(r))) for r in range(rows)]
        ends = (ends[0], ends[1], starts)
        # A's rows where the piece's k begins (and, for a table, where k = 0 is: the table
        # holds whole column offsets)
        a_base = [b.add(self.a_off, b.mul(b.add(ii, c(r)), self.sa_r)) for r in range(rows)]
        a_rows = ([b.add(a, b.mul(kb, self.sa_k)) for a in a_base], a_base, kb)
        c_row = b.add(self.c_off, b.mul(ii, self.ldc))

        def full_strip(s):
            j = b.add(jb, b.mul(s, c(nr)))
            packed = b.gep(self.panel, [b.mul(s, strip)])
            direct = b.gep(self.B, [b.add(self.b_off, b.add(b.mul(kb, self.ldb), j))])
            bptr = b.select(self.pack, packed, direct)
            # unpacked B with unit rows is a strip read in place (ldb == NR): see `pack`
            bstride = c(nr) if unit else b.select(self.pack, c(nr), self.ldb)
            # the next panel follows this one where B's strips are read in place (after the
            # stack panel: nothing to fetch; `ahead` 0 skips the prefetches)
            ahead = b.select(self.pack, c(0), b.mul(kc, c(nr)))
            self.micro(rows, a_rows, kc, bptr, bstride, b.gep(self.C, [b.add(c_row, j)]),
                       self.ldc, ends, unit, ahead=ahead)

        counted_loop(b, c(0), nfull, c(1), full_strip)
        with b.if_then(b.icmp_signed(">", tail, c(0))):
            # The narrow strip: work on a copy of C's corner, then write back `tail` columns.
            j = b.add(jb, b.mul(nfull, c(nr)))
            self.corner(rows, c_row, j, tail, to_tile=True)
            bptr = b.gep(self.panel, [b.mul(nfull, strip)])
            if unit:
                # (no lowering gives rows one element apart a narrow strip: their B is W^T in
                # whole strips; the zero-padded full width keeps the code small)
                self.micro(rows, a_rows, kc, bptr, c(nr), self.ctile, c(nr), ends, unit)
                self.corner(rows, c_row, j, tail, to_tile=False)
                return
            # At most one vector of columns left (49 = 3 x 16 + 1): one vector per row.
            with b.if_else(b.icmp_signed("<=", tail, c(self.lanes))) as (narrow, wide):
                with narrow:
                    self.micro(rows, a_rows, kc, bptr, c(nr), self.ctile, c(nr), ends, unit,
                               nv=1)
                with wide:
                    self.micro(rows, a_rows, kc, bptr, c(nr), self.ctile, c(nr), ends, unit)
            self.corner(rows, c_row, j, tail, to_tile=False)

    def corner(self, rows, c_row, j, width, to_tile):
        """C's corner (rows x `width` columns from j) to or from the tile copy."""
        b, c = self.b, self.c

        def row(r):
            def col(x):
                cp = b.gep(self.C, [b.add(c_row, b.add(b.mul(r, self.ldc), b.add(j, x)))])
                tp = b.gep(self.ctile, [b.add(b.mul(r, c(self.nr)), x)])
                if to_tile:
                    b.store(b.load(cp), tp)
                else:
                    b.store(b.load(tp), cp)

            counted_loop(b, c(0), width, c(1), col)

        counted_loop(b, c(0), c(rows), c(1), row)

    def micro(self, rows, a_rows, kc, bptr, bstride, cptr, cstride, ends, unit, nv=NV,
              ahead=None):
        """The register block: C[r, 0:nv*lanes] (at cptr, row stride cstride) +=
        sum_k A[r, k] * Bstrip[k, 0:nv*lanes] (at bptr, row stride bstride), k in [0, kc).
        `ends` (begins, finishes, the rows' start values): a block that begins the product
        starts from the start values instead of C; one that finishes it is clamped.
        `ahead`: elements from a row of B to the same row of the next panel, prefetched with
        it (NEXT_PANEL) where B's row stride is the constant one of strips; 0 or None: none."""
        b, c = self.b, self.c
        if isinstance(bstride, ir.Constant):
            return self._micro(rows, a_rows, kc, bptr, bstride, cptr, cstride, ends, unit, nv,
                               ahead)
        with b.if_else(b.icmp_signed("==", bstride, c(self.nr))) as (packed, direct):
            with packed:
                self._micro(rows, a_rows, kc, bptr, c(self.nr), cptr, cstride, ends, unit, nv,
                            ahead)
            with direct:
                self._micro(rows, a_rows, kc, bptr, bstride, cptr, cstride, ends, unit, nv)

    def prefetch(self, ptr):
        """llvm.prefetch of the line at `ptr` for reading, into NEXT_PANEL_LOCALITY."""
        b, i32, i8p = self.b, ir.IntType(32), ir.IntType(8).as_pointer()
        module = self.fn.module
        fn = module.globals.get("llvm.prefetch.p0i8") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8")
        b.call(fn, [b.bitcast(ptr, i8p), ir.Constant(i32, 0),
                    ir.Constant(i32, NEXT_PANEL_LOCALITY), ir.Constant(i32, 1)])

    def _micro(self, rows, a_rows, kc, bptr, bstride, cptr, cstride, ends, unit, nv,
               ahead=None):
        """`micro`'s body for B's row stride `bstride`. `unit`: the rows are one element
        apart (sa_r == 1)."""
        b, c, vt = self.b, self.c, self.vt
        begins, finishes, starts = ends
        a_rows, a_base, kb = a_rows
        accs = [[self.alloca(vt) for _ in range(nv)] for _ in range(rows)]
        cps = [[b.gep(cptr, [b.add(b.mul(c(r), cstride), c(v * self.lanes))])
                for v in range(nv)] for r in range(rows)]
        with b.if_else(begins) as (fresh, summing):
            with fresh:
                for r in range(rows):
                    splat = self.splat(starts[r])
                    for v in range(nv):
                        b.store(splat, accs[r][v])
            with summing:
                for r in range(rows):
                    for v in range(nv):
                        b.store(self.vload(cps[r][v], self.esize), accs[r][v])

        # Addresses walk by pointer increments, not k * stride: the kernel is one function
        # for every call site, so the strides are run-time values, and a product per k and
        # a pointer per row (8 rows, beside B's, the table's and the bounds) overflowed the
        # 16 general registers; LLVM then spilled the row pointers and reloaded them every k
        # (8 loads more per 16 FMAs; 1 thread, AVX-512: a 1024^3 MatMul 135 -> 143 GF/s,
        # 480 x 256 x 128 168 -> 182 GF/s with the walk below). As MLAS's kernels, rows go
        # in groups of three off one pointer each, row g + m at [p_g + m * sa_r] (x86's
        # scaled index: m * 4 bytes is 4 or 8), so 8 rows take 3 pointers and the stride.
        # Rows one element apart (the "unit" variant: the tap schedule's and the transposed
        # GEMMs' output positions) all hang off one pointer at fixed displacements, and their
        # columns come from the table, one entry per k (the tap schedule's 128 -> 32 3x3 Conv
        # at 56 x 56: 1.86 -> 1.45 ms with its wide row blocks).
        b_at = self.alloca(bptr.type)
        b.store(bptr, b_at)
        # a full register block over a packed strip takes k K_UNROLL at a time
        full = (K_UNROLL > 1 and isinstance(bstride, ir.Constant) and nv == NV
                and rows == (self.wide if unit else self.mr))

        # the next panel's lines of each B row (a line is 64 bytes)
        lines = (range(0, nv * self.lanes, max(1, 64 // self.esize))
                 if NEXT_PANEL and ahead is not None else ())

        def ks(ps):
            brow = b.load(b_at)
            bvs = [self.vload(b.gep(brow, [c(v * self.lanes)]), self.esize) for v in range(nv)]
            for r in range(rows):
                if unit:
                    at = b.gep(ps[0], [c(r)]) if r else ps[0]
                else:
                    at = (b.gep(ps[r // 3], [b.mul(c(r % 3), self.sa_r)]) if r % 3
                          else ps[r // 3])
                splat = self.splat(b.load(at))
                for v in range(nv):
                    b.store(b.call(self.fma, [splat, bvs[v], b.load(accs[r][v])]), accs[r][v])
            b.store(b.gep(brow, [bstride]), b_at)

        def prefetch_next(count):
            # The next panel's rows for the trip's `count` k, in a block of their own (taken
            # where there is a next panel): in the block of the loads and multiply-adds, LLVM's
            # scheduler hoisted the trip's 32 broadcasts above them and spilled 15 to the stack
            # (test_matmul_kernel's register test).
            if not lines:
                return
            with b.if_then(b.icmp_signed("!=", ahead, c(0))):
                brow = b.load(b_at)
                for u in range(count):
                    for x in lines:
                        self.prefetch(b.gep(brow, [b.add(ahead, c(u * bstride.constant + x))]))

        if unit:
            table_at = self.alloca(self.a_table.type)
            base = b.gep(self.A, [a_base[0]])
            b.store(b.gep(self.a_table, [kb]), table_at)

            def step(k):
                prefetch_next(1)
                entry = b.load(table_at)
                ks([b.gep(base, [b.load(entry)])])
                b.store(b.gep(entry, [c(1)]), table_at)

            def steps(k):  # K_UNROLL table entries per trip
                prefetch_next(K_UNROLL)
                entry = b.load(table_at)
                for u in range(K_UNROLL):
                    ks([b.gep(base, [b.load(b.gep(entry, [c(u)]))])])
                b.store(b.gep(entry, [c(K_UNROLL)]), table_at)

            if full:
                self._k_loop(kc, step, steps)
            else:
                counted_loop(b, c(0), kc, c(1), step)
        else:
            group_at = [self.alloca(self.A.type) for _ in range(0, rows, 3)]
            for g, at in zip(range(0, rows, 3), group_at, strict=True):
                b.store(b.gep(self.A, [a_rows[g]]), at)

            def step(k):
                prefetch_next(1)
                ps = [b.load(at) for at in group_at]
                ks(ps)
                for at, p in zip(group_at, ps, strict=True):
                    b.store(b.gep(p, [self.sa_k]), at)

            def steps(k):  # A's columns adjacent (sa_k == 1): at fixed displacements
                prefetch_next(K_UNROLL)
                ps = [b.load(at) for at in group_at]
                for u in range(K_UNROLL):
                    ks([b.gep(p, [c(u)]) for p in ps])
                for at, p in zip(group_at, ps, strict=True):
                    b.store(b.gep(p, [c(K_UNROLL)]), at)

            if full:
                with b.if_else(b.icmp_signed("==", self.sa_k, c(1))) as (adjacent, strided):
                    with adjacent:
                        self._k_loop(kc, step, steps)
                    with strided:
                        counted_loop(b, c(0), kc, c(1), step)
            else:
                counted_loop(b, c(0), kc, c(1), step)
        self._finish(rows, nv, accs, cps, finishes)

    def _k_loop(self, kc, step, steps):
        """k in [0, kc): `steps(k)` for K_UNROLL of them at a time, then `step(k)` for the
        rest (the same k order, so the same chains of fused multiply-adds)."""
        b, c = self.b, self.c
        whole = b.mul(b.sdiv(kc, c(K_UNROLL)), c(K_UNROLL))
        counted_loop(b, c(0), whole, c(K_UNROLL), steps)
        counted_loop(b, whole, kc, c(1), step)

    def _finish(self, rows, nv, accs, cps, finishes):
        """Store the register block (clamped when the call ends the product)."""
        b = self.b
        with b.if_then(finishes):
            for r in range(rows):
                for v in range(nv):
                    b.store(self.clamp(b.load(accs[r][v]), self.lo, self.hi), accs[r][v])
        for r in range(rows):
            for v in range(nv):
                self.vstore(b.load(accs[r][v]), cps[r][v], self.esize)
