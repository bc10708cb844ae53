"""`krnl.matmul` tile nests -> tile loops in the IR's order around a register-blocked AVX2 +
FMA micro-kernel.

The nest (after krnl_passes/tile_matmul: `j_o, k_o, i_o` stepping by the tile) is emitted as the
IR schedules it; each tile calls a kernel shared by every matmul of the model with the same
strides (`kernel(sa_r, sa_k, ldb, ldc)`), which computes, for runtime extents m, n, k,

    C[r*ldc + c] += A[r*sa_r + kk*sa_k] * B[kk*ldb + c]   r < m, c < n, kk < k

as blocks of MR = 6 rows x 16 columns (12 ymm accumulators; per kk two vector loads of B, one
broadcast of A per row, 12 FMAs: BLIS's 6x16 AVX2 shape); leftover rows use the same blocks
with 5..1 rows. With at least PACK_MIN_ROWS rows (several row blocks reuse B) and a panel of at
most PANEL elements (every -O3 tile), B's tile is first copied to the stack as 16-column strips
(the last zero-padded, read with masked loads), so the inner loop reads B sequentially whatever
ldb is (MLAS's packing, as the LLVM path's kernel does); the last strip's C columns are loaded
and stored masked. Otherwise B is read in place: 16-column blocks, one of 8, then a masked block
for the last n % 8 columns (vmaskmovps: no lane past the row's end is touched). Each C element
accumulates kk in increasing order with one FMA per step, as LLVM's micro-kernel
(llvm.fmuladd) does, so both generators give the same bits.
A nest left untiled (-O2: loops i, j, k with tile [1, 1, 1]) is one kernel call over the whole
product (each element's sum keeps its order). Strides, sizes and tile extents are static:
every address the kernel can form is checked against its buffer before code is written.

Kernel ABI: rsi = &A, rdx = &B, rcx = &C (first element of the tile), r8 = m, r9 = n, r10 = k;
clobbers rax, rbx, rbp, r11-r15 and all ymm registers (callers save the callee-saved ones in
their prologue); keeps rdi and rsp; uses up to 128 KiB of stack.
"""

from __future__ import annotations

import itertools

from xdsl.dialects.builtin import Float32Type

from compilerkit.dialects import krnl
from compilerkit.loopnest.affine import Affine, Unsupported, interval
from compilerkit.loopnest.asm import GPR, YMM, Asm
from compilerkit.loopnest.frame import RAX, Frame, check_imm
from compilerkit.loopnest.leaf import lane_mask

MR, NR = 6, 16
PACK_MIN_ROWS = 4 * MR  # fewer rows read B in place (as the LLVM path's kernel measured)
PANEL = 32768  # packed-B elements on the stack: 128 KiB
RBP, RSP = GPR["rbp"], GPR["rsp"]
RSI, RDX, RCX, R8, R9, R10 = (GPR[r] for r in ("rsi", "rdx", "rcx", "r8", "r9", "r10"))
RBX, R11, R12, R13, R14, R15 = (GPR[r] for r in ("rbx", "r11", "r12", "r13", "r14", "r15"))
MASK, A_REG = YMM[15], YMM[14]


def kernel_name(strides) -> str:
    return "ck_ln_matmul_" + "_".join(str(s) for s in strides)


def _packs(m: int, n: int, k: int) -> bool:
    """The kernel's own test: several row blocks reuse B's panel, and the panel fits."""
    return m >= PACK_MIN_ROWS and -(-n // NR) * k <= PANEL // NR


def kernel(strides, extents) -> Asm:
    """The micro-kernel for (sa_r, sa_k, ldb, ldc) (elements), holding only the paths its
    calls take: `extents` is the set of (m, n, k) its call sites pass (static sizes and tiles,
    so the set is exact). A 256^3 product needs the packed path's 6-row block and one
    remainder, not every row count for every column case (1,317 instructions down to about
    a hundred: this kernel's encoding was most of a matmul's compile time)."""
    sa_r, sa_k, ldb, ldc = (4 * s for s in strides)
    for s in (sa_r, sa_k, ldb, ldc):
        check_imm(MR * s, "matmul")
    live = [e for e in extents if min(e) > 0]
    packed = [e for e in live if _packs(*e)]
    unpacked = [e for e in live if not _packs(*e)]
    a = Asm()
    done = a.label()
    a.op("TEST_RM64_R64", R10, R10)
    a.jump("JLE_REL32_64", done)
    a.op("TEST_RM64_R64", R9, R9)
    a.jump("JLE_REL32_64", done)
    other = a.label()
    if packed:
        if unpacked:  # the same test as _packs, at run time
            a.op("CMP_RM64_IMM32", R8, PACK_MIN_ROWS)
            a.jump("JL_REL32_64", other)
            a.op("LEA_R64_M", RAX, Asm.mem(R9, disp=NR - 1))
            a.op("SHR_RM64_IMM8", RAX, 4)
            a.op("IMUL_R64_RM64", RAX, R10)
            a.op("CMP_RM64_IMM32", RAX, PANEL // NR)
            a.jump("JG_REL32_64", other)
        _packed(a, sa_r, sa_k, ldb, ldc, packed)
        a.op("RETNQ")
    a.bind(other)
    if unpacked:
        ns = {n for _, n, _ in unpacked}
        _row_blocks(a, lambda r: _columns(a, r, sa_r, sa_k, ldb, ldc, ns), sa_r, ldc, done,
                    {m for m, _, _ in unpacked})
    else:
        a.bind(done)
    a.op("RETNQ")
    return a


def _row_blocks(a: Asm, block, sa_r, ldc, done, ms):
    """Rows of A and C in blocks of MR (r8 rows left, rsi and rcx advanced per block), then one
    jump to the block code for the 1..MR-1 rows left; `block(r)` writes the code for r rows,
    for the row counts `ms` can leave. Binds `done` after them."""
    rows, rem = a.label(), a.label()
    if max(ms) >= MR:
        a.bind(rows)
        a.op("CMP_RM64_IMM32", R8, MR)
        a.jump("JL_REL32_64", rem)
        block(MR)
        a.op("ADD_RM64_IMM32", RSI, MR * sa_r)
        a.op("ADD_RM64_IMM32", RCX, MR * ldc)
        a.op("SUB_RM64_IMM32", R8, MR)
        a.jump("JMP_REL32_64", rows)
    a.bind(rem)
    left = sorted({m % MR for m in ms} - {0}, reverse=True)
    labels = {}
    for r in left:
        labels[r] = a.label()
        a.op("CMP_RM64_IMM32", R8, r)
        a.jump("JE_REL32_64", labels[r])
    a.jump("JMP_REL32_64", done)
    for r in left:
        a.bind(labels[r])
        block(r)
        a.jump("JMP_REL32_64", done)
    a.bind(done)


def _packed(a: Asm, sa_r, sa_k, ldb, ldc, extents):
    """B's k x n tile copied to the stack as 16-column strips (strip s: B[kk, 16s:16s+16] for
    every kk, contiguous; the last strip zero-padded, read from B with masked loads), then
    row blocks over the strips: B is read sequentially whatever ldb is (MLAS's packing).
    Uses rbp to restore rsp."""
    ns = {n for _, n, _ in extents}
    full, tail = max(ns) >= NR, any(n % NR for n in ns)
    a.op("MOV_R64_RM64", RBP, RSP)
    a.op("SUB_RM64_IMM32", RSP, 4 * PANEL + 64)
    a.op("AND_RM64_IMM32", RSP, -64)
    a.op("MOV_R64_RM64", R11, RSP)  # write pointer
    a.op("MOV_R64_RM64", R13, RDX)  # B column
    a.op("MOV_R64_RM64", RBX, R9)  # columns left
    strips, last, packed = a.label(), a.label(), a.label()
    if full:
        a.bind(strips)
        a.op("CMP_RM64_IMM32", RBX, NR)
        a.jump("JL_REL32_64", last)
        _copy_strip(a, ldb, masked=False)
        a.op("ADD_RM64_IMM32", R13, 4 * NR)
        a.op("SUB_RM64_IMM32", RBX, NR)
        a.jump("JMP_REL32_64", strips)
    a.bind(last)
    if tail:
        a.op("TEST_RM64_R64", RBX, RBX)
        a.jump("JE_REL32_64", packed)
        _masks(a, RBX, YMM[14], YMM[15])
        _copy_strip(a, ldb, masked=True)
    a.bind(packed)
    a.op("MOV_R64_RM64", R11, R10)
    a.op("SHL_RM64_IMM8", R11, 6)  # bytes per strip: k * 64
    _row_blocks(a, lambda r: _strips(a, r, sa_r, sa_k, ldc, full, tail), sa_r, ldc, a.label(),
                {m for m, _, _ in extents})
    a.op("MOV_R64_RM64", RSP, RBP)


def _masks(a: Asm, count, lo, hi):
    """lo, hi = the lane masks of the first `count` (1..15) of 16 columns."""
    table = a.const(b"".join(lane_mask(8) for _ in range(2)) + b"".join(lane_mask(0)
                                                                       for _ in range(2)))
    a.op("LEA_R64_M", RAX, table)
    a.op("MOV_RM64_IMM32", R12, NR)
    a.op("SUB_R64_RM64", R12, count)
    a.op("LEA_R64_M", RAX, Asm.mem(RAX, R12, 4))
    a.op("VEX_VMOVUPS_YMM_YMMM256", lo, Asm.mem(RAX))
    a.op("VEX_VMOVUPS_YMM_YMMM256", hi, Asm.mem(RAX, disp=32))


def _copy_strip(a: Asm, ldb, masked: bool):
    """k rows of 16 floats from B (r13, stride ldb) to the buffer (r11, advanced)."""
    a.op("MOV_R64_RM64", RAX, R13)
    a.op("MOV_R64_RM64", R12, R10)
    top = a.label()
    a.bind(top)
    for v in range(2):
        if masked:
            a.op("VEX_VMASKMOVPS_YMM_YMM_M256", YMM[v], YMM[14 + v], Asm.mem(RAX, disp=32 * v))
        else:
            a.op("VEX_VMOVUPS_YMM_YMMM256", YMM[v], Asm.mem(RAX, disp=32 * v))
        a.op("VEX_VMOVUPS_YMMM256_YMM", Asm.mem(R11, disp=32 * v), YMM[v])
    a.op("ADD_RM64_IMM32", RAX, ldb)
    a.op("ADD_RM64_IMM32", R11, 64)
    a.op("DEC_RM64", R12)
    a.jump("JNE_REL32_64", top)


def _strips(a: Asm, rows: int, sa_r, sa_k, ldc, full: bool, tail: bool):
    """All strips of `rows` rows against the packed panel (rsp): full strips (if some n has
    them), then the last one with masked C loads and stores (its B columns past n are zeros;
    if some n has a tail)."""
    top, last, end = a.label(), a.label(), a.label()
    a.op("MOV_R64_RM64", RBX, R9)
    a.op("MOV_R64_RM64", R13, RSP)
    a.op("MOV_R64_RM64", R14, RCX)
    if full:
        a.bind(top)
        a.op("CMP_RM64_IMM32", RBX, NR)
        a.jump("JL_REL32_64", last)
        _packed_block(a, rows, sa_r, sa_k, ldc, masked=False)
        a.op("ADD_R64_RM64", R13, R11)
        a.op("ADD_RM64_IMM32", R14, 4 * NR)
        a.op("SUB_RM64_IMM32", RBX, NR)
        a.jump("JMP_REL32_64", top)
    a.bind(last)
    if tail:
        a.op("TEST_RM64_R64", RBX, RBX)
        a.jump("JE_REL32_64", end)
        _packed_block(a, rows, sa_r, sa_k, ldc, masked=True)
    a.bind(end)


def _packed_block(a: Asm, rows: int, sa_r, sa_k, ldc, masked: bool):
    acc = [[YMM[r * 2 + v] for v in range(2)] for r in range(rows)]
    b0, b1 = YMM[12], YMM[13]
    if masked:
        _masks(a, RBX, b0, b1)
    for r in range(rows):
        for v in range(2):
            m = Asm.mem(R14, disp=r * ldc + 32 * v)
            if masked:
                a.op("VEX_VMASKMOVPS_YMM_YMM_M256", acc[r][v], (b0, b1)[v], m)
            else:
                a.op("VEX_VMOVUPS_YMM_YMMM256", acc[r][v], m)
    a.op("MOV_R64_RM64", R15, RSI)
    a.op("MOV_R64_RM64", RAX, R13)
    a.op("MOV_R64_RM64", R12, R10)
    top = a.label()
    a.bind(top)
    a.op("VEX_VMOVUPS_YMM_YMMM256", b0, Asm.mem(RAX))
    a.op("VEX_VMOVUPS_YMM_YMMM256", b1, Asm.mem(RAX, disp=32))
    for r in range(rows):
        a.op("VEX_VBROADCASTSS_YMM_M32", A_REG, Asm.mem(R15, disp=r * sa_r))
        for v in range(2):
            a.op("VEX_VFMADD231PS_YMM_YMM_YMMM256", acc[r][v], A_REG, (b0, b1)[v])
    a.op("ADD_RM64_IMM32", R15, sa_k)
    a.op("ADD_RM64_IMM32", RAX, 64)
    a.op("DEC_RM64", R12)
    a.jump("JNE_REL32_64", top)
    if masked:
        _masks(a, RBX, b0, b1)
    for r in range(rows):
        for v in range(2):
            m = Asm.mem(R14, disp=r * ldc + 32 * v)
            if masked:
                a.op("VEX_VMASKMOVPS_M256_YMM_YMM", m, (b0, b1)[v], acc[r][v])
            else:
                a.op("VEX_VMOVUPS_YMMM256_YMM", m, acc[r][v])


def _columns(a: Asm, rows: int, sa_r, sa_k, ldb, ldc, ns):
    """All columns of `rows` rows: 16-wide blocks, one 8-wide, one masked (each only if some
    n in `ns` has it)."""
    c16, c8, cm, end = a.label(), a.label(), a.label(), a.label()
    a.op("MOV_R64_RM64", RBX, R9)
    a.op("MOV_R64_RM64", R13, RDX)
    a.op("MOV_R64_RM64", R14, RCX)
    if max(ns) >= NR:
        a.bind(c16)
        a.op("CMP_RM64_IMM32", RBX, NR)
        a.jump("JL_REL32_64", c8)
        _block(a, rows, 2, False, sa_r, sa_k, ldb, ldc)
        a.op("ADD_RM64_IMM32", R13, 64)
        a.op("ADD_RM64_IMM32", R14, 64)
        a.op("SUB_RM64_IMM32", RBX, NR)
        a.jump("JMP_REL32_64", c16)
    a.bind(c8)
    if any(n % NR >= 8 for n in ns):
        a.op("CMP_RM64_IMM32", RBX, 8)
        a.jump("JL_REL32_64", cm)
        _block(a, rows, 1, False, sa_r, sa_k, ldb, ldc)
        a.op("ADD_RM64_IMM32", R13, 32)
        a.op("ADD_RM64_IMM32", R14, 32)
        a.op("SUB_RM64_IMM32", RBX, 8)
    a.bind(cm)
    if not any(n % 8 for n in ns):
        a.bind(end)
        return
    a.op("TEST_RM64_R64", RBX, RBX)
    a.jump("JE_REL32_64", end)
    table = a.const(b"".join(lane_mask(n) for n in range(8)))
    a.op("LEA_R64_M", RAX, table)
    a.op("MOV_R64_RM64", R11, RBX)
    a.op("SHL_RM64_IMM8", R11, 5)
    a.op("VEX_VMOVUPS_YMM_YMMM256", MASK, Asm.mem(RAX, R11))
    _block(a, rows, 1, True, sa_r, sa_k, ldb, ldc)
    a.bind(end)


def _block(a: Asm, rows: int, nv: int, masked: bool, sa_r, sa_k, ldb, ldc):
    acc = [[YMM[r * nv + v] for v in range(nv)] for r in range(rows)]
    bregs = [YMM[12], YMM[13]][:nv]
    for r in range(rows):
        for v in range(nv):
            m = Asm.mem(R14, disp=r * ldc + 32 * v)
            if masked:
                a.op("VEX_VMASKMOVPS_YMM_YMM_M256", acc[r][v], MASK, m)
            else:
                a.op("VEX_VMOVUPS_YMM_YMMM256", acc[r][v], m)
    a.op("MOV_R64_RM64", R15, RSI)
    a.op("MOV_R64_RM64", RAX, R13)
    a.op("MOV_R64_RM64", R12, R10)
    top = a.label()
    a.bind(top)
    for v in range(nv):
        if masked:
            a.op("VEX_VMASKMOVPS_YMM_YMM_M256", bregs[v], MASK, Asm.mem(RAX))
        else:
            a.op("VEX_VMOVUPS_YMM_YMMM256", bregs[v], Asm.mem(RAX, disp=32 * v))
    for r in range(rows):
        a.op("VEX_VBROADCASTSS_YMM_M32", A_REG, Asm.mem(R15, disp=r * sa_r))
        for v in range(nv):
            a.op("VEX_VFMADD231PS_YMM_YMM_YMMM256", acc[r][v], A_REG, bregs[v])
    a.op("ADD_RM64_IMM32", R15, sa_k)
    a.op("ADD_RM64_IMM32", RAX, ldb)
    a.op("DEC_RM64", R12)
    a.jump("JNE_REL32_64", top)
    for r in range(rows):
        for v in range(nv):
            m = Asm.mem(R14, disp=r * ldc + 32 * v)
            if masked:
                a.op("VEX_VMASKMOVPS_M256_YMM_YMM", m, MASK, acc[r][v])
            else:
                a.op("VEX_VMOVUPS_YMMM256_YMM", m, acc[r][v])


class MatmulNest:
    """One nest whose body is a single krnl.matmul: its loops, extents and checks."""

    def __init__(self, op: krnl.IterateOp, mm: krnl.MatMulOp, env, frame: Frame, handles,
                 ranges: dict):
        node = frame.node
        self.op, self.mm, self.env, self.frame = op, mm, env, frame
        for v in (mm.a, mm.b, mm.c):
            t = v.type.element_type
            if not isinstance(t, Float32Type):
                raise Unsupported(f"node {node!r}: a {t} matmul (f32 only)")
            if not frame.buffers.known(v):
                raise Unsupported(f"node {node!r}: a matmul operand made inside the nest")
        if not frame.buffers.writable(mm.c):
            raise Unsupported(f"node {node!r}: a matmul into a constant")
        if mm.start is not None:  # driver.finish writes the start out first
            raise Unsupported(f"node {node!r}: a matmul that starts from "
                              f"{mm.start_kind!r} (krnl.matmul start)")
        if any(x is not None for x in mm.clamp):  # driver.finish writes it out after
            raise Unsupported(f"node {node!r}: a matmul with a clamp (krnl.matmul clamp)")
        if mm.taps is not None:  # lowering's taps option is off for this generator
            raise Unsupported(f"node {node!r}: a matmul reading A by taps (krnl.matmul a_taps)")
        self.sizes = krnl.ints_of(mm.sizes)
        self.tile = krnl.ints_of(mm.tile)
        self.strides = krnl.ints_of(mm.strides)
        args = list(op.body.block.args)
        original = list(op.original)
        bounds = op.bound_list()
        dim_of = {}
        for d, v in enumerate((mm.i, mm.j, mm.k)):
            if v not in args:
                raise Unsupported(f"node {node!r}: a matmul index that is not a loop variable")
            dim_of[args.index(v)] = d
        if sorted(dim_of) != [0, 1, 2] or len(original) != 3:
            raise Unsupported(f"node {node!r}: a matmul nest that is not (i, j, k)")
        for k in range(3):
            if bounds[k] != (0, self.sizes[dim_of[k]]):
                raise Unsupported(f"node {node!r}: matmul loop bounds {bounds[k]} vs sizes")
        self.loops = []  # (iv, dim, hi, step)
        kinds = set()
        for h in op.emitted:
            kind, base, tile = handles.get(h, ("full", h, 1))
            if base not in original:
                raise Unsupported(f"node {node!r}: a matmul loop from another nest")
            k = original.index(base)
            d = dim_of[k]
            kinds.add(kind)
            if kind == "inner":
                raise Unsupported(f"node {node!r}: an emitted inner tile loop around a matmul")
            step = tile if kind == "outer" else 1
            if step != self.tile[d]:
                raise Unsupported(f"node {node!r}: a matmul tile {self.tile} that does not match "
                                  f"its loops")
            self.loops.append((args[k], d, self.sizes[d], step))
        self.whole = kinds == {"full"} and self.tile == [1, 1, 1]
        if self.whole:
            self.tile = list(self.sizes)
        self.ranges = dict(ranges)
        for iv, _d, hi, _step in self.loops:
            self.ranges[iv] = (0, hi - 1)
        self.offs = [env.affine(v) for v in (mm.a_off, mm.b_off, mm.c_off)]
        self._check_bounds()

    def _check_bounds(self):
        m, n, k = self.sizes
        sa_r, sa_k, ldb, ldc = self.strides
        if min(m, n, k) <= 0:
            return
        spans = [(self.mm.a, self.offs[0], (m - 1) * sa_r + (k - 1) * sa_k),
                 (self.mm.b, self.offs[1], (k - 1) * ldb + (n - 1)),
                 (self.mm.c, self.offs[2], (m - 1) * ldc + (n - 1))]
        if min(sa_r, sa_k, ldb, ldc) < 0:
            raise Unsupported(f"node {self.frame.node!r}: negative matmul strides")
        for mem, off, reach in spans:
            lo, hi = interval(off, self.ranges)
            size = 1
            for d in mem.type.get_shape():
                size *= d
            if lo < 0 or hi + reach > size - 1:
                raise Unsupported(f"node {self.frame.node!r}: a matmul reaching past its "
                                  "buffer")

    def extents(self, loops) -> set:
        """Every (m, n, k) this nest passes its kernel: min(tile, size - iv) along a tiled
        loop, the tile elsewhere (what emit's immediates give)."""
        tiled = {d for _iv, d, _hi, _s in loops}
        per_dim = []
        for d in range(3):
            size, tile = self.sizes[d], self.tile[d]
            if d in tiled and size % tile:
                per_dim.append({min(tile, size - iv) for iv in (0, size - size % tile)})
            else:
                per_dim.append({tile})
        return set(itertools.product(*per_dim))

    def emit(self, kernels: dict):
        f, a = self.frame, self.frame.asm
        m, n, k = self.sizes
        if min(m, n, k) <= 0:
            return
        name = kernel_name(self.strides)
        loops = [] if self.whole else self.loops
        _strides, extents = kernels.setdefault(name, (tuple(self.strides), set()))
        extents.update(self.extents(loops))
        tops = [f.loop_begin(iv, 0) for iv, _d, _hi, _s in loops]
        at = {d: iv for iv, d, _hi, _s in loops}
        sa_r, sa_k, ldb, ldc = self.strides

        def term(d, coef):
            return Affine(((at[d], coef),), 0) if d in at else Affine()

        pa = self.offs[0] + term(0, sa_r) + term(2, sa_k)
        pb = self.offs[1] + term(2, ldb) + term(1, 1)
        pc = self.offs[2] + term(0, ldc) + term(1, 1)
        for mem, off, reg in ((self.mm.a, pa, RSI), (self.mm.b, pb, RDX), (self.mm.c, pc, RCX)):
            f.base(mem, reg)
            if off.terms or off.const:
                f.affine(off, R11)
                a.op("LEA_R64_M", reg, Asm.mem(reg, R11, 4))
        for d, reg in ((0, R8), (1, R9), (2, R10)):
            size, tile = self.sizes[d], self.tile[d]
            if d in at and size % tile:
                # min(tile, size - iv): the last tile is partial
                a.op("MOV_RM64_IMM32", reg, size)
                a.op("SUB_R64_RM64", reg, f.iv_mem(at[d]))
                a.op("MOV_RM64_IMM32", RAX, tile)
                a.op("CMP_RM64_R64", reg, RAX)
                a.op("CMOVG_R64_RM64", reg, RAX)
            else:
                a.op("MOV_RM64_IMM32", reg, tile)
        a.call(name)
        for (iv, _d, hi, step), top in reversed(list(zip(loops, tops, strict=True))):
            f.loop_end(iv, top, hi, step)
