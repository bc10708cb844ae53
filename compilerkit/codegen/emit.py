r"""Kernel IR -> LLVM IR with llvmlite.

Assumes buffer planning has run (every krnl.alloc has an arena `offset`). Produces one
C-callable entry point

    int64_t main_graph(void **buffers, int64_t num_threads)   // inputs..., outputs..., arena

plus `main_graph_arena_bytes()`. `main_graph` returns a status: 0, or the 1-based number of a
run-time check that failed (`krnl.check`, e.g. a Gather index out of range, and the guards on
integer division by zero and INT_MIN / -1, which would otherwise trap); after a failed check the
code carries on with a safe value (a clamped index, a divisor of 1) and the outputs are
garbage. `const char *main_graph_check_message(int64_t status)` names the node and the fault
(NULL for 0). `num_threads` is how many threads the `krnl.parallel` loops use
(parallel_iterate: libgomp on the host; serial loops on targets without threads, see
THREADED_TARGETS). Every call keeps its state on the stack and in the arena it is given, so calls
with distinct arenas may run at once. Memrefs are flat pointers, row-major; `krnl.iterate` nests
become counted loops (blocked loops step by the tile, inner tile loops stop at min(end, ...)),
`krnl.matmul` becomes a register-blocked micro-kernel with `simd`-wide vectors. Constants are
byte arrays (`[n x i8] c"\3F\80..."`) holding numpy's bytes of the weights in the *target's*
byte order (`Target.byte_order`; onnx-mlir issue 2851 is what happens otherwise), read through a
typed pointer: LLVM parses a byte string about 30x faster than a list of floats, which dominated
compile time on real models. The bytes are turned into text only while the module is printed
(`BytesConstant`), so no other copy of a weight lives in Python. Large splat constants are
zero-initialised globals filled once by the entry function. math ops call compilerkit's own IR
math library (mathlib.py), never libm.

Provenance, as MLIR's `loc` would carry it: the nests of one ONNX node (lowering tags them
`onnx_node`) become one function, and `Emitter.functions` records, as each function is created,
the node it came from: {function name: node name, or None for the entry point and shared
helpers (micro-kernels, fills, the math library)}. Nodes whose functions would be identical
share one (see `outline`); it then maps to the tuple of those nodes, first the one it was made
for. measure/provenance.py reads it instead of parsing function names back.
"""

from __future__ import annotations

import math

import llvmlite.ir as ir
import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
)

from compilerkit.codegen.mathlib import MathLib
from compilerkit.codegen.microkernel import (
    START_CODES,
    clamp_code,
    clamp_value,
    counted_loop,
    fmuladd,
    kernel_rows,
    matmul_kernel,
)
from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.single_node import main_func

ENTRY = "main_graph"
THREADED_TARGETS = ("host",)  # targets whose code calls libgomp for krnl.parallel loops
# a parallel loop is handed out in about this many chunks per thread (parallel_iterate)
GRAINS_PER_THREAD = 4
# Attributes that name ONNX nodes (lowering's tag, the nodes fuse-nests computed in a nest):
# not part of the code, so not of a nest's sharing key.
NODE_TAGS = ("onnx_node", "fused_nodes")
I64 = ir.IntType(64)
I8P = ir.IntType(8).as_pointer()


def llvm_type(t):
    """Scalar type in registers (i1 for booleans)."""
    if isinstance(t, Float32Type):
        return ir.FloatType()
    if isinstance(t, Float64Type):
        return ir.DoubleType()
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    raise NotImplementedError(f"type {t}")


def _type_suffix(t) -> str:
    """LLVM's overloaded-intrinsic suffix of a float type: f32, f64, f16, v8f32, ..."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_type_suffix(t.element)}"
    return {ir.FloatType: "f32", ir.DoubleType: "f64", ir.HalfType: "f16"}[type(t)]


def mem_type(t):
    """Scalar type in memory: booleans are bytes, as numpy stores them."""
    lt = llvm_type(t)
    return ir.IntType(8) if lt == ir.IntType(1) else lt


def _row_strides(dims):
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return out[::-1]


_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def numpy_dtype(elem) -> np.dtype:
    """The numpy dtype of a Kernel IR element type as stored in memory (booleans: int8)."""
    t = mem_type(elem)
    if t == ir.FloatType():
        return np.dtype(np.float32)
    if t == ir.DoubleType():
        return np.dtype(np.float64)
    return np.dtype(f"int{t.width}")


def constant_bytes(array: np.ndarray, elem, byte_order: str) -> np.ndarray:
    """The bytes (a flat uint8 array) of a constant as `elem` values in `byte_order` ("little"
    or "big"). A view of `array` when it is already stored that way (the weights on a
    little-endian host), else one converted copy."""
    dtype = numpy_dtype(elem).newbyteorder("<" if byte_order == "little" else ">")
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.astype(dtype, copy=False).view(np.uint8)


class BytesConstant(ir.Constant):
    """An `[n x i8]` constant over a uint8 array, spelled `c"\\3F\\80..."` (every byte as two
    hex digits) only when the module is printed and never cached: llvmlite's own bytearray
    constant keeps a Python list of one string per byte."""

    def __init__(self, data: np.ndarray):
        super().__init__(ir.ArrayType(ir.IntType(8), data.size), None)
        self.data = data

    def get_reference(self) -> str:
        # Built in one numpy buffer (a backslash and two hex digits per byte), then decoded.
        n = self.data.size
        text = np.empty(3 * n + 3, np.uint8)
        text[:2] = np.frombuffer(b'c"', np.uint8)
        text[-1] = ord('"')
        escapes = text[2:-1].reshape(n, 3)
        escapes[:, 0] = ord("\\")
        escapes[:, 1] = _HEX[self.data >> 4]
        escapes[:, 2] = _HEX[self.data & 15]
        return str(text, "ascii")

    def __str__(self) -> str:
        return f"{self.type} {self.get_reference()}"

    _to_string = __str__

    def __repr__(self) -> str:
        return f"<BytesConstant [{self.data.size} x i8]>"



class NestKey:
    """A nest key (Emitter.nest_key: a nested tuple) whose hash is computed once: Python does
    not keep a tuple's hash, and `outline` looks a key up to three times, each lookup hashing
    the whole key, xDSL attributes field by field."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple):
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (type(other) is NestKey and other._hash == self._hash
                and other.value == self.value)


def defined_inside(nests, walked=None) -> set:
    """Every value the ops `nests` (and the ops nested in them) define: results and block
    arguments. What they use from elsewhere is what a function made of them must be passed.
    `walked`: those ops already listed in walk order (walk_ops), if the caller has them."""
    inside = set()
    for inner in walk_ops(nests) if walked is None else walked:
        inside.update(inner.results)
        for region in inner.regions:
            for blk in region.blocks:
                inside.update(blk.args)
    return inside


def walk_ops(nests) -> list:
    """The ops of `nests` and every op nested in them, in walk order: listed once per
    outlined node and read by captures, nest_key and the threads check (each walked the
    nests on its own, a fifth of emitting DenseNet-121)."""
    return [inner for op in nests for inner in op.walk()]


class Emitter:
    # Emit a node's function even when its nests' key finds one to share, and check that the
    # code is the same (tests; see Emitter.nest_key).
    verify_sharing = False
    # The byte order of constants: None for the target's. "little" on a big-endian target is
    # the onnx-mlir 2851 bug, built on purpose by backends.emulated.HostBytesEmitter.
    constant_byte_order: str | None = None
    # Called as on_group(head, functions) when a node's function and its parallel bodies are
    # done (never changed after), for a backend that compiles them while the rest is emitted
    # (backends/split.py PartitionStream); None: nobody is told.
    on_group = None

    def __init__(self, kmodule, target):
        self.kmodule = kmodule
        self.target = target
        self.module = ir.Module(name="compilerkit")
        self.module.triple = target.triple
        if target.data_layout:
            self.module.data_layout = target.data_layout
        self.math = MathLib(self.module)
        self.values = {}
        self.loops = {}  # loop handle -> (kind, original handle, tile)
        self.unrolled = set()
        self.splat_fills = []
        self.checks = []  # run-time check messages; status k means checks[k - 1] failed
        self.status = None  # the i64 status slot (an alloca) of the function being emitted
        self.node = "?"  # the ONNX node whose nests are being emitted (for messages)
        # function -> its ONNX node (None: none; a tuple of nodes for a shared function)
        self.functions: dict[str, str | tuple[str, ...] | None] = {}
        # krnl.parallel loops run on libgomp's threads on the host; elsewhere (the emulated
        # targets) the same loops run serially, which gives the same answer.
        self.threads = target.name in THREADED_TARGETS
        self.num_threads = None  # the i64 thread count of the function being emitted
        # Node functions by their keys (their text's, and their nests', see outline).
        self.shared_keys: dict = {}
        self.bodies: dict[str, list[str]] = {}  # node function -> it and its parallel bodies
        self.made: list[ir.Function] = []  # the functions the current outline made
        self.n_parallel = 0  # parallel bodies of the current node function so far

    # ---- helpers ---------------------------------------------------------------------------
    def ptr(self, mem):
        return self.values[mem]

    def linear(self, mem, indices):
        dims = list(mem.type.get_shape())
        acc = None
        for idx, s in zip(indices, _row_strides(dims), strict=True):
            v = self.values[idx]
            t = v if s == 1 else self.b.mul(v, ir.Constant(I64, s))
            acc = t if acc is None else self.b.add(acc, t)
        return acc if acc is not None else ir.Constant(I64, 0)

    def loop(self, lo, hi, step, body):
        return counted_loop(self.b, lo, hi, step, body)

    def imin(self, a, c):
        return self.b.select(self.b.icmp_signed("<", a, c), a, c)

    # ---- run-time checks -------------------------------------------------------------------
    def check_code(self, message: str) -> int:
        if message not in self.checks:
            self.checks.append(message)
        return self.checks.index(message) + 1

    def new_status(self):
        """An i64 status slot, 0, at the top of the current function (mem2reg makes it a
        register: a check in a loop becomes a select, which keeps the loop vectorisable)."""
        with self.b.goto_entry_block():
            slot = self.b.alloca(I64, name="status")
        self.b.store(ir.Constant(I64, 0), slot)
        return slot

    def guard(self, ok, message: str):
        """Report `message` (status = its code) unless the i1 `ok` holds."""
        code = ir.Constant(I64, self.check_code(message))
        cur = self.b.load(self.status)
        self.b.store(self.b.select(ok, cur, code), self.status)

    def maxnum(self, x, y):
        """The larger number, a NaN operand ignored (IEEE maxNum). x86-64 and NVPTX have it as
        an instruction (llvm.maxnum); elsewhere LLVM calls libm's fmaxf, which the emulated
        machines do not provide, so it is spelled out: max(x, y), but the other operand where
        one is NaN."""
        b = self.b
        if self.target.triple.split("-")[0] in ("x86_64", "nvptx64", "nvptx"):
            name = f"llvm.maxnum.{_type_suffix(x.type)}"
            fn = self.module.globals.get(name) or ir.Function(
                self.module, ir.FunctionType(x.type, [x.type] * 2), name)
            return b.call(fn, [x, y])
        larger = b.select(b.fcmp_ordered(">", x, y), x, y)
        return b.select(b.fcmp_unordered("uno", y, y), x, larger)

    def safe_divide(self, kind, x, y):
        """Signed integer x / y or x % y, guarded: y == 0 and INT_MIN / -1 trap on most CPUs
        (SIGFPE on x86, a fixed-point-divide exception on s390x) and are undefined in LLVM, so
        the divisor is checked first and replaced by 1 when it would fault."""
        b = self.b
        t = y.type
        if isinstance(y, ir.Constant) and y.constant not in (0, -1):
            return kind(x, y)
        what = "remainder" if kind == b.srem else "division"
        zero = b.icmp_signed("==", y, ir.Constant(t, 0))
        overflow = b.and_(b.icmp_signed("==", x, ir.Constant(t, -(1 << (t.width - 1)))),
                          b.icmp_signed("==", y, ir.Constant(t, -1)))
        self.guard(b.not_(zero), f"node {self.node!r}: integer {what} by zero")
        self.guard(b.not_(overflow), f"node {self.node!r}: integer {what} overflows (the most "
                                     f"negative i{t.width} divided by -1)")
        return kind(x, b.select(b.or_(zero, overflow), ir.Constant(t, 1), y))

    def float_to_int(self, x, t):
        """Float -> signed integer `t`, truncating, defined for every input as onnxruntime on
        x86-64 answers: the value goes to i32 (i64 for an i64 result) as cvttss2si does, NaN,
        +-inf and values whose truncation does not fit giving the most negative integer
        (0x80000000, the "integer indefinite"), then narrower results keep the low bits
        (Cast to int8 of 300.7 is 44, of NaN 0). LLVM's fptosi is poison there, and each CPU
        fills it in its own way (s390x and POWER saturate), so the range is checked here and
        fptosi only ever sees values that fit."""
        b = self.b
        wide = ir.IntType(64 if t.width > 32 else 32)
        limit = float(1 << (wide.width - 1))
        # trunc(x) fits iff -2^(w-1) - 1 < x < 2^(w-1); the lower bound rounds to -2^(w-1) in
        # floating point, which only leaves out x = -2^(w-1) itself, whose answer is the same
        ok = b.and_(b.fcmp_ordered("<", x, ir.Constant(x.type, limit)),
                    b.fcmp_ordered(">", x, ir.Constant(x.type, -limit - 1)))
        safe = b.fptosi(b.select(ok, x, ir.Constant(x.type, 0.0)), wide)
        y = b.select(ok, safe, ir.Constant(wide, -(1 << (wide.width - 1))))
        return y if t.width == wide.width else b.trunc(y, t)

    # ---- globals ---------------------------------------------------------------------------
    def global_(self, op):
        t = op.res.type
        elem = t.element_type
        n = max(1, math.prod(t.get_shape()))
        array = onnx_d.attr_array(op.value, self.kmodule)
        if array.dtype == np.bool_:
            array = array.astype(np.int8)
        splat = onnx_d.is_splat(array) and array.size > 1024
        if array.size == 0 or splat:
            # An empty tensor (one unused element) or a splat: zeroinitializer; a splat is
            # filled at the first run, never spelled out byte by byte.
            init = ir.Constant(ir.ArrayType(mem_type(elem), n), None)
        else:
            order = self.constant_byte_order or self.target.byte_order
            init = BytesConstant(constant_bytes(array, elem, order))
        g = ir.GlobalVariable(self.module, init.type, name="g_" + op.sym_name.data)
        g.linkage = "internal"
        g.align = 64
        g.initializer = init
        g.global_constant = isinstance(init, BytesConstant)
        if splat:
            self.splat_fills.append((g, array.reshape(-1)[0].item(), n, elem))
        return self.b.bitcast(g, mem_type(elem).as_pointer())

    def _fill_fn(self, t):
        name = f"ck_fill_{str(t).replace(' ', '')}"
        if name in self.module.globals:
            return self.module.globals[name]
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [t.as_pointer(), t, I64]),
                         name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        p, value, n = fn.args
        counted_loop(b, ir.Constant(I64, 0), n, ir.Constant(I64, 1),
                     lambda i: b.store(value, b.gep(p, [i])))
        b.ret_void()
        return fn

    # ---- the entry function ----------------------------------------------------------------
    def emit(self):
        f = main_func(self.kmodule)
        args = f.body.block.args
        fn = ir.Function(self.module, ir.FunctionType(I64, [I8P.as_pointer(), I64]), ENTRY)
        # The entry function only addresses buffers and calls the node functions (their float
        # work is theirs), so nothing in it is worth vectorising; but it is one long block of
        # calls, on which LLVM's SLP vectoriser spent a fifth of a second (DenseNet-121: 0.21 s
        # of its -O3, on the partition that also holds the helpers). noimplicitfloat makes SLP
        # and the loop vectoriser skip it; the optimised entry function came out the same.
        fn.attributes.add("noimplicitfloat")
        self.fn = fn
        self.num_threads = fn.args[1]
        entry = fn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        self.alloca_block = entry
        self.status = self.new_status()
        # Function arguments and the arena, from the pointer array.
        for k, a in enumerate(list(args) + [None]):
            raw = self.b.load(self.b.gep(fn.args[0], [ir.Constant(I64, k)]))
            if a is None:
                self.arena = raw
            else:
                self.values[a] = self.b.bitcast(raw, mem_type(a.type.element_type).as_pointer())
        self.start = self.b.block
        body = fn.append_basic_block("body")
        self.b.position_at_end(body)
        for group in _op_groups(f.body.block):
            if isinstance(group, list):
                self.outline(group)
            else:
                self.op(group)
        self.b.ret(self.b.load(self.status))
        # Splat constants are filled on the first call only (a flag global remembers; acquire
        # and release order the fill before the flag for callers on other threads).
        self.b.position_at_end(self.start)
        if self.splat_fills:
            flag = ir.GlobalVariable(self.module, ir.IntType(8), name="splats_ready")
            flag.linkage = "internal"
            flag.initializer = ir.Constant(ir.IntType(8), 0)
            flag.align = 1
            fill_bb = fn.append_basic_block("fill_splats")
            ready = self.b.icmp_unsigned("!=", self.b.load_atomic(flag, "acquire", 1),
                                         ir.Constant(ir.IntType(8), 0))
            self.b.cbranch(ready, body, fill_bb)
            self.b.position_at_end(fill_bb)
            for g, value, n, elem in self.splat_fills:
                # One shared fill loop per element type, called per constant: hundreds of
                # inlined fill loops in one function made LLVM's -O3 slow (DenseNet).
                t = mem_type(elem)
                p = self.b.bitcast(g, t.as_pointer())
                self.b.call(self._fill_fn(t), [p, ir.Constant(t, value), ir.Constant(I64, n)])
            self.b.store_atomic(ir.Constant(ir.IntType(8), 1), flag, "release", 1)
            self.b.branch(body)
        else:
            self.b.branch(body)
        arena_bytes = f.attributes.get("arena_bytes")
        size = arena_bytes.value.data if arena_bytes is not None else 0
        sz = ir.Function(self.module, ir.FunctionType(I64, []), ENTRY + "_arena_bytes")
        ir.IRBuilder(sz.append_basic_block()).ret(ir.Constant(I64, size))
        self.message_function()
        self.list_helpers()
        return self.module

    def list_helpers(self):
        """Every other function the module defines belongs to no node (entry, helpers)."""
        for fn in self.module.functions:
            if not fn.is_declaration:
                self.functions.setdefault(fn.name, None)

    def message_function(self):
        """`const char *main_graph_check_message(int64_t status)`: the text of a failed check
        (NULL for 0 or an unknown status), NUL-terminated constants in the image."""
        fn = ir.Function(self.module, ir.FunctionType(I8P, [I64]), ENTRY + "_check_message")
        b = ir.IRBuilder(fn.append_basic_block())
        result = ir.Constant(I8P, None)
        for k, text in enumerate(self.checks, start=1):
            data = bytearray(text.encode("utf-8") + b"\0")
            at = ir.ArrayType(ir.IntType(8), len(data))
            g = ir.GlobalVariable(self.module, at, name=f"check_message_{k}")
            g.linkage = "internal"
            g.global_constant = True
            g.initializer = ir.Constant(at, data)
            hit = b.icmp_signed("==", fn.args[0], ir.Constant(I64, k))
            result = b.select(hit, b.bitcast(g, I8P), result)
        b.ret(result)

    # ---- one op ----------------------------------------------------------------------------
    def op(self, op):
        b = self.b
        if isinstance(op, func.ReturnOp):
            return
        if isinstance(op, krnl.GlobalOp):
            self.values[op.res] = self.global_(op)
        elif isinstance(op, krnl.AllocOp):
            if op.offset is None:
                raise ValueError("krnl.alloc without an arena offset: run buffer planning")
            raw = b.gep(self.arena, [ir.Constant(I64, op.offset.value.data)])
            self.values[op.res] = b.bitcast(raw, mem_type(op.res.type.element_type).as_pointer())
        elif isinstance(op, krnl.ReshapeOp):
            self.values[op.res] = self.values[op.source]
        elif isinstance(op, krnl.DefineLoopsOp):
            for h in op.loops:
                self.loops[h] = ("full", h, 1)
        elif isinstance(op, krnl.BlockOp):
            _, base, _ = self.loops[op.loop]
            t = op.tile.value.data
            self.loops[op.outer] = ("outer", base, t)
            self.loops[op.inner] = ("inner", base, t)
        elif isinstance(op, krnl.PermuteOp):
            pass  # the order is the one krnl.iterate lists (checked by the schedule helpers)
        elif isinstance(op, krnl.UnrollOp):
            self.unrolled.add(op.loop)
        elif isinstance(op, krnl.ParallelOp):
            pass  # read from the nest (krnl.parallel_loop) when it is emitted
        elif isinstance(op, krnl.IterateOp):
            if self.b.function is self.fn:
                self.outline([op])
            else:
                self.iterate(op)
        elif isinstance(op, krnl.LoadOp):
            p = b.gep(self.ptr(op.memref), [self.linear(op.memref, op.indices)])
            v = b.load(p)
            if llvm_type(op.res.type) == ir.IntType(1):
                v = b.trunc(v, ir.IntType(1))
            self.values[op.res] = v
        elif isinstance(op, krnl.StoreOp):
            v = self.values[op.value]
            if v.type == ir.IntType(1):
                v = b.zext(v, ir.IntType(8))
            b.store(v, b.gep(self.ptr(op.memref), [self.linear(op.memref, op.indices)]))
        elif isinstance(op, krnl.MatMulOp):
            self.matmul(op)
        elif isinstance(op, krnl.CheckOp):
            self.guard(self.values[op.ok], op.message.data)
        elif op.name == "scf.if":
            # A rare path (the tiled Convs' direct repair of tiles with special values):
            # a branch around it, so the common case costs one compare.
            with b.if_then(self.values[op.cond], likely=False):
                for inner in op.true_region.block.ops:
                    self.op(inner)
        elif op.name == "scf.yield":
            pass
        elif isinstance(op, arith.ConstantOp):
            t = llvm_type(op.result.type)
            v = op.value.value.data
            self.values[op.result] = ir.Constant(t, v if not isinstance(t, ir.IntType) else int(v))
        elif op.name.startswith("arith."):
            self.values[op.results[0]] = self.arith(op)
        elif op.name.startswith("math."):
            name = op.name.split(".")[1]
            name = {"absf": "fabs"}.get(name, name)
            args = [self.values[o] for o in op.operands]
            self.values[op.results[0]] = self.math.call(b, name, args)
        else:
            raise NotImplementedError(f"codegen: no rule for {op.name}")

    def arith(self, op):
        b = self.b
        v = [self.values[o] for o in op.operands]
        n = op.name[len("arith."):]
        simple = {"addf": b.fadd, "subf": b.fsub, "mulf": b.fmul, "divf": b.fdiv,
                  "addi": b.add, "subi": b.sub, "muli": b.mul, "andi": b.and_, "ori": b.or_,
                  "xori": b.xor, "shli": b.shl, "shrsi": b.ashr, "shrui": b.lshr}
        if n in ("divsi", "remsi"):
            return self.safe_divide(b.sdiv if n == "divsi" else b.srem, v[0], v[1])
        if n in simple:
            return simple[n](v[0], v[1])
        if n in ("maximumf", "minimumf"):
            # NaN-propagating max/min (ONNX Max/Min/Relu/MaxPool on NaN inputs), -0 < +0: LLVM's
            # llvm.maximum/minimum. Not two selects: a scalar float select has no x86 cmov, so
            # it became a branch per tap, mispredicted on real data (MaxPool 256 x 27 x 27,
            # 3 x 3 / 2: 0.97 ms against onnxruntime's 0.07 ms); the intrinsic lowers without
            # branches on every target.
            name = f"llvm.{n[:-1]}.{_type_suffix(v[0].type)}"
            fn = self.module.globals.get(name) or ir.Function(
                self.module, ir.FunctionType(v[0].type, [v[0].type] * 2), name)
            return b.call(fn, [v[0], v[1]])
        if n == "maxnumf":
            return self.maxnum(v[0], v[1])
        if n in ("maxsi", "minsi"):
            # i1 holds booleans: signed, true would be -1 and max(true, false) false.
            cmp = b.icmp_unsigned if v[0].type == ir.IntType(1) else b.icmp_signed
            return b.select(cmp(">" if n == "maxsi" else "<", v[0], v[1]), v[0], v[1])
        if n == "negf":
            return b.fneg(v[0])
        if n == "select":
            return b.select(v[0], v[1], v[2])
        if n == "cmpf":
            pred = op.predicate.value.data
            names = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt",
                     "uge", "ult", "ule", "une", "uno", "true"]
            p = names[pred]
            sym = {"eq": "==", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "ne": "!="}
            if p[0] == "o" and p[1:] in sym:
                return b.fcmp_ordered(sym[p[1:]], v[0], v[1])
            if p[0] == "u" and p[1:] in sym:
                return b.fcmp_unordered(sym[p[1:]], v[0], v[1])
            return b.fcmp_unordered(p, v[0], v[1])
        if n == "cmpi":
            names = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
            p = names[op.predicate.value.data]
            sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
            if p in ("eq", "ne"):
                return b.icmp_signed(sym[p], v[0], v[1])
            fn = b.icmp_signed if p[0] == "s" else b.icmp_unsigned
            return fn(sym[p[1:]], v[0], v[1])
        t = llvm_type(op.results[0].type)
        if n == "bitcast":
            return b.bitcast(v[0], t)
        if n == "sitofp":
            return b.sitofp(v[0], t)
        if n == "fptosi":
            return self.float_to_int(v[0], t)
        if n == "extf":
            return b.fpext(v[0], t)
        if n == "truncf":
            return b.fptrunc(v[0], t)
        if n == "extsi":
            return b.sext(v[0], t)
        if n == "trunci":
            return b.trunc(v[0], t)
        if n == "index_cast":
            w_in, w_out = v[0].type.width, t.width
            return v[0] if w_in == w_out else (b.sext(v[0], t) if w_in < w_out
                                                else b.trunc(v[0], t))
        raise NotImplementedError(f"codegen: arith.{n}")

    # ---- one function per top-level loop nest ----------------------------------------------
    def outline(self, nests):
        """Emit top-level krnl.iterate nests (those of one ONNX node) as one internal, noinline
        function and call it; a node whose function would be identical to an earlier one's
        (same shapes, same schedule) calls that one instead.

        LLVM's optimisation time grows faster than linearly with function size, and it also
        pays a fixed cost per function (about 30 ms on real models): one function per ONNX node
        keeps each unit small, and sharing identical ones (ResNet-50 repeats its blocks) keeps
        their number low. The nests' buffers become `noalias` pointer parameters: buffer
        planning gives buffers that are live at the same time disjoint arena ranges, and views
        share one parameter, so the vectoriser needs no run-time overlap checks. Weights are
        parameters too (their globals are addressed in the entry function), so convolutions
        with different weights share code; scalar constants are rematerialised inside.

        Sameness is decided twice. Before emitting, on a key of the nests (`nest_key`): a hit
        calls the earlier function without emitting a copy. After emitting, on the function's
        own text and its parallel bodies', its name written as a placeholder (llvmlite caches
        that text and the module's printout reuses it, so this key costs nothing extra): it
        catches what the first key tells apart needlessly. Identical text means identical code:
        the check codes (whose messages name a node) are in the text, so functions whose checks
        name different nodes never merge.
        """
        walked = walk_ops(nests)
        seen, params = self.captures(nests, walked)
        threaded = self.threads and any(
            isinstance(x, krnl.IterateOp) and krnl.parallel_loop(x) is not None
            for x in walked)
        tag = nests[0].attributes.get("onnx_node")
        node = tag.data if tag is not None else None
        threads_arg = [self.num_threads] if threaded else []
        nest_key = self.nest_key(nests, seen, params, threaded, walked)
        same = self.shared_keys.get(nest_key) if nest_key is not None else None
        if same is not None and not self.verify_sharing:
            self.share(same.name, node)
            self.join_status(self.b.call(same, params + threads_arg))
            return
        self.n_outlined = getattr(self, "n_outlined", 0) + 1
        name = f"{ENTRY}_{_op_label(nests[0], self.n_outlined)}"
        extra = [I64] if threaded else []
        fn = self.internal_function(name, [q.type for q in params] + extra)
        saved = self.b, self.alloca_block, self.status, self.node, self.num_threads
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.alloca_block = self.b.block
        self.status = self.new_status()
        if threaded:
            self.num_threads = fn.args[-1]
        self.node = node if node is not None else "?"
        self.made, self.n_parallel = [fn], 0  # this function and its parallel bodies
        self.bind(seen, params, fn.args)
        for op in nests:
            self.iterate(op)
        self.b.ret(self.b.load(self.status))
        self.b, self.alloca_block, self.status, self.node, self.num_threads = saved
        self.values.update(seen)
        key = "\n".join(str(f).replace(f'"{name}', '"@') for f in self.made)
        if same is not None and self.shared_keys.get(key) is not same:
            raise AssertionError(f"codegen: the nests of node {node!r} have the key of "
                                 f"{same.name}'s but not its code")
        same = self.shared_keys.get(key)
        if same is None:
            self.shared_keys[key] = fn
            if nest_key is not None:
                self.shared_keys[nest_key] = fn
            self.bodies[name] = [f.name for f in self.made]
            for f in self.made:
                self.functions[f.name] = node
            if self.on_group is not None:
                self.on_group(name, self.bodies[name])
        else:
            for f in self.made:  # an identical function exists: drop this one, call that one
                del self.module.globals[f.name]
            fn = same
            if nest_key is not None:
                self.shared_keys.setdefault(nest_key, fn)
            self.share(fn.name, node)
        self.join_status(self.b.call(fn, params + threads_arg))

    def nest_key(self, nests, seen, params, threaded, walked=None):
        """A key of everything the code of `nests` depends on, read off the Kernel IR before
        any of it is emitted (a hit skips emitting a copy): the ops in walk order (name,
        attributes but the node tags (NODE_TAGS), types, operands as the position of their
        definition, block shapes), and for values from outside, what `captures` made of them
        (a constant, or which parameter) or for loop handles what `self.loops` says (kind,
        tile, base, unrolled, parallel). None (no sharing by this key) where the code would
        also depend on something else: a global defined inside. Division guards name their
        node in their messages, so nests with them are keyed with the node. `verify_sharing`
        checks it. `walked`: walk_ops(nests), if the caller has it."""
        ids: dict = {}

        def value(v):
            k = ids.get(v)
            if k is None:
                if isinstance(v.type, krnl.LoopType):
                    kind, base, tile = self.loops[v]
                    k = ("loop", kind, tile, v in self.unrolled,
                         any(isinstance(u.operation, krnl.ParallelOp) for u in v.uses),
                         "base" if base is v else value(base))
                else:
                    lv = seen[v]
                    k = (("const", str(lv)) if isinstance(lv, ir.Constant) else
                         ("param", next(i for i, q in enumerate(params) if q is lv)), v.type)
                ids[v] = k
            return k

        out = [threaded]
        for op in walk_ops(nests) if walked is None else walked:
            if isinstance(op, krnl.GlobalOp):
                return None
            if op.name in ("arith.divsi", "arith.remsi"):
                out.append(self.node_of(nests))
            out.append((op.name, tuple((k, a) for k, a in op.attributes.items()
                                       if k not in NODE_TAGS),
                        tuple(op.properties.items()), tuple(value(o) for o in op.operands),
                        tuple(r.type for r in op.results),
                        tuple((tuple(a.type for a in blk.args), len(blk.ops))
                              for region in op.regions for blk in region.blocks)))
            for r in op.results:
                ids[r] = len(ids)
            for region in op.regions:
                for blk in region.blocks:
                    for a in blk.args:
                        ids[a] = len(ids)
        try:
            return NestKey(tuple(out))
        except TypeError:  # an attribute that cannot be hashed
            return None

    @staticmethod
    def node_of(nests):
        tag = nests[0].attributes.get("onnx_node")
        return tag.data if tag is not None else None

    def share(self, name: str, node: str | None):
        """Record that `node` calls the function `name` (and its parallel bodies) made for an
        earlier node: `functions` then maps them to the tuple of their nodes, first the one
        they were made for (a nest no node owns adds nothing)."""
        if node is None:
            return
        for f in self.bodies[name]:
            owner = self.functions[f]
            nodes = owner if isinstance(owner, tuple) else (owner,) if owner else ()
            if node not in nodes:
                nodes += (node,)
            self.functions[f] = nodes if len(nodes) > 1 else nodes[0]

    def captures(self, nests, walked=None):
        """({Kernel IR value: its LLVM value} for every value `nests` use from outside,
        [the distinct non-constant LLVM values among them]): the parameters of a function
        made of the nests (constants are rematerialised inside). `walked`: walk_ops(nests),
        if the caller has it."""
        if walked is None:
            walked = walk_ops(nests)
        inside = defined_inside(nests, walked)
        params, seen = [], {}
        for inner in walked:
            for v in inner.operands:
                if v in inside or isinstance(v.type, krnl.LoopType) or v in seen:
                    continue
                lv = self.values[v]
                seen[v] = lv
                if not isinstance(lv, ir.Constant) and all(lv is not q for q in params):
                    params.append(lv)
        return seen, params

    def bind(self, seen, params, args):
        """Inside a new function: its arguments `args` stand for `params` (see captures)."""
        for v, lv in seen.items():
            if not isinstance(lv, ir.Constant):
                self.values[v] = args[next(k for k, q in enumerate(params) if q is lv)]

    def internal_function(self, name, arg_types, ret=I64):
        """An internal, noinline, nounwind function; its pointer arguments are `noalias`
        (buffer planning keeps the buffers of one nest disjoint, views share one argument)."""
        fn = ir.Function(self.module, ir.FunctionType(ret, arg_types), name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        for arg in fn.args:
            if isinstance(arg.type, ir.PointerType):
                arg.add_attribute("noalias")
        return fn

    def join_status(self, st):
        """A callee's status joins the current function's (a failed check stays reported)."""
        cur = self.b.load(self.status)
        self.b.store(self.b.select(self.b.icmp_signed("!=", st, ir.Constant(I64, 0)), st, cur),
                     self.status)

    # ---- parallel loops --------------------------------------------------------------------
    def parallel_iterate(self, op):
        """A nest whose outer loop is krnl.parallel, on threads (what onnx-mlir gets from
        OpenMP). The nest becomes one function `void body(i8 *ctx)`, ctx a struct on the
        caller's stack: {status, threads, span, arrived, params...}. With more than one thread
        (and iteration) `GOMP_parallel(body, ctx, n, 0)` runs it on up to n threads (the JIT
        maps that to compilerkit's pool, threadpool.py; a shared library calls libgomp's);
        with one, the caller calls `body(ctx)` itself. The outer loop is handed out
        dynamically: the first thread to arrive takes chunks of `grain` iterations from its
        front, the others from its back, until none is left (`_take_chunk`; grain = trip /
        (GRAINS_PER_THREAD * n), at least 1; the whole loop when called directly). A thread
        that starts late (its core was busy, or it was
        asleep) then finds the work done by the others instead of holding up the loop's end
        with its static share, which is what onnxruntime's pool does too. Every iteration is
        independent (krnl.parallel_conflict proved it) and a chunk never splits a tile or an
        element's arithmetic, so every thread count and every hand-out order gives the same
        bits. Threads' statuses join with an
        atomic max. The buffers come from ctx, so they carry no `noalias`; on the convolution
        models measured LLVM still vectorises these loops with no run-time overlap checks
        (the heavy GEMM tiles go to the micro-kernel, whose arguments are `noalias`)."""
        b = self.b
        seen, params = self.captures([op])
        trip = _trip_count(op, self.loops)
        i32 = ir.IntType(32)
        ctx_t = ir.LiteralStructType([I64, I64, I64, I64] + [q.type for q in params])
        field = lambda bld, c, k: bld.gep(c, [ir.Constant(i32, 0),  # noqa: E731
                                              ir.Constant(i32, k)])
        self.n_parallel += 1
        body = self.internal_function(f"{b.function.name}_par{self.n_parallel}", [I8P],
                                      ir.VoidType())
        self.made.append(body)
        saved = self.b, self.alloca_block, self.status
        self.b = bb = ir.IRBuilder(body.append_basic_block("entry"))
        self.alloca_block = bb.block
        self.status = self.new_status()
        ctx = bb.bitcast(body.args[0], ctx_t.as_pointer())
        # The grain: the whole loop when called directly (threads = 1), else a share.
        threads = bb.load(field(bb, ctx, 1))
        total = ir.Constant(I64, trip)
        grain = bb.sdiv(total, bb.mul(threads, ir.Constant(I64, GRAINS_PER_THREAD)))
        grain = bb.select(bb.icmp_signed("<", grain, ir.Constant(I64, 1)),
                          ir.Constant(I64, 1), grain)
        grain = bb.select(bb.icmp_signed("<=", threads, ir.Constant(I64, 1)), total, grain)
        self.bind(seen, params, [bb.load(field(bb, ctx, k + 4)) for k in range(len(params))])
        first, last, take, done = self._take_chunk(bb, field(bb, ctx, 2), field(bb, ctx, 3),
                                                   grain)
        self.iterate(op, outer_range=(first, last))
        self.b.branch(take)
        body.blocks.remove(done)  # after the nest's blocks, so the text reads in order
        body.blocks.append(done)
        self.b.position_at_end(done)
        self.b.atomic_rmw("umax", field(self.b, ctx, 0), self.b.load(self.status), "monotonic")
        self.b.ret_void()
        self.b, self.alloca_block, self.status = saved
        self.values.update(seen)
        # The call: directly on one thread, through GOMP_parallel on more.
        n = self.imin(self.num_threads, ir.Constant(I64, max(trip, 1)))
        with b.goto_entry_block():
            slot = b.alloca(ctx_t, name="par_ctx")
        b.store(ir.Constant(I64, 0), field(b, slot, 0))
        b.store(n, field(b, slot, 1))
        b.store(ir.Constant(I64, trip << 32), field(b, slot, 2))  # chunks [0, trip) not taken
        b.store(ir.Constant(I64, 0), field(b, slot, 3))  # threads arrived
        for k, q in enumerate(params):
            b.store(q, field(b, slot, k + 4))
        raw = b.bitcast(slot, I8P)
        with b.if_else(b.icmp_signed(">", n, ir.Constant(I64, 1))) as (threaded, serial):
            with threaded:
                gomp = self._omp("GOMP_parallel", ir.VoidType(),
                                 [body.type, I8P, i32, i32])
                b.call(gomp, [body, raw, b.trunc(n, i32), ir.Constant(i32, 0)])
            with serial:
                b.call(body, [raw])
        self.join_status(b.load(field(b, slot, 0)))

    def _take_chunk(self, bb, span, arrived, grain):
        """The hand-out of `parallel_iterate`'s chunks, in the body being built by `bb`: the
        first thread to arrive (the caller, which runs the body as soon as it publishes the
        job) takes chunks of `grain` iterations from the front of the loop, later ones from
        its back, until the two ends meet. `span` holds the iterations not yet taken, [front,
        back) as back << 32 | front (one compare-and-swap per chunk); `arrived` counts the
        threads. Returns (first, last, take, done): the chunk's iterations, emitted in the
        block `bb` is left at; the block to branch back to after the chunk; the block to
        continue in when none is left.

        Why two ends: a model's consecutive loops mostly cut their outer loop alike (a 1x1
        Conv's output positions, then the next one's), and with the caller at the front and
        its partner at the back each thread reads, next loop, mostly what it wrote itself,
        from its own core's cache; chunks taken in arrival order gave each thread the other's
        half about as often (2 threads, 30 chained 1x1 Convs 32 -> 32 channels at 64 x 64:
        x1.39 over 1 thread, x1.58 with one static half each). Both ends stay dynamic: a
        partner that starts late finds the caller has taken its share."""
        i32 = ir.IntType(32)
        back_role = bb.icmp_signed(">", bb.atomic_rmw("add", arrived, ir.Constant(I64, 1),
                                                      "monotonic"), ir.Constant(I64, 0))
        take = bb.append_basic_block("take")
        check = bb.append_basic_block("check")
        claim = bb.append_basic_block("claim")
        work = bb.append_basic_block("work")
        bb.branch(take)
        bb.position_at_end(take)
        seen = bb.load_atomic(span, "monotonic", 8)
        bb.branch(check)
        bb.position_at_end(check)
        cur = bb.phi(I64)
        cur.add_incoming(seen, take)
        front = bb.zext(bb.trunc(cur, i32), I64)
        back = bb.lshr(cur, ir.Constant(I64, 32))
        done = bb.append_basic_block("done")
        bb.cbranch(bb.icmp_signed("<", front, back), claim, done)
        bb.position_at_end(claim)
        size = self.imin(grain, bb.sub(back, front))
        first = bb.select(back_role, bb.sub(back, size), front)
        rest = bb.select(back_role, bb.or_(bb.shl(first, ir.Constant(I64, 32)), front),
                         bb.or_(bb.shl(back, ir.Constant(I64, 32)), bb.add(front, size)))
        got = bb.cmpxchg(span, cur, rest, "monotonic", "monotonic")
        cur.add_incoming(bb.extract_value(got, 0), claim)
        bb.cbranch(bb.extract_value(got, 1), work, check)
        bb.position_at_end(work)
        return first, bb.add(first, size), take, done

    def _omp(self, name, ret, args):
        """A libgomp function, declared once."""
        if name in self.module.globals:
            return self.module.globals[name]
        return ir.Function(self.module, ir.FunctionType(ret, args), name)

    # ---- loops -----------------------------------------------------------------------------
    def iterate(self, op, outer_range=None):
        """Emit a nest as counted loops. `outer_range` = (first, last): only those iterations
        of the outermost loop (a parallel chunk); a krnl.parallel nest on a target with threads
        goes through parallel_iterate."""
        if (outer_range is None and self.threads and krnl.parallel_loop(op) is not None
                and _trip_count(op, self.loops) < 1 << 31):  # (the chunks' 32-bit ends)
            return self.parallel_iterate(op)
        original = list(op.original)
        bounds = op.bound_list()
        emitted = [self.loops[h] + (h,) for h in op.emitted]
        args = list(op.body.block.args)
        env = {}

        def level(pos):
            if pos == len(emitted):
                for k, a in enumerate(args):
                    parts = env.get(k, {})
                    self.values[a] = parts.get("inner", parts.get("outer", parts.get("full")))
                for inner_op in op.body.block.ops:
                    self.op(inner_op)
                return
            kind, base, tile, handle = emitted[pos]
            k = original.index(base)
            lo, hi = bounds[k]
            if kind == "inner":
                start = env[k]["outer"]
                lo_v, hi_v = start, self.imin(self.b.add(start, ir.Constant(I64, tile)),
                                               ir.Constant(I64, hi))
                step = 1
            else:
                lo_v, hi_v = ir.Constant(I64, lo), ir.Constant(I64, hi)
                step = tile if kind == "outer" else 1
                if pos == 0 and outer_range is not None:
                    first, last = outer_range
                    lo_v = self.b.add(ir.Constant(I64, lo), self.b.mul(first, ir.Constant(
                        I64, step)))
                    hi_v = self.imin(self.b.add(ir.Constant(I64, lo), self.b.mul(
                        last, ir.Constant(I64, step))), ir.Constant(I64, hi))

            def body(iv):
                env.setdefault(k, {})[kind] = iv
                level(pos + 1)

            if handle in self.unrolled and kind == "full" and hi - lo <= 64:
                for value in range(lo, hi):
                    body(ir.Constant(I64, value))
            else:
                self.loop(lo_v, hi_v, ir.Constant(I64, step), body)

        level(0)

    # ---- the matmul micro-kernel -----------------------------------------------------------
    def matmul(self, op):
        b = self.b
        a, bm, c = (self.ptr(v) for v in (op.a, op.b, op.c))
        i0, j0, k0, a_off, b_off, c_off = (self.values[v] for v in
                                           (op.i, op.j, op.k, op.a_off, op.b_off, op.c_off))
        m, n, kk = krnl.ints_of(op.sizes)
        tm, tn, tk = krnl.ints_of(op.tile)
        sa_r, sa_k, ldb, ldc = krnl.ints_of(op.strides)
        start = op.start_kind
        bias = self.ptr(op.bias) if op.bias is not None else ir.Constant(c.type, None)
        C = lambda v: ir.Constant(I64, v)  # noqa: E731
        if (tm, tn, tk) == (1, 1, 1):
            column = (b.mul(k0, C(sa_k)) if op.taps is None else
                      b.load(b.gep(self.a_table(op), [k0])))
            av = b.load(b.gep(a, [b.add(a_off, b.add(b.mul(i0, C(sa_r)), column))]))
            bv = b.load(b.gep(bm, [b.add(b_off, b.add(b.mul(k0, C(ldb)), j0))]))
            cp = b.gep(c, [b.add(c_off, b.add(b.mul(i0, C(ldc)), j0))])
            acc = b.load(cp)
            if start is not None:  # the product's first k: C starts from 0 or the row's bias
                first = ir.Constant(av.type, 0.0) if start == "zero" else b.load(
                    b.gep(bias, [i0]))
                acc = b.select(b.icmp_signed("==", k0, C(0)), first, acc)
            # A fused multiply-add, as in the micro-kernel: every schedule of a product gives
            # the same bits (a separate multiply and add rounded twice: 1 ulp apart).
            fma = fmuladd(self.module, av.type)
            total = b.call(fma, [av, bv, acc])
            bounds = [ir.Constant(av.type, 0.0 if x is None else x) for x in op.clamp]
            if clamp_code(op.clamp):  # the product's last k: C is clamped (krnl.matmul clamp)
                total = b.select(b.icmp_signed("==", k0, C(kk - 1)), clamp_value(
                    b, self.module, total, clamp_code(op.clamp), *bounds), total)
            b.store(total, cp)
            return
        # A whole tile: call the shared micro-kernel (microkernel.py) on its clipped bounds.
        elem = a.type.pointee
        kernel = matmul_kernel(self.module, elem, op.simd.value.data, kernel_rows(sa_r, kk))
        ends = [self.imin(b.add(v, C(t)), C(size)) for v, t, size in
                ((i0, tm, m), (j0, tn, n), (k0, tk, kk))]
        # unbounded sides as -inf / +inf (microkernel's `clamp`)
        bounds = [ir.Constant(elem, inf if x is None else x)
                  for x, inf in zip(op.clamp, (-math.inf, math.inf), strict=True)]
        b.call(kernel, [a, bm, c, i0, ends[0], j0, ends[1], k0, ends[2], a_off, b_off, c_off,
                        C(sa_r), C(sa_k), C(ldb), C(ldc), bias, C(START_CODES[start]), C(kk),
                        C(clamp_code(op.clamp)), *bounds, self.a_table(op)])

    def a_table(self, op):
        """A pointer to krnl.matmul `op`'s table of A's column offsets, k -> (k // T) * lda_k +
        a_taps[k % T] (or k * lda_k without `a_taps`) for k < K, one i64 each: a constant
        global, shared by the matmuls with the same table. Null without `a_taps` unless A's
        rows are one element apart (the micro-kernel's "unit" variant reads every column by
        its table: one k loop instead of a second one for strides)."""
        if op.taps is None and kernel_rows(krnl.ints_of(op.strides)[0],
                                           krnl.ints_of(op.sizes)[2]) != "unit":
            return ir.Constant(I64.as_pointer(), None)
        values = tuple(op.a_column(k) for k in range(max(krnl.ints_of(op.sizes)[2], 1)))
        tables = self.__dict__.setdefault("_tap_tables", {})
        if values not in tables:
            at = ir.ArrayType(I64, len(values))
            g = ir.GlobalVariable(self.module, at, name=f"tap_offsets_{len(tables)}")
            g.global_constant = True
            g.linkage = "internal"
            g.initializer = ir.Constant(at, list(values))
            tables[values] = g
        return self.b.bitcast(tables[values], I64.as_pointer())


def _trip_count(it, loops) -> int:
    """Iterations of a nest's outermost emitted loop (`loops`: the Emitter's handle table)."""
    kind, base, tile = loops[it.emitted[0]]
    lo, hi = it.bound_list()[list(it.original).index(base)]
    return max(0, -(-(hi - lo) // tile)) if kind == "outer" else max(0, hi - lo)


def _op_groups(block):
    """The top-level ops in emission order, runs of krnl.iterate from one ONNX node (lowering
    tags them `onnx_node`) gathered into lists. Other top-level ops (alloc, global, reshape,
    loop handles, constants) only define values, never read a nest's writes, so the ones
    between two nests of a run are emitted before the run."""
    out, run, pending, tag = [], [], [], None
    for op in block.ops:
        if isinstance(op, krnl.IterateOp):
            t = op.attributes.get("onnx_node")
            t = t.data if t is not None else None
            if run and (t is None or t != tag):
                out.append(run)
                run = []
            out.extend(pending)
            pending = []
            run.append(op)
            tag = t
        elif run:
            pending.append(op)
        else:
            out.append(op)
    if run:
        out.append(run)
    out.extend(pending)
    return out


def _op_label(op, n: int) -> str:
    """A function name for an outlined nest: the ONNX node it came from when lowering said so."""
    name = op.attributes.get("onnx_node")
    text = name.data if name is not None else "nest"
    return f"{n}_" + "".join(ch if ch.isalnum() else "_" for ch in text)[:40]


def emit_llvm(kmodule, target) -> ir.Module:
    """Kernel IR module (after buffer planning) -> llvmlite ir.Module."""
    return Emitter(kmodule, target).emit()


def emit_host(kmodule, target) -> Emitter:
    """Kernel IR module (after buffer planning) -> the Emitter that ran: `.module` (the
    llvmlite module emit_llvm returns), `.functions` ({function: ONNX node or None}) and
    `.checks` (the run-time check messages). The GPU's counterpart is codegen.gpu.emit_gpu."""
    e = Emitter(kmodule, target)
    e.emit()
    return e
