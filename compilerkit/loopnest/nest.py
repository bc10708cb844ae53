"""One ONNX node's Kernel IR nests -> one machine-code function (`int64_t fn(void **buffers)`,
see frame.py), or `Unsupported` and the node goes to LLVM.

A nest's loops run in the order `krnl.iterate` emits them, their variables in stack slots. Its
body is one of:
* other nests and index arithmetic (Conv's per-batch, per-group nest holding im2col and the
  matrix product): loops here, the inner nests recursively;
* a single `krnl.matmul` (matmul.py);
* loads, float math and stores (leaf.py).
Schedule ops (`krnl.define_loops`, `krnl.block`, `krnl.permute`, `krnl.unroll`) are read for
the loop handles they define; `krnl.unroll` is a hint this generator does not need (its vector
loop has no short inner loop to unroll).

`krnl.parallel` (the parallelize pass's mark on a nest's outer loop, whose iterations write
disjoint memory): the nest becomes a chunk function `chunk(buffers, first, last, outer)` running
iterations [first, last) of that loop (`outer`: the enclosing loops' variables); the node
function calls it directly on one thread, or hands one shared body (`ck_ln_parallel_body`) to
`parallel(body, ctx, n, 0)`, GOMP_parallel's signature: compilerkit's pool (threadpool.py,
fork-safe, as the LLVM path's JIT uses) or, where that is not available, libgomp. The body takes
chunks of the loop from an atomic counter until none is left, as the LLVM path's does, so a
partner that never joins costs nothing and every thread count computes each element the same
way: the bits never depend on it. Without a thread runtime the loops run serially.
"""

from __future__ import annotations

from collections import ChainMap

from compilerkit.codegen.emit import GRAINS_PER_THREAD
from compilerkit.dialects import krnl
from compilerkit.loopnest.affine import IndexEnv, Unsupported
from compilerkit.loopnest.asm import GPR, Asm
from compilerkit.loopnest.frame import Frame
from compilerkit.loopnest.leaf import Leaf, loops_of
from compilerkit.loopnest.matmul import MatmulNest


def note_handles(op, handles: dict) -> bool:
    """Record the loop handles a schedule op defines; False for any other op."""
    if isinstance(op, krnl.DefineLoopsOp):
        for h in op.loops:
            handles[h] = ("full", h, 1)
    elif isinstance(op, krnl.BlockOp):
        _, base, _ = handles.get(op.loop, ("full", op.loop, 1))
        t = op.tile.value.data
        handles[op.outer] = ("outer", base, t)
        handles[op.inner] = ("inner", base, t)
    elif isinstance(op, (krnl.PermuteOp, krnl.UnrollOp)) or op.name == "krnl.parallel":
        pass  # the emitted order is krnl.iterate's; parallel loops run on one thread here
    else:
        return False
    return True


def generate(nests, buffers, handles: dict, top_env: dict, node: str, kernels: dict,
             extra: list | None = None, omp: dict | None = None) -> Frame:
    """The function for `nests` (one node's top-level krnl.iterate ops). With `omp`
    ({"parallel": the address of a function with GOMP_parallel's signature}), a nest whose
    outer loop is krnl.parallel becomes a chunk function run on threads (see the module
    docstring); its chunk and thread-entry functions are appended to `extra` as (name, Asm)."""
    frame = Frame(buffers, node)
    env = IndexEnv(node)
    env.values = ChainMap({}, top_env)  # the module's constants, not copied per node
    frame.prologue()
    a = frame.asm
    a.op("MOV_RM64_R64", frame.iv_mem(NUM_THREADS), GPR["rsi"])
    frame.threads = (omp, extra, kernels) if omp is not None and extra is not None else None
    for op in nests:
        _iterate(op, env, frame, dict(handles), {}, kernels)
    frame.epilogue()
    return frame


NUM_THREADS = "num_threads"  # the stack slot of the node function's thread count


def parallel_loop(op):
    fn = getattr(krnl, "parallel_loop", None)
    return fn(op) if fn is not None else None


def _chunk(op, buffers, handles, env, node, kernels, n_extra, outer):
    """(name, Asm, trip) of `chunk(buffers, first, last, outer)`: the nest with its outer
    loop limited to iterations [first, last), the enclosing loops' variables (`outer`:
    [(iv, range)]) read from the array `outer` points to; None when that loop is not one this
    generator emits as a counted loop (the nest then runs serially)."""
    h = op.emitted[0]
    kind, base, tile = handles.get(h, ("full", h, 1))
    original = list(op.original)
    if kind == "inner" or base not in original:
        return None
    k = original.index(base)
    lo, hi = op.bound_list()[k]
    step = tile if kind == "outer" else 1
    trip = max(0, -(-(hi - lo) // step))
    frame = Frame(buffers, node)
    frame.prologue()
    a = frame.asm
    for j, (ov, _r) in enumerate(outer):  # the enclosing loops' variables, from the caller
        a.op("MOV_R64_RM64", GPR["rax"], Asm.mem(GPR["rcx"], disp=8 * j))
        a.op("MOV_RM64_R64", frame.iv_mem(ov), GPR["rax"])
    iv = op.body.block.args[k]
    lo_at, hi_at = frame.slot(("lo", id(op))), frame.slot(("hi", id(op)))
    frame.parallel = (iv, lo_at, hi_at, a.label())
    rax, rcx = GPR["rax"], GPR["rcx"]
    a.op("IMUL_R64_RM64_IMM32", rax, GPR["rsi"], step)  # lo + first * step
    a.op("ADD_RM64_IMM32", rax, lo)
    a.op("MOV_RM64_R64", Asm.mem(GPR["rsp"], disp=lo_at), rax)
    a.op("IMUL_R64_RM64_IMM32", rax, GPR["rdx"], step)  # min(lo + last * step, hi)
    a.op("ADD_RM64_IMM32", rax, lo)
    a.op("MOV_RM64_IMM32", rcx, hi)
    a.op("CMP_RM64_R64", rax, rcx)
    a.op("CMOVG_R64_RM64", rax, rcx)
    a.op("MOV_RM64_R64", Asm.mem(GPR["rsp"], disp=hi_at), rax)
    _iterate(op, env, frame, dict(handles), dict(outer), kernels)
    if not frame.parallel_used:
        return None
    frame.epilogue()
    label = "".join(ch if ch.isalnum() else "_" for ch in node)[:40]
    return f"ck_ln_chunk_{n_extra}_{label}", frame.asm, trip


def _call_parallel(frame, chunk, omp, extra, outer):
    """In the node function: n = min(num_threads, trip); one thread calls the chunk function
    on [0, trip), more go through parallel(thunk, ctx, n, 0) (`omp["parallel"]`: compilerkit's
    pool, or libgomp's GOMP_parallel), ctx = {buffers, trip, the chunk function, the next
    iteration to hand out, the grain, the enclosing loops' variables...} on this function's
    stack."""
    name, chunk_asm, trip = chunk
    if not any(n == THUNK for n, _ in extra):
        extra.append((THUNK, _thunk()))
    extra.append((name, chunk_asm))
    a = frame.asm
    rax, rcx, rdx, rsi, rdi, rsp, r8 = (GPR[r] for r in ("rax", "rcx", "rdx", "rsi", "rdi",
                                                          "rsp", "r8"))
    ctx = [frame.slot((k, name)) for k in range(CTX_OUTER + len(outer))]  # consecutive
    for j, (ov, _r) in enumerate(outer):
        a.op("MOV_R64_RM64", rax, frame.iv_mem(ov))
        a.op("MOV_RM64_R64", Asm.mem(rsp, disp=ctx[CTX_OUTER + j]), rax)
    many, done = a.label(), a.label()
    a.op("MOV_R64_RM64", rax, frame.iv_mem(NUM_THREADS))
    a.op("MOV_RM64_IMM32", rcx, trip)
    a.op("CMP_RM64_R64", rax, rcx)
    a.op("CMOVG_R64_RM64", rax, rcx)
    a.op("CMP_RM64_IMM32", rax, 1)
    a.jump("JG_REL32_64", many)
    a.op("XOR_R64_RM64", rsi, rsi)
    a.op("MOV_RM64_IMM32", rdx, trip)
    a.op("LEA_R64_M", rcx, Asm.mem(rsp, disp=ctx[0] + 8 * CTX_OUTER))
    a.call(name)
    a.jump("JMP_REL32_64", done)
    a.bind(many)
    a.op("MOV_RM64_R64", Asm.mem(rsp, disp=ctx[0]), rdi)
    a.op("MOV_RM64_IMM32", Asm.mem(rsp, disp=ctx[1]), trip)
    a.address(rdi, name)
    a.op("MOV_RM64_R64", Asm.mem(rsp, disp=ctx[2]), rdi)
    a.op("MOV_RM64_IMM32", Asm.mem(rsp, disp=ctx[3]), 0)
    # grain = ceil(trip / (n * GRAINS_PER_THREAD)): the LLVM path's chunks
    a.op("MOV_R64_RM64", r8, rax)
    a.op("IMUL_R64_RM64_IMM32", rcx, rax, GRAINS_PER_THREAD)
    a.op("LEA_R64_M", rax, Asm.mem(rcx, disp=trip - 1))
    a.op("CQO")
    a.op("IDIV_RM64", rcx)
    a.op("MOV_RM64_R64", Asm.mem(rsp, disp=ctx[4]), rax)
    a.op("MOV_R64_RM64", rdx, r8)
    a.address(rdi, THUNK)
    a.op("LEA_R64_M", rsi, Asm.mem(rsp, disp=ctx[0]))
    a.op("XOR_R64_RM64", rcx, rcx)
    a.op("MOV_R64_IMM64", rax, omp["parallel"])
    a.op("CALL_RM64", rax)
    a.op("MOV_R64_RM64", rdi, Asm.mem(rsp, disp=ctx[0]))
    a.bind(done)
    a.op("NOPD")


THUNK = "ck_ln_parallel_body"
CTX_OUTER = 5  # ctx slots before the enclosing loops' variables


def _thunk():
    """void body(ctx), ctx = {buffers, trip, chunk, next, grain, outer...}: while iterations
    are left, take the next `grain` of them with one atomic add and run chunk(buffers, first,
    min(first + grain, trip), &outer). Any number of threads, one included, runs the whole
    loop, each iteration computed the same way: the LLVM path's parallel body
    (codegen/emit.py), so compilerkit's pool, where a partner may never join, runs it as
    libgomp does. One for the whole model."""
    a = Asm()
    rax, rbx, rcx, rdx, rsi, rdi, r12 = (GPR[r] for r in (
        "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r12"))
    for r in (rbx, r12, GPR["r13"]):  # (three pushes keep the stack 16-byte aligned)
        a.op("PUSH_R64", r)
    a.op("MOV_R64_RM64", rbx, rdi)
    top, out = a.label(), a.label()
    a.bind(top)
    a.op("MOV_R64_RM64", r12, Asm.mem(rbx, disp=32))
    a.op("MOV_R64_RM64", rax, r12)
    a.op("XADD_RM64_R64", Asm.mem(rbx, disp=24), rax)
    a.code[-1].has_lock_prefix = True
    a.op("CMP_R64_RM64", rax, Asm.mem(rbx, disp=8))
    a.jump("JGE_REL32_64", out)
    a.op("LEA_R64_M", rdx, Asm.mem(rax, r12))
    a.op("CMP_R64_RM64", rdx, Asm.mem(rbx, disp=8))
    a.op("CMOVG_R64_RM64", rdx, Asm.mem(rbx, disp=8))
    a.op("MOV_R64_RM64", rsi, rax)
    a.op("MOV_R64_RM64", rdi, Asm.mem(rbx))
    a.op("LEA_R64_M", rcx, Asm.mem(rbx, disp=8 * CTX_OUTER))
    a.op("CALL_RM64", Asm.mem(rbx, disp=16))
    a.jump("JMP_REL32_64", top)
    a.bind(out)
    for r in (GPR["r13"], r12, rbx):
        a.op("POP_R64", r)
    a.op("RETNQ")
    return a


def _iterate(op, env, frame, handles, ranges, kernels):
    threads = getattr(frame, "threads", None)
    if threads is not None and parallel_loop(op) is not None:
        omp, extra, _ = threads
        outer = list(ranges.items())
        chunk = _chunk(op, frame.buffers, handles, env, frame.node, kernels, len(extra),
                       outer)
        if chunk is not None:
            _call_parallel(frame, chunk, omp, extra, outer)
            return
    ops = list(op.body.block.ops)
    if len(ops) == 1 and isinstance(ops[0], krnl.MatMulOp):
        MatmulNest(op, ops[0], env, frame, handles, ranges).emit(kernels)
        return
    if not any(isinstance(x, (krnl.IterateOp, krnl.MatMulOp)) for x in ops):
        Leaf(op, env, frame, ranges).emit()
        return
    loops = loops_of(op, frame.node)
    ranges = dict(ranges)
    for iv, lo, hi in loops:
        env.define_iv(iv)
        ranges[iv] = (lo, hi - 1)
    if any(hi <= lo for _, lo, hi in loops):
        return
    tops = [frame.loop_begin(iv, lo) for iv, lo, _ in loops]
    for x in ops:
        if env.read(x) or note_handles(x, handles):
            continue
        if isinstance(x, krnl.IterateOp):
            _iterate(x, env, frame, handles, ranges, kernels)
        else:
            raise Unsupported(f"node {frame.node!r}: {x.name} between nests")
    for (iv, _lo, hi), top in reversed(list(zip(loops, tops, strict=True))):
        frame.loop_end(iv, top, hi)
