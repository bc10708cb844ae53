"""Kernel IR -> LLVM IR for `nvptx64-nvidia-cuda`: one `ptx_kernel` function per top-level
`krnl.iterate`, launched in program order by the GPU backend.

Assumes buffer planning and the GPU schedule (krnl_passes/gpu_map.py) have run: each top-level
nest's `#krnl.gpu_map` attribute says which loops become threads, the block size and the matmul
tile, and this emitter does what it says (`gpu_map.mapping_of` reads it and refuses a mapping
that does not fit its nest); a nest without one is an error naming the node. The Kernel IR is
only read. Every kernel has the same parameters:

    kernel(inputs..., outputs..., arena, constants)     // generic i8* device pointers
    kernel(inputs..., outputs..., arena, constants, i64 outer...)   // inner nest of a split

Intermediate buffers are offsets in the arena (as on the host); constants are offsets in one
constant buffer that the backend uploads once (large splats are filled there by numpy, never
spelled out in the PTX), so the PTX stays small enough to read. The loop bodies are emitted by
the host `Emitter` itself (same loads, stores, arith, IR math library): this subclass only
replaces the loops that become threads by thread indices (`loop`), and a matmul nest by a
shared-memory tiled kernel (`tiled_matmul`). Run-time checks (`krnl.check`, guarded integer
division) store their number into the device global `ck_status`; `.checks` holds the messages.
`.functions` maps every kernel (and helper) to the ONNX node it came from (see emit.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import llvmlite.ir as ir
import numpy as np
from xdsl.dialects import func

from compilerkit.codegen.emit import (
    ENTRY,
    I8P,
    I64,
    Emitter,
    _op_label,
    constant_bytes,
    mem_type,
    numpy_dtype,
)
from compilerkit.codegen.microkernel import clamp_code, clamp_value
from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.krnl_passes.gpu_map import mapping_of
from compilerkit.onnx_passes.single_node import main_func

I32 = ir.IntType(32)
STATUS = "ck_status"  # i64 device global: 0, or the number of a failed run-time check
ALIGN = 64


@dataclass
class Launch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    mapping: str  # the gpu_map it runs, in words ("flat(0,1) block 256")
    n_extra: int = 0  # trailing i64 parameters: the outer indices of a split nest
    node: str | None = None  # the ONNX node whose nest it is


@dataclass
class ConstantPlan:
    """The constant buffer: (offset, bytes as a uint8 array, in the device's byte order) pieces
    and splats (offset, value, count, dtype)."""

    nbytes: int
    arrays: list
    splats: list

    def image(self) -> np.ndarray:
        out = np.zeros(max(self.nbytes, 1), np.uint8)
        for offset, raw in self.arrays:
            out[offset:offset + raw.size] = raw
        for offset, value, count, dtype in self.splats:
            # Host-side fill, once per compiled model: no init kernel, nothing in the PTX.
            out[offset:offset + count * dtype.itemsize].view(dtype)[:] = value
        return out


class GpuEmitter(Emitter):
    def __init__(self, kmodule, target):
        super().__init__(kmodule, target)
        self.fn = None  # no host entry function: nested iterates are always emitted inline
        self.b = None
        self.launches: list[Launch] = []  # one per kernel
        self.steps: list[tuple[int, tuple]] = []  # launch order: (kernel index, extra args)
        self._pending = []

    # ---- run-time checks: a device global the session reads after the launches ------------
    def guard(self, ok, message: str):
        code = ir.Constant(I64, self.check_code(message))
        status = self.module.globals.get(STATUS)
        if status is None:
            status = ir.GlobalVariable(self.module, I64, STATUS, addrspace=1)
            status.initializer = ir.Constant(I64, 0)
            status.align = 8
        # Only failing threads store (any failing thread's code will do): a read-modify-write
        # by every thread could put back a 0 over another thread's code.
        with self.b.if_then(self.b.not_(ok)):
            self.b.store(code, status)

    # ---- thread indices --------------------------------------------------------------------
    def sreg(self, name: str):
        full = f"llvm.nvvm.read.ptx.sreg.{name}"
        fn = self.module.globals.get(full) or ir.Function(
            self.module, ir.FunctionType(I32, []), full)
        return self.b.zext(self.b.call(fn, []), I64)

    def loop(self, lo, hi, step, body):
        # Emitter.iterate asks for the loops of a nest outermost first; the ones mapped to
        # threads were queued with their thread index, the others (None) stay loops.
        if self._pending:
            iv = self._pending.pop(0)
            if iv is not None:
                body(iv)
                return iv
        return super().loop(lo, hi, step, body)

    # ---- the module ------------------------------------------------------------------------
    def emit(self):
        f = main_func(self.kmodule)
        args = list(f.body.block.args)
        self.n_args = len(args)
        self.recipes = {a: ("arg", k) for k, a in enumerate(args)}
        self.prelude = []
        arrays, splats, nbytes = [], [], 0
        n = 0
        for op in f.body.block.ops:
            if isinstance(op, krnl.GlobalOp):
                t = op.res.type
                dtype = numpy_dtype(t.element_type)
                count = max(1, math.prod(t.get_shape()))
                array = onnx_d.attr_array(op.value, self.kmodule)
                if array.dtype == np.bool_:
                    array = array.astype(np.int8)
                if array.size and onnx_d.is_splat(array) and array.size > 1024:
                    splats.append((nbytes, array.reshape(-1)[0].item(), count, dtype))
                elif array.size:
                    arrays.append((nbytes, constant_bytes(array, t.element_type,
                                                          self.target.byte_order)))
                self.recipes[op.res] = ("const", nbytes)
                nbytes += (count * dtype.itemsize + ALIGN - 1) // ALIGN * ALIGN
            elif isinstance(op, krnl.AllocOp):
                if op.offset is None:
                    raise ValueError("krnl.alloc without an arena offset: run buffer planning")
                self.recipes[op.res] = ("arena", op.offset.value.data)
            elif isinstance(op, krnl.ReshapeOp):
                self.recipes[op.res] = self.recipes[op.source]
            elif isinstance(op, krnl.IterateOp):
                n += 1
                self.kernel(op, n)
            elif isinstance(op, func.ReturnOp):
                pass
            elif op.name.startswith(("arith.", "math.")) and op.name != "arith.constant":
                self.prelude.append(op)  # index arithmetic: recomputed in each kernel
            else:
                self.op(op)  # loop handles, schedule ops, constants: no code
        self.constants = ConstantPlan(nbytes, arrays, splats)
        arena = f.attributes.get("arena_bytes")
        self.arena_bytes = arena.value.data if arena is not None else 0
        self.list_helpers()
        return self.module

    def kernel(self, it, n: int, prelude=(), suffix: str = "", extra=()):
        mapping = mapping_of(it)
        tag = it.attributes.get("onnx_node")
        if tag is not None:
            self.node = tag.data
        elif not extra:  # a nest lowering added on its own (the inner nests of a split keep
            self.node = "?"  # their outer nest's node)
        if mapping.kind == "split":
            plan = self.split(it, n, prelude, suffix, extra)
            if not extra:
                self.steps += list(_expand(plan, ()))
            return plan
        name = f"{ENTRY}_{_op_label(it, n)}{suffix}"
        params = [I8P] * (self.n_args + 2) + [I64] * len(extra)
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), params), name)
        fn.calling_convention = "ptx_kernel"
        self.functions[name] = self.node if self.node != "?" else None
        for arg in fn.args[:self.n_args + 2]:
            arg.add_attribute("noalias")  # distinct device allocations
        for a, arg in zip(extra, fn.args[self.n_args + 2:], strict=True):
            self.values[a] = arg
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.alloca_block = self.b.block
        # In IR order (not a set's): the same module always gives the same LLVM IR text.
        prelude = self.prelude + list(prelude)
        used = dict.fromkeys(v for op in [*it.walk(), *prelude] for v in op.operands
                             if v in self.recipes)
        for v in used:
            kind, where = self.recipes[v]
            base = fn.args[where] if kind == "arg" else fn.args[
                self.n_args + (0 if kind == "arena" else 1)]
            if kind != "arg":
                base = self.b.gep(base, [ir.Constant(I64, where)])
            self.values[v] = self.b.bitcast(base, mem_type(v.type.element_type).as_pointer())
        for op in prelude:
            self.op(op)
        if mapping.kind == "matmul":
            grid, block = self.matmul_nest(it, mapping, name)
        else:
            grid, block = self.flat(it, mapping)
        self.b.ret_void()
        self.require_block(fn, block)
        self.launches.append(Launch(name, grid, block, mapping.describe(), len(extra),
                                    self.functions[name]))
        if not extra:
            self.steps.append((len(self.launches) - 1, ()))
        return len(self.launches) - 1

    def require_block(self, fn, block):
        """Write the block the kernel is launched with into the module as NVVM's `reqntid`
        annotation (PTX `.reqntid x, y, z`): a reader of the LLVM IR or PTX sees the launch
        shape the gpu_map chose, ptxas may use it, and a launch with another shape fails
        instead of running the kernel on threads it does not expect."""
        for axis, size in zip("xyz", block, strict=True):
            self.module.add_named_metadata("nvvm.annotations", [
                fn, ir.MetaDataString(self.module, f"reqntid{axis}"), ir.Constant(I32, size)])

    def split(self, it, n: int, prelude=(), suffix: str = "", extra=()):
        """The outer loops run on the host: each inner nest is one kernel taking the outer
        induction variables (those of every enclosing split too) as i64 parameters, launched
        once per outer point, in order. An inner nest that is itself split (Conv: batch x
        group around its panels) nests the same way. Returns the launch plan: (bounds, items),
        each item a kernel index or an inner plan."""
        body = list(it.body.block.ops)
        own = [op for op in body if op.name.startswith("arith.")]
        for op in body:
            if not isinstance(op, krnl.IterateOp) and op not in own:
                self.op(op)  # loop handles and schedule ops: no code
        prelude, extra = list(prelude) + own, list(extra) + list(it.body.block.args)
        items = [self.kernel(op, n, prelude, suffix=f"{suffix}_{k}", extra=extra)
                 for k, op in enumerate(x for x in body if isinstance(x, krnl.IterateOp))]
        return it.bound_list(), items

    # ---- elementwise, reductions, everything else: flat 1-D threads ------------------------
    def flat(self, it, mapping):
        b = self.b
        original = list(it.original)
        bounds = it.bound_list()
        mapped = [original[p] for p in mapping.loops]
        trips = [bounds[p][1] - bounds[p][0] for p in mapping.loops]
        total = math.prod(trips)
        ivs = {}
        exit_bb = None
        if mapped:
            gid = b.add(b.mul(self.sreg("ctaid.x"), self.sreg("ntid.x")), self.sreg("tid.x"))
            inside = b.function.append_basic_block("inside")
            exit_bb = b.function.append_basic_block("exit")
            b.cbranch(b.icmp_signed("<", gid, ir.Constant(I64, total)), inside, exit_bb)
            b.position_at_end(inside)
            # Row-major: the last mapped loop varies fastest across neighbouring threads, so a
            # warp reads and writes consecutive elements (coalesced).
            stride = total
            for h, p, trip in zip(mapped, mapping.loops, trips, strict=True):
                stride //= trip
                digit = b.udiv(gid, ir.Constant(I64, stride)) if stride > 1 else gid
                digit = b.urem(digit, ir.Constant(I64, trip)) if stride * trip < total else digit
                ivs[h] = b.add(digit, ir.Constant(I64, bounds[p][0]))
        # Queue one entry per loop Emitter.iterate will ask for; thread-mapped loops and any
        # unroll marks before them are taken out of unrolling (a mapped loop is not a loop).
        emitted = list(it.emitted)
        last = max((emitted.index(h) for h in mapped), default=-1)
        for k, h in enumerate(emitted):
            if k <= last:
                self.unrolled.discard(h)
        self._pending = []
        for h in emitted:
            kind, base, _ = self.loops[h]
            lo, hi = bounds[original.index(base)]
            if h in self.unrolled and kind == "full" and hi - lo <= 64:
                continue
            self._pending.append(ivs.get(h) if kind == "full" else None)
        self.iterate(it)
        assert not self._pending, "every queued loop is emitted by Emitter.iterate"
        if exit_bb is not None:
            b.branch(exit_bb)
            b.position_at_end(exit_bb)
        if not mapped:
            return (1, 1, 1), (1, 1, 1)
        threads = mapping.block  # as the gpu_map attribute says (the pass rounds to warps)
        return ((total + threads - 1) // threads, 1, 1), (threads, 1, 1)

    # ---- MatMul / Gemm / Conv (im2col): tiled with shared memory ---------------------------
    def matmul_nest(self, it, mapping, name):
        mm, nest, tile = mapping.matmul, mapping.matmul_nest, mapping.tile
        batch = 1
        if nest is not it:
            bounds = it.bound_list()
            trips = [hi - lo for lo, hi in bounds]
            batch = math.prod(trips)
            z = self.sreg("ctaid.z")
            stride = batch
            for a, (lo, _), trip in zip(it.body.block.args, bounds, trips, strict=True):
                stride //= trip
                digit = self.b.urem(self.b.udiv(z, ir.Constant(I64, stride)),
                                    ir.Constant(I64, trip))
                self.values[a] = self.b.add(digit, ir.Constant(I64, lo))
            for op in it.body.block.ops:
                if op is nest:
                    self.tiled_matmul(mm, name, tile)
                else:
                    self.op(op)  # batch offsets (arith) and loop handles
        else:
            self.tiled_matmul(mm, name, tile)
        m, n, _ = krnl.ints_of(mm.sizes)
        return ((n + tile - 1) // tile, (m + tile - 1) // tile, batch), (tile, tile, 1)

    def tiled_matmul(self, mm, name, tile: int):
        """C[i, j] += sum_k A[i, k] B[k, j] for one tile x tile block of C per thread block
        (`tile`: the gpu_map's): each k step stages a tile x tile block of A and of B in shared
        memory (each thread loads one element of each), so every global element is read once
        per block instead of `tile` times. The sum runs over k in order, fused multiply-add,
        starting from C (or from 0 or the row's bias, the matmul's `start`), clamped when
        stored if the matmul has a clamp: as the host's micro-kernel does."""
        if mm.taps is not None:  # the CPU-only tap schedule (lowering/conv_taps.py) writes it
            raise NotImplementedError(f"krnl.matmul {name}: a_taps (a CPU Conv schedule's) on "
                                      "the GPU")
        b = self.b
        a, bm, c = (self.ptr(v) for v in (mm.a, mm.b, mm.c))
        a_off, b_off, c_off = (self.values[v] for v in (mm.a_off, mm.b_off, mm.c_off))
        m, n, k = krnl.ints_of(mm.sizes)
        sa_r, sa_k, ldb, ldc = krnl.ints_of(mm.strides)
        elem = a.type.pointee
        C = lambda v: ir.Constant(I64, v)  # noqa: E731
        zero = ir.Constant(elem, 0.0)
        tiles = []
        for suffix in ("As", "Bs"):
            g = ir.GlobalVariable(self.module, ir.ArrayType(elem, tile * tile),
                                  f"{name}_{suffix}", addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(g.type.pointee, None)
            g.align = 16
            tiles.append(g)
        a_s, b_s = tiles
        fma = self.module.globals.get(f"llvm.fmuladd.{'f32' if elem == ir.FloatType() else 'f64'}")
        if fma is None:
            fma = ir.Function(self.module, ir.FunctionType(elem, [elem] * 3),
                              f"llvm.fmuladd.{'f32' if elem == ir.FloatType() else 'f64'}")
        barrier = self.module.globals.get("llvm.nvvm.barrier0") or ir.Function(
            self.module, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0")
        tx, ty = self.sreg("tid.x"), self.sreg("tid.y")
        row = b.add(b.mul(self.sreg("ctaid.y"), C(tile)), ty)
        col = b.add(b.mul(self.sreg("ctaid.x"), C(tile)), tx)
        in_r, in_c = b.icmp_signed("<", row, C(m)), b.icmp_signed("<", col, C(n))
        # Out-of-range threads still load (clamped, always in bounds) and pass the barriers;
        # their values are replaced by zero and they store nothing.
        r_safe, c_safe = self.imin(row, C(m - 1)), self.imin(col, C(n - 1))
        c_ptr = b.gep(c, [b.add(c_off, b.add(b.mul(r_safe, C(ldc)), c_safe))])
        with b.goto_entry_block():
            acc = b.alloca(elem)
        # the sum starts from C, or (krnl.matmul start) from 0 or the row's bias
        start = mm.start_kind
        init = (zero if start == "zero" else
                b.load(b.gep(self.ptr(mm.bias), [r_safe])) if start == "bias" else
                b.load(c_ptr))
        b.store(init, acc)

        def shared(g, i, j):
            return b.gep(g, [C(0), b.add(b.mul(i, C(tile)), j)])

        def k_step(k0):
            ak = b.add(k0, tx)
            av = b.load(b.gep(a, [b.add(a_off, b.add(b.mul(r_safe, C(sa_r)),
                                                      b.mul(self.imin(ak, C(k - 1)), C(sa_k))))]))
            ok_a = b.and_(in_r, b.icmp_signed("<", ak, C(k)))
            b.store(b.select(ok_a, av, zero), shared(a_s, ty, tx))
            bk = b.add(k0, ty)
            bv = b.load(b.gep(bm, [b.add(b_off, b.add(b.mul(self.imin(bk, C(k - 1)), C(ldb)),
                                                      c_safe))]))
            ok_b = b.and_(in_c, b.icmp_signed("<", bk, C(k)))
            b.store(b.select(ok_b, bv, zero), shared(b_s, ty, tx))
            b.call(barrier, [])
            s = b.load(acc)
            for kk in range(tile):  # past K both tiles hold zeros: fma(0, 0, s) == s
                s = b.call(fma, [b.load(shared(a_s, ty, C(kk))), b.load(shared(b_s, C(kk), tx)), s])
            b.store(s, acc)
            b.call(barrier, [])

        if k > 0:
            self.loop(C(0), C(k), C(tile), k_step)
        store_bb = b.function.append_basic_block("store")
        done_bb = b.function.append_basic_block("done")
        b.cbranch(b.and_(in_r, in_c), store_bb, done_bb)
        b.position_at_end(store_bb)
        total = b.load(acc)
        if clamp_code(mm.clamp):  # the finished product clamped (krnl.matmul clamp)
            bounds = [ir.Constant(elem, 0.0 if x is None else x) for x in mm.clamp]
            total = clamp_value(b, self.module, total, clamp_code(mm.clamp), *bounds)
        b.store(total, c_ptr)
        b.branch(done_bb)
        b.position_at_end(done_bb)


def _expand(plan, outer: tuple):
    """A split's launch plan -> (kernel index, i64 arguments) steps in program order: for every
    outer point (row-major), its items in order, inner plans expanded in turn."""
    bounds, items = plan
    for point in np.ndindex(*[hi - lo for lo, hi in bounds]):
        values = outer + tuple(lo + int(v) for (lo, _), v in zip(bounds, point, strict=True))
        for item in items:
            if isinstance(item, int):
                yield item, values
            else:
                yield from _expand(item, values)


def emit_gpu(kmodule, target) -> GpuEmitter:
    """Kernel IR -> a GpuEmitter whose `.module` is the NVPTX llvmlite module, `.launches` the
    kernels in launch order, `.constants` the constant buffer's plan and `.functions` each
    kernel's ONNX node."""
    e = GpuEmitter(kmodule, target)
    e.emit()
    return e
