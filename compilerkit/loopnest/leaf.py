"""Innermost nests (loads, float math, stores: elementwise ops, bias fills, copies, im2col,
pooling windows, reductions into an output element) -> AVX2 code, vectorised 8 lanes wide
along one loop.

The vector loop V is the innermost loop along which every store is contiguous (coefficient 1
in the store's flat offset); it is moved innermost, which keeps each output element's updates
in their original order (an element has one value of V), so reductions into memory
(MaxPool's max over the window, GlobalAveragePool's sum) give the same bits as the scalar
order. Per load, by its coefficient c on V: c = 0 broadcasts, c = 1 is a contiguous vector,
anything else a `vgatherdps` with lane offsets c*[0..7]. V's trip count is static: full vectors,
then one tail with a constant lane mask (`vmaskmovps`, masked gathers), so no lane ever touches
memory past the loop's end.

Guarded loads (lowering's padding reads: `select(in_range(e), load(x, clamp(e)), fill)`) become
masked loads of the unclamped address: lanes whose index is out of range are never accessed
(masked-off lanes of vmaskmovps / vgatherdps do not touch memory) and read `fill`. Every other
index is checked against its buffer over the whole static iteration space before any code is
written (`affine.interval`); a nest that fails any check, or uses an op not listed in FLOAT_OPS,
raises Unsupported and goes to LLVM.

Registers: outer loop variables live in stack slots; each distinct access keeps a pointer in a
general register, stepped by 32*c bytes per vector; each lane-varying guard keeps its index
vector in a ymm register. Float values are allocated to the remaining ymm registers by last use.
"""

from __future__ import annotations

import struct

from xdsl.dialects.builtin import Float32Type

from compilerkit.codegen import mathlib
from compilerkit.dialects import krnl
from compilerkit.loopnest.affine import Affine, Clamp, Cond, IndexEnv, Unsupported, interval
from compilerkit.loopnest.asm import GPR, YMM, Asm, xmm_of
from compilerkit.loopnest.frame import RDX, Frame, check_imm

W = 8  # f32 lanes of an AVX2 register
POINTER_REGS = [GPR[r] for r in ("rbx", "rsi", "r8", "r9", "r10", "r12", "r13", "r14", "r15",
                                 "rbp")]
RCX, R11 = GPR["rcx"], GPR["r11"]

# arith/math op -> how the vector code computes it
FLOAT_OPS = {"arith.addf": "VEX_VADDPS_YMM_YMM_YMMM256", "arith.subf": "VEX_VSUBPS_YMM_YMM_YMMM256",
             "arith.mulf": "VEX_VMULPS_YMM_YMM_YMMM256", "arith.divf": "VEX_VDIVPS_YMM_YMM_YMMM256",
             "arith.maximumf": "VEX_VMAXPS_YMM_YMM_YMMM256",
             "arith.maxnumf": "VEX_VMAXPS_YMM_YMM_YMMM256",
             "arith.minimumf": "VEX_VMINPS_YMM_YMM_YMMM256",
             "arith.negf": None, "math.absf": None, "math.sqrt": None, "arith.select": None,
             "arith.cmpf": None, "math.exp": None, "math.log": None}
# arith.cmpf predicate number -> vcmpps immediate (AVX's 32 predicates)
CMP_IMM = {0: 0x0B, 1: 0x00, 2: 0x1E, 3: 0x1D, 4: 0x11, 5: 0x12, 6: 0x0C, 7: 0x07, 8: 0x08,
           9: 0x16, 10: 0x15, 11: 0x19, 12: 0x1A, 13: 0x04, 14: 0x03, 15: 0x0F}


def f32x8(x: float) -> bytes:
    return struct.pack("<f", x) * W


def i32x8(values) -> bytes:
    return struct.pack("<8i", *values)


def lane_mask(n: int) -> bytes:
    return i32x8([-1] * n + [0] * (W - n))


class Access:
    """One distinct (buffer, flat offset) the nest reads or writes. Accesses to one buffer
    whose offsets differ by a constant (a convolution's taps) share a pointer register
    (`base`, the first of them) and differ by a displacement."""

    def __init__(self, mem, offset: Affine, base=None):
        self.mem = mem
        self.offset = offset
        self.base = base or self
        self.reg = None

    def at(self, extra: int = 0):
        """The memory operand of this access (+ `extra` bytes)."""
        return Asm.mem(self.base.reg, disp=4 * (self.offset.const - self.base.offset.const)
                       + extra)


def flat_offset(mem, idx: list) -> Affine:
    dims = list(mem.type.get_shape())
    acc, stride = Affine(), 1
    for e, d in zip(reversed(idx), reversed(dims), strict=True):
        acc = acc + e.scale(stride)
        stride *= d
    return acc


def loops_of(op: krnl.IterateOp, node: str):
    """[(induction variable, lo, hi)] in emitted order; blocked loops are not handled here."""
    original = list(op.original)
    bounds = op.bound_list()
    args = list(op.body.block.args)
    out = []
    for h in op.emitted:
        if h not in original:
            raise Unsupported(f"node {node!r}: a blocked loop outside a matmul nest")
        k = original.index(h)
        out.append((args[k], *bounds[k]))
    if len(out) != len(original):
        raise Unsupported(f"node {node!r}: a nest that does not emit all its loops")
    return out


class Leaf:
    """The analysis of one innermost nest, then its code (`emit`)."""

    def __init__(self, op: krnl.IterateOp, env: IndexEnv, frame: Frame, ranges: dict):
        self.op, self.env, self.frame, self.node = op, env, frame, frame.node
        self.loops = loops_of(op, self.node)
        self.ranges = dict(ranges)
        for iv, lo, hi in self.loops:
            env.define_iv(iv)
            self.ranges[iv] = (lo, hi - 1)
        self.accesses: dict = {}
        self.pointers: dict = {}  # (buffer, offset less its constant) -> the Access holding it
        self.steps: list = []
        self.fconst: dict = {}
        self.clamped: dict = {}
        self.store_index: dict = {}  # id(store's Access) -> (memref, per-dimension indices)
        self._read_body()
        self._choose_vector_loop()
        self._check()

    # ---- analysis -----------------------------------------------------------------------
    def _access(self, mem, offset: Affine) -> Access:
        root = id(self.frame.buffers.root(mem))
        key = (root, offset.key())
        if key not in self.accesses:
            shape = (root, Affine(offset.terms, 0).key())
            base = self.pointers.get(shape)
            self.accesses[key] = Access(mem, offset, base)
            self.pointers.setdefault(shape, self.accesses[key])
        return self.accesses[key]

    def _f32(self, mem):
        if not isinstance(mem.type.element_type, Float32Type):
            raise Unsupported(f"node {self.node!r}: {mem.type.element_type} buffers (f32 only)")
        if not self.frame.buffers.known(mem):
            raise Unsupported(f"node {self.node!r}: a buffer made inside the nest")

    def _read_body(self):
        env, node = self.env, self.node
        for op in self.op.body.block.ops:
            # Operands are read from the tuple, not through the ops' named accessors: this
            # loop reads every op of the nest, and an unrolled pooling window has hundreds.
            operands = op.operands
            if self.clamped:
                for o in operands:
                    if o in self.clamped and not (op.name == "arith.select"
                                                  and o is operands[1]):
                        raise Unsupported(f"node {node!r}: a clamped load used outside a "
                                          "guard")
            if env.read(op):
                continue
            name = op.name
            if isinstance(op, krnl.LoadOp):
                mem = operands[0]
                self._f32(mem)
                idx = [env[i] for i in operands[1:]]
                dims = list(mem.type.get_shape())
                plain, clamps = [], []
                for e, d in zip(idx, dims, strict=True):
                    if isinstance(e, Clamp):
                        if (e.lo, e.hi) != (0, d - 1):
                            raise Unsupported(f"node {node!r}: a clamp that is not the "
                                              "buffer's range")
                        clamps.append((e.expr, d))
                        plain.append(e.expr)
                    elif isinstance(e, Affine):
                        plain.append(e)
                    else:
                        raise Unsupported(f"node {node!r}: a condition used as an index")
                acc = self._access(mem, flat_offset(mem, plain))
                res = op.results[0]
                if clamps:
                    self.clamped[res] = (acc, clamps, mem, plain)
                else:
                    self._bounds(mem, plain, clamped=())
                    self.steps.append(("load", res, acc, None, 0.0))
            elif isinstance(op, krnl.StoreOp):
                value, mem = operands[0], operands[1]
                self._f32(mem)
                if not self.frame.buffers.writable(mem):
                    raise Unsupported(f"node {node!r}: a store into a constant")
                idx = [env.affine(i) for i in operands[2:]]
                self._bounds(mem, idx, clamped=())
                acc = self._access(mem, flat_offset(mem, idx))
                self.store_index[id(acc)] = (mem, idx)
                self.steps.append(("store", value, acc))
            elif name == "arith.constant":
                if not isinstance(op.result.type, Float32Type):
                    raise Unsupported(f"node {node!r}: a {op.result.type} constant")
                self.fconst[op.result] = float(op.value.value.data)
            elif name == "arith.select" and op.operands[1] in self.clamped:
                cond = env[op.operands[0]]
                fill = self.fconst.get(op.operands[2])
                if not isinstance(cond, Cond) or fill is None:
                    raise Unsupported(f"node {node!r}: a guarded load without a constant fill")
                acc, clamps, mem, plain = self.clamped[op.operands[1]]
                keys = {a.key() for a in cond.atoms}
                for e, d in clamps:
                    if e.key() not in keys or (Affine((), d - 1) + e.scale(-1)).key() not in keys:
                        raise Unsupported(f"node {node!r}: a guard that does not cover its clamp")
                self._bounds(mem, plain, clamped={id(e) for e, _ in clamps})
                self.steps.append(("load", op.results[0], acc, cond.atoms, fill))
            elif name in FLOAT_OPS:
                if any(not isinstance(r.type, Float32Type) for r in op.results) and \
                        name != "arith.cmpf":
                    raise Unsupported(f"node {node!r}: {name} on {op.results[0].type}")
                if name == "arith.select" and isinstance(env.values.get(op.operands[0]), Cond):
                    raise Unsupported(f"node {node!r}: a select on an index condition")
                if name == "arith.cmpf" and not isinstance(op.operands[0].type, Float32Type):
                    raise Unsupported(f"node {node!r}: cmpf on {op.operands[0].type}")
                self.steps.append(("float", op))
            else:
                raise Unsupported(f"node {node!r}: no vector rule for {name}")
        if not any(s[0] == "store" for s in self.steps):
            raise Unsupported(f"node {node!r}: a nest without stores")

    def _bounds(self, mem, idx, clamped):
        """Every unclamped index stays inside its dimension over the whole iteration space."""
        for e, d in zip(idx, mem.type.get_shape(), strict=True):
            if id(e) in clamped:
                continue
            lo, hi = interval(e, self.ranges)
            if lo < 0 or hi > d - 1:
                raise Unsupported(f"node {self.node!r}: an index ranging over [{lo}, {hi}] of "
                                  f"a dimension of size {d}: not provably in bounds")

    def _choose_vector_loop(self):
        stores = [s[2] for s in self.steps if s[0] == "store"]
        for iv, lo, hi in reversed(self.loops):
            if all(a.offset.coef(iv) == 1 for a in stores):
                self.v = (iv, lo, hi)
                break
        else:
            raise Unsupported(f"node {self.node!r}: no loop along which the stores are "
                              "contiguous")
        # Moving V innermost keeps each element's updates in order only if a buffer written
        # here is read at the very elements being written, and its stores never write one
        # element twice (`_apart`: a copy into phase planes stores to two planes).
        written: dict = {}
        for a in stores:
            ws = written.setdefault(id(self.frame.buffers.root(a.mem)), [])
            if a not in ws:
                if any(not self._apart(w, a) for w in ws):
                    raise Unsupported(f"node {self.node!r}: two stores into one buffer that "
                                      "may write one element")
                ws.append(a)
        for a in self.accesses.values():
            ws = written.get(id(self.frame.buffers.root(a.mem)))
            if ws is not None and not any(w is a for w in ws):
                raise Unsupported(f"node {self.node!r}: a buffer read at another element than "
                                  "the one written")

    def _apart(self, a, b) -> bool:
        """Whether stores a and b never write one element: through one view, in some dimension
        both indices are different constants (every index is proven inside its dimension, so
        no other dimension can make up the difference)."""
        (ma, ia), (mb, ib) = self.store_index[id(a)], self.store_index[id(b)]
        return ma is mb and any(not x.terms and not y.terms and x.const != y.const
                                for x, y in zip(ia, ib, strict=True))

    def _check(self):
        v = self.v[0]
        for a in self.accesses.values():
            c = a.offset.coef(v)
            check_imm(32 * c, self.node)
            check_imm(W * abs(c), self.node)
        if len(self.pointers) > len(POINTER_REGS):
            raise Unsupported(f"node {self.node!r}: {len(self.pointers)} distinct pointers")
        for acc in self.accesses.values():
            check_imm(4 * (acc.offset.const - acc.base.offset.const) + 32, self.node)

    # ---- code ---------------------------------------------------------------------------
    def emit(self):
        f, a = self.frame, self.frame.asm
        v, vlo, vhi = self.v
        outer = [x for x in self.loops if x[0] is not v]
        trip = vhi - vlo
        if trip <= 0 or any(hi <= lo for _, lo, hi in outer):
            return
        for k, acc in enumerate(self.pointers.values()):
            acc.reg = POINTER_REGS[k]
        # Lane-varying guard atoms (one ymm each), per-load invariant masks (one ymm each).
        self.varying, self.invariant = {}, {}
        for s in self.steps:
            if s[0] == "load" and s[3] is not None:
                inv = [e for e in s[3] if e.coef(v) == 0]
                for e in s[3]:
                    if e.coef(v) != 0:
                        self.varying.setdefault(e.key(), e)
                if inv:
                    self.invariant[id(s)] = inv
        reserved = len(self.varying) + len(self.invariant) + 1  # + the tail mask
        free = list(YMM[reserved:])
        self.tail_reg = YMM[0]
        regs = iter(YMM[1:reserved])
        self.vreg = {k: next(regs) for k in self.varying}
        self.ireg = {k: next(regs) for k in self.invariant}
        self.free = free
        self._plan_registers()
        tops = []
        for iv, lo, _hi in outer:
            tops.append(f.loop_begin(iv, lo))
        self._preheader(v, vlo)
        n_full, rem = divmod(trip, W)
        if n_full:
            top = a.label()
            a.op("MOV_RM64_IMM32", RCX, n_full)
            a.bind(top)
            self._body(v, tail=0)
            for acc in self.pointers.values():
                c = acc.offset.coef(v)
                if c:
                    a.op("ADD_RM64_IMM32", acc.reg, 4 * W * c)
            for key, e in self.varying.items():
                a.op("VEX_VPADDD_YMM_YMM_YMMM256", self.vreg[key], self.vreg[key],
                     a.const(i32x8([W * e.coef(v)] * W)))
            a.op("DEC_RM64", RCX)
            a.jump("JNE_REL32_64", top)
        if rem:
            a.op("VEX_VMOVUPS_YMM_YMMM256", self.tail_reg, a.const(lane_mask(rem)))
            self._body(v, tail=rem)
        for (iv, _lo, hi), top in reversed(list(zip(outer, tops, strict=True))):
            f.loop_end(iv, top, hi)

    def _preheader(self, v, vlo):
        f, a = self.frame, self.frame.asm
        for acc in self.pointers.values():
            f.base(acc.mem, acc.reg)
            rest = acc.offset.without(v) + Affine((), acc.offset.coef(v) * vlo)
            if rest.terms or rest.const:
                f.affine(rest, RDX)
                a.op("LEA_R64_M", acc.reg, Asm.mem(acc.reg, RDX, 4))
        for key, e in self.varying.items():
            c = e.coef(v)
            lo, hi = interval(e, {**self.ranges})
            if lo < -(1 << 31) or hi + W * abs(c) >= (1 << 31):
                raise Unsupported(f"node {self.node!r}: a guard index beyond 32 bits")
            f.affine(e.without(v) + Affine((), c * vlo), RDX)
            r = self.vreg[key]
            a.op("VEX_VMOVD_XMM_RM32", xmm_of(r), _r32(RDX))
            a.op("VEX_VPBROADCASTD_YMM_XMMM32", r, xmm_of(r))
            a.op("VEX_VPADDD_YMM_YMM_YMMM256", r, r, a.const(i32x8([c * k for k in range(W)])))
        for key, atoms in self.invariant.items():
            a.op("XOR_R32_RM32", _r32(R11), _r32(R11))
            for e in atoms:
                f.affine(e, RDX)
                a.op("OR_R64_RM64", R11, RDX)
            a.op("SAR_RM64_IMM8", R11, 63)
            a.op("NOT_RM64", R11)
            r = self.ireg[key]
            a.op("VEX_VMOVD_XMM_RM32", xmm_of(r), _r32(R11))
            a.op("VEX_VPBROADCASTD_YMM_XMMM32", r, xmm_of(r))

    def _plan_registers(self):
        """Last use of every float value (so its register can be reused after)."""
        self.last = {}
        for k, s in enumerate(self.steps):
            for x in _uses(s):
                self.last[x] = k

    def _body(self, v, tail: int):
        a = self.frame.asm
        free = list(self.free)
        reg = {}

        def take():
            if not free:
                raise Unsupported(f"node {self.node!r}: more live values than ymm registers")
            return free.pop(0)

        def get(x):
            """The register holding value x (a float constant is loaded into a temporary)."""
            if x in reg:
                return reg[x], False
            if x in self.fconst:
                r = take()
                a.op("VEX_VMOVUPS_YMM_YMMM256", r, a.const(f32x8(self.fconst[x])))
                return r, True
            raise Unsupported(f"node {self.node!r}: a value defined outside the nest")

        def release(k, *temps):
            for t in temps:
                free.insert(0, t)
            for x in list(reg):
                if self.last.get(x, -1) <= k and x not in self.fconst:
                    free.insert(0, reg.pop(x))

        for k, s in enumerate(self.steps):
            if s[0] == "load":
                _, res, acc, guard, fill = s
                dst = take()
                self._load(dst, acc, guard, fill, v, tail, take, free, s)
                reg[res] = dst
                release(k)
            elif s[0] == "store":
                _, val, acc = s
                r, tmp = get(val)
                if tail:
                    a.op("VEX_VMASKMOVPS_M256_YMM_YMM", acc.at(), self.tail_reg, r)
                else:
                    a.op("VEX_VMOVUPS_YMMM256_YMM", acc.at(), r)
                release(k, *([r] if tmp else []))
            else:
                op = s[1]
                srcs = [get(o) for o in op.operands]
                dst = take()
                self._float(op, dst, [r for r, _ in srcs], take, free)
                reg[op.results[0]] = dst
                release(k, *[r for r, t in srcs if t])

    def _load(self, dst, acc, guard, fill, v, tail, take, free, step):
        a = self.frame.asm
        c = acc.offset.coef(v)
        if guard is None:
            if c == 0:
                a.op("VEX_VBROADCASTSS_YMM_M32", dst, acc.at())
            elif c == 1 and not tail:
                a.op("VEX_VMOVUPS_YMM_YMMM256", dst, acc.at())
            elif c == 1:
                a.op("VEX_VMASKMOVPS_YMM_YMM_M256", dst, self.tail_reg, acc.at())
            elif c == 2 and not tail and free and (shift := self._dense_pair(acc)) is not None:
                self._stride2_dense(dst, acc, shift, take, free)
            else:
                m = take()
                if tail:
                    a.op("VEX_VMOVAPS_YMM_YMMM256", m, self.tail_reg)
                else:
                    a.op("VEX_VMOVUPS_YMM_YMMM256", m, a.const(lane_mask(W)))
                if c == 2 and len(free) >= 3:
                    self._stride2(dst, acc, m, take, free)
                else:
                    self._gather(dst, acc, c, m, take, free)
                free.insert(0, m)
            return
        m = take()
        inv = self.ireg.get(id(step))
        if inv is not None:
            a.op("VEX_VMOVAPS_YMM_YMMM256", m, inv)
        else:
            a.op("VEX_VMOVUPS_YMM_YMMM256", m, a.const(lane_mask(W)))
        t = take()
        for e in guard:
            if e.coef(v) != 0:
                a.op("VEX_VPCMPGTD_YMM_YMM_YMMM256", t, self.vreg[e.key()],
                     a.const(i32x8([-1] * W)))
                a.op("VEX_VPAND_YMM_YMM_YMMM256", m, m, t)
        if tail:
            a.op("VEX_VPAND_YMM_YMM_YMMM256", m, m, self.tail_reg)
        if c == 1:
            a.op("VEX_VMASKMOVPS_YMM_YMM_M256", dst, m, acc.at())
            if fill != 0.0:
                a.op("VEX_VMOVUPS_YMM_YMMM256", t, a.const(f32x8(fill)))
                a.op("VEX_VBLENDVPS_YMM_YMM_YMMM256_YMM", dst, t, dst, m)
            free.insert(0, t)
        elif c == 2 and len(free) >= 2:
            self._stride2(dst, acc, m, take, free)
            if fill != 0.0:
                a.op("VEX_VMOVUPS_YMM_YMMM256", t, a.const(f32x8(fill)))
                a.op("VEX_VBLENDVPS_YMM_YMM_YMMM256_YMM", dst, t, dst, m)
            free.insert(0, t)
        else:
            free.insert(0, t)
            a.op("VEX_VMOVUPS_YMM_YMMM256", dst, a.const(f32x8(fill)))
            self._gather(dst, acc, c, m, take, free)
        free.insert(0, m)

    def _dense_pair(self, acc):
        """For a stride-2 access in a full vector: the byte displacement (0 or -4) from which
        16 consecutive floats hold its 8 lanes at the even (0) or odd (-4) positions, all
        inside its buffer over the whole iteration space; None when neither is."""
        lo, hi = interval(acc.offset, self.ranges)
        size = 1
        for d in acc.mem.type.get_shape():
            size *= d
        if hi + 1 <= size - 1:  # lane 7 is at offset + 14; the pair's last float at + 15
            return 0
        if lo - 1 >= 0:
            return -4
        return None

    def _stride2_dense(self, dst, acc, shift, take, free):
        """dst lane l = acc[2l] for a full vector: two plain loads of 8 floats from `shift`
        bytes on (their extra element proven inside the buffer by `_dense_pair`, which gives
        `shift`), vshufps picks the even (or odd)
        elements, vpermpd puts them in lane order. The masked form (`_stride2`) needs two
        mask computations per load; a max pool's phase split reads this way in its
        innermost loop."""
        a = self.frame.asm
        hi = take()
        a.op("VEX_VMOVUPS_YMM_YMMM256", dst, acc.at(shift))
        a.op("VEX_VMOVUPS_YMM_YMMM256", hi, acc.at(shift + 32))
        a.op("VEX_VSHUFPS_YMM_YMM_YMMM256_IMM8", dst, dst, hi, 0x88 if shift == 0 else 0xDD)
        a.op("VEX_VPERMPD_YMM_YMMM256_IMM8", dst, dst, 0xD8)
        free.insert(0, hi)

    def _stride2(self, dst, acc, mask, take, free):
        """dst lane l = acc[2l] where mask lane l is set, else 0, without a gather: two masked
        loads of 8 consecutive floats whose masks keep only the even elements of the set lanes
        (odd elements and unset lanes are never touched), then vshufps + vpermpd pick the even
        elements. The mask register is kept."""
        a = self.frame.asm
        lo_m, hi_m = take(), take()
        for reg, first in ((lo_m, 0), (hi_m, 4)):
            a.op("VEX_VMOVUPS_YMM_YMMM256", reg, a.const(i32x8([first + k // 2
                                                                for k in range(W)])))
            a.op("VEX_VPERMD_YMM_YMM_YMMM256", reg, reg, mask)
            a.op("VEX_VPAND_YMM_YMM_YMMM256", reg, reg, a.const(i32x8([-1, 0] * (W // 2))))
        a.op("VEX_VMASKMOVPS_YMM_YMM_M256", dst, lo_m, acc.at())
        a.op("VEX_VMASKMOVPS_YMM_YMM_M256", hi_m, hi_m, acc.at(32))
        a.op("VEX_VSHUFPS_YMM_YMM_YMMM256_IMM8", dst, dst, hi_m, 0x88)
        a.op("VEX_VPERMPD_YMM_YMMM256_IMM8", dst, dst, 0xD8)
        free.insert(0, hi_m)
        free.insert(0, lo_m)

    def _gather(self, dst, acc, c, mask, take, free):
        """dst lanes where mask is set = acc[c * lane]; the mask register is consumed."""
        a = self.frame.asm
        idx = take()
        a.op("VEX_VMOVUPS_YMM_YMMM256", idx, a.const(i32x8([c * k for k in range(W)])))
        disp = 4 * (acc.offset.const - acc.base.offset.const)
        a.op("VEX_VGATHERDPS_YMM_VM32Y_YMM", dst, Asm.mem(acc.base.reg, idx, 4, disp), mask)
        free.insert(0, idx)

    def _float(self, op, dst, srcs, take, free):
        a = self.frame.asm
        name = op.name
        code = FLOAT_OPS[name]
        if name in ("arith.maximumf", "arith.minimumf", "arith.maxnumf"):
            # vmaxps(x, y) is y when either is NaN. NaN-propagating max/min (as LLVM's lowering)
            # blends a NaN x back in; maxNum blends x in where y is NaN (a NaN x is covered).
            x, y = srcs
            nan_of = y if name == "arith.maxnumf" else x
            t = take()
            a.op(code, t, x, y)
            a.op("VEX_VCMPPS_YMM_YMM_YMMM256_IMM8", dst, nan_of, nan_of, 0x03)
            a.op("VEX_VBLENDVPS_YMM_YMM_YMMM256_YMM", dst, t, x, dst)
            free.insert(0, t)
        elif code is not None:
            a.op(code, dst, *srcs)
        elif name == "arith.negf":
            a.op("VEX_VXORPS_YMM_YMM_YMMM256", dst, srcs[0], a.const(i32x8([-(1 << 31)] * W)))
        elif name == "math.absf":
            a.op("VEX_VANDPS_YMM_YMM_YMMM256", dst, srcs[0], a.const(i32x8([0x7FFFFFFF] * W)))
        elif name == "math.sqrt":
            a.op("VEX_VSQRTPS_YMM_YMMM256", dst, srcs[0])
        elif name == "arith.cmpf":
            a.op("VEX_VCMPPS_YMM_YMM_YMMM256_IMM8", dst, srcs[0], srcs[1],
                 CMP_IMM[op.predicate.value.data])
        elif name == "arith.select":
            c, x, y = srcs
            a.op("VEX_VBLENDVPS_YMM_YMM_YMMM256_YMM", dst, y, x, c)
        elif name == "math.exp":
            self._exp(dst, srcs[0], take, free)
        elif name == "math.log":
            self._log(dst, srcs[0], take, free)

    def _log(self, dst, x, take, free):
        """dst = log(x), the LLVM path's `ck_logf` (codegen/mathlib.build_log) step for step:
        exponent and mantissa from the bits, m in [sqrt(1/2), sqrt(2)), the series in
        s = (m - 1) / (m + 1) with the same fused Horner steps, then the same special cases
        in the same order (0, negatives, inf, NaN), subnormals scaled first as there, so the
        bits agree."""
        a = self.frame.asm
        ta, tb, tc, td = (take() for _ in range(4))

        def c(v):
            return a.const(f32x8(v))

        def i(v):
            return a.const(i32x8([v] * W))

        blend, cmp = "VEX_VBLENDVPS_YMM_YMM_YMMM256_YMM", "VEX_VCMPPS_YMM_YMM_YMMM256_IMM8"
        # subnormals scaled by 2^SUBNORMAL_SHIFT first (exact), the exponent corrected
        a.op(cmp, tc, x, c(mathlib.SMALLEST_NORMAL), 0x11)  # x < smallest normal (ordered)
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", td, x, c(float(1 << mathlib.SUBNORMAL_SHIFT)))
        a.op(blend, tb, x, td, tc)
        a.op("VEX_VPSRLD_YMM_YMM_IMM8", ta, tb, 23)
        a.op("VEX_VPAND_YMM_YMM_YMMM256", ta, ta, i(255))
        a.op("VEX_VPAND_YMM_YMM_YMMM256", td, tc, i(mathlib.SUBNORMAL_SHIFT))
        a.op("VEX_VPSUBD_YMM_YMM_YMMM256", ta, ta, i(127))
        a.op("VEX_VPSUBD_YMM_YMM_YMMM256", ta, ta, td)  # e
        a.op("VEX_VPAND_YMM_YMM_YMMM256", tb, tb, i(0x7FFFFF))
        a.op("VEX_VPOR_YMM_YMM_YMMM256", tb, tb, i(0x3F800000))  # m in [1, 2)
        a.op(cmp, tc, tb, c(mathlib.SQRT2), 0x1E)  # m > sqrt(2) (ordered)
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", td, tb, c(0.5))
        a.op(blend, tb, tb, td, tc)
        a.op("VEX_VPADDD_YMM_YMM_YMMM256", td, ta, i(1))
        a.op(blend, ta, ta, td, tc)
        a.op("VEX_VSUBPS_YMM_YMM_YMMM256", tb, tb, c(1.0))  # m - 1
        a.op("VEX_VADDPS_YMM_YMM_YMMM256", tc, tb, c(2.0))
        a.op("VEX_VDIVPS_YMM_YMM_YMMM256", tb, tb, tc)  # s
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", tc, tb, tb)  # s^2
        first, *rest = mathlib.LOG_SERIES
        a.op("VEX_VMOVUPS_YMM_YMMM256", td, c(first))
        for k in rest:
            a.op("VEX_VFMADD213PS_YMM_YMM_YMMM256", td, tc, c(k))
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", td, td, tb)  # P(s^2) * s
        a.op("VEX_VCVTDQ2PS_YMM_YMMM256", ta, ta)
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", ta, ta, c(mathlib.LN2))
        a.op("VEX_VADDPS_YMM_YMM_YMMM256", td, td, ta)  # y
        for pred, bound, value in ((0x00, 0.0, float("-inf")), (0x11, 0.0, float("nan"))):
            a.op(cmp, tb, x, c(bound), pred)
            a.op("VEX_VMOVUPS_YMM_YMMM256", tc, c(value))
            a.op(blend, td, td, tc, tb)
        a.op(cmp, tb, x, c(float("inf")), 0x00)
        a.op(blend, td, td, x, tb)
        a.op(cmp, tb, x, x, 0x03)  # NaN in, NaN out
        a.op(blend, dst, td, x, tb)
        for t in (td, tc, tb, ta):
            free.insert(0, t)

    def _exp(self, dst, x, take, free):
        """dst = exp(x), the LLVM path's `ck_expf` (codegen/mathlib.build_exp) step for step:
        the same clamps, Cody-Waite reduction, Estrin polynomial with the same fused
        multiply-adds, and 2^n as two exact factors, so both generators give the same bits.
        Softmax's exp was the one op that sent whole models' nodes to LLVM (and with them
        LLVM's fixed cost of a module and a JIT)."""
        a = self.frame.asm
        ta, tb, tc, td, te = (take() for _ in range(5))

        def c(v):
            return a.const(f32x8(v))

        fma231, fma213 = "VEX_VFMADD231PS_YMM_YMM_YMMM256", "VEX_VFMADD213PS_YMM_YMM_YMMM256"
        mov, blend = "VEX_VMOVUPS_YMM_YMMM256", "VEX_VBLENDVPS_YMM_YMM_YMMM256_YMM"
        cmp = "VEX_VCMPPS_YMM_YMM_YMMM256_IMM8"
        # xc = clamp(x, -104, 89); the ordered compares send NaN to -104
        lo, hi = mathlib.EXP_RANGE
        a.op(mov, ta, c(lo))
        a.op(cmp, tb, x, ta, 0x1E)  # x > -104 (ordered)
        a.op(blend, tc, ta, x, tb)
        a.op(mov, ta, c(hi))
        a.op(cmp, tb, tc, ta, 0x11)  # xc < 89 (ordered)
        a.op(blend, tc, ta, tc, tb)
        # n = floor(xc * log2(e) + 0.5), one rounding for the product and sum
        a.op(mov, td, c(0.5))
        a.op(fma231, td, tc, c(mathlib.LOG2E))
        a.op("VEX_VROUNDPS_YMM_YMMM256_IMM8", td, td, 0x09)  # toward -inf, no exception
        # r = xc - n * ln2 in two parts
        a.op("VEX_VMOVAPS_YMM_YMMM256", te, tc)
        for part in mathlib.LN2_PARTS:
            a.op(fma231, te, td, c(part))
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", tc, te, te)  # r^2
        (a0, b0), (a1, b1), (a2, b2) = mathlib.EXP_PAIRS
        a.op(mov, ta, c(b0))
        a.op(fma231, ta, te, c(a0))  # p0
        a.op(mov, tb, c(b1))
        a.op(fma231, tb, te, c(a1))  # p1
        a.op(fma213, ta, tc, tb)  # p0 * r^2 + p1
        a.op(mov, tb, c(b2))
        a.op(fma231, tb, te, c(a2))  # p2
        a.op(fma213, ta, tc, tb)  # (...) * r^2 + p2
        a.op(fma213, ta, tc, te)  # p * r^2 + r
        a.op("VEX_VADDPS_YMM_YMM_YMMM256", ta, ta, c(1.0))
        # 2^n as 2^(n >> 1) * 2^(n - (n >> 1)), each built in the exponent bits
        a.op("VEX_VCVTTPS2DQ_YMM_YMMM256", td, td)
        a.op("VEX_VPSRAD_YMM_YMM_IMM8", tb, td, 1)
        a.op("VEX_VPSUBD_YMM_YMM_YMMM256", td, td, tb)
        bias = a.const(i32x8([127] * W))
        for t in (tb, td):
            a.op("VEX_VPADDD_YMM_YMM_YMMM256", t, t, bias)
            a.op("VEX_VPSLLD_YMM_YMM_IMM8", t, t, 23)
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", ta, ta, tb)
        a.op("VEX_VMULPS_YMM_YMM_YMMM256", ta, ta, td)
        a.op(cmp, tb, x, x, 0x03)  # NaN in, NaN out
        a.op(blend, dst, ta, x, tb)
        for t in (te, td, tc, tb, ta):
            free.insert(0, t)


def _uses(step):
    if step[0] == "store":
        return [step[1]]
    if step[0] == "float":
        return list(step[1].operands)
    return []


def _r32(reg64):
    from iced_x86 import Register
    names = {GPR[k]: k for k in GPR}
    n = names[reg64]
    r32 = {"rax": "EAX", "rbx": "EBX", "rcx": "ECX", "rdx": "EDX", "rsi": "ESI", "rdi": "EDI",
           "rbp": "EBP", "rsp": "ESP"}.get(n, n.upper() + "D")
    return getattr(Register, r32)
