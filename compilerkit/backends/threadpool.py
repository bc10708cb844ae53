"""compilerkit's own thread pool for the JIT's parallel loops, in place of libgomp's.

Generated code hands each parallel loop to `GOMP_parallel(body, ctx, n, 0)` (codegen/emit.py
`parallel_iterate`); `body(ctx)` takes chunks of the loop from an atomic counter until none is
left, so any number of threads, one included, computes the whole loop, the same bits. libgomp
runs `body` on a team of n threads and returns when every one of them has reached the loop's end
barrier, so a thread that has not even started (still waking from sleep, or waiting for a core
another process holds) costs every loop its wake-up or a time slice.

This pool (after onnxruntime's) lets the caller go on without partners that never started:
- the caller publishes the job (body, ctx, at most n - 1 partners), wakes sleeping workers,
  runs `body(ctx)` itself, then closes the job and waits only for the partners that joined
  (they are running chunks, so that wait is short);
- a worker joins a job only while it is open and has a free slot (one compare-and-swap on a
  word holding the closed flag, the joined count and the running count), runs `body(ctx)`,
  leaves; then it spins a while (SPIN_SECONDS: back-to-back loops find it awake) and sleeps
  on a futex;
- a run of a compiled model holds the pool (`Pool.held`, `ck_hold`): its start wakes the
  workers, and while it lasts they keep spinning between its loops (up to HELD_SPINS spins
  since their last job), because a model's serial parts between two parallel loops often
  outlast one spin: a worker that slept there took its futex wake-up at the next loop and
  joined it late or not at all (2-thread calls ran in about the 1-thread time, most of the
  time). Where the machine has far more runnable threads than cores, runs do not hold: a
  spinning worker is descheduled for its spin, one woken from sleep gets the core sooner;
- a held run keeps the workers off its caller's CPU (`Pool.place`): after the caller has
  slept (a notebook's pause between calls), Linux woke the sleeping worker on the CPU the
  caller had just moved to, and the two shared one core for milliseconds while the other
  stood idle (SqueezeNet at 2 threads on 2 vCPUs, calls 0.1 s apart: median 11.8 ms, against
  8.3 ms at 1 thread and 6.3 ms with the workers kept off the caller's CPU);
- counters (`Pool.counters`) say how many jobs partners joined and how often workers slept;
- a second job while one runs (another Python thread's model, or a parallel loop inside a
  parallel loop) runs on its caller alone: never a deadlock, never a wrong answer;
- in a forked child (os.register_at_fork) the pool starts afresh, with workers of its own
  (libgomp's team, inherited from the parent, hangs the child's first parallel loop).

The pool is LLVM IR, built here with llvmlite and JIT-compiled once per process; its workers
are Python daemon threads that call the native worker loop (ctypes drops the GIL for the call,
which never returns). The JIT maps a module's `GOMP_parallel` to `ck_parallel` (host.py), so
the generated code is unchanged and shared libraries (`compile_to("lib")`) still use libgomp.
Linux only (futex); elsewhere, and with CK_THREAD_POOL=gomp, libgomp runs the loops.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import sys
import threading
import time

import llvmlite.binding as llvm
import llvmlite.ir as ir

SPIN_SECONDS = 200e-6  # how long an idle worker spins before it sleeps
OVERSUBSCRIBED = 1.5  # load average per core above which runs do not hold the workers
HELD_SPINS = 25  # spins of SPIN_SECONDS a held worker waits for the run's next loop
MAX_WORKERS = 255  # the joined and running counts are 16-bit fields
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
CLOSED = 1 << 32
RUNNING = 0xFFFF  # bits 0-15: partners running the job; bits 16-31: partners that joined
# Event counts kept by the native code (Pool.counters()): jobs led with partners asked for,
# partners that joined one, jobs that ran alone because another one was running, futex wakes
# the callers issued, and the times a worker went to sleep.
COUNTERS = ("jobs", "joins", "overlaps", "wakes", "sleeps")

I8P = ir.IntType(8).as_pointer()
I32, I64 = ir.IntType(32), ir.IntType(64)
BODY = ir.FunctionType(ir.VoidType(), [I8P]).as_pointer()


def available() -> bool:
    """Whether this pool runs the JIT's parallel loops: Linux on x86-64 or AArch64, and not
    switched off with CK_THREAD_POOL=gomp."""
    choice = os.environ.get("CK_THREAD_POOL", "ck")
    if choice not in ("ck", "gomp"):
        raise ValueError(f"CK_THREAD_POOL must be 'ck' or 'gomp', got {choice!r}")
    return (choice == "ck" and sys.platform.startswith("linux")
            and platform.machine() in SYS_FUTEX)


def _globals(m):
    def g(name, t, init=0):
        v = ir.GlobalVariable(m, t, name)
        v.initializer = ir.Constant(t, init)
        v.linkage = "internal"
        return v

    return {"seq": g("seq", I32), "sleepers": g("sleepers", I32), "state": g("state", I64),
            "hold": g("hold", I32),
            "slots": g("slots", I64), "busy": g("busy", I32), "spin": g("spin", I64, 2000),
            "fn": g("job_fn", BODY, None), "ctx": g("job_ctx", I8P, None),
            **{c: g(c, I64) for c in COUNTERS}}


def _pause(m, b):
    if platform.machine() == "x86_64":
        fn = m.globals.get("llvm.x86.sse2.pause") or ir.Function(
            m, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
        b.call(fn, [])
    else:
        b.asm(ir.FunctionType(ir.VoidType(), []), "yield", "", [], True)


def _futex(m, b, addr, op, value):
    sc = m.globals.get("syscall") or ir.Function(m, ir.FunctionType(I64, [I64], var_arg=True),
                                                 "syscall")
    b.call(sc, [ir.Constant(I64, SYS_FUTEX[platform.machine()]), b.bitcast(addr, I8P),
                ir.Constant(I32, op), value, ir.Constant(I8P, None)])


def _sched_yield(m):
    return m.globals.get("sched_yield") or ir.Function(m, ir.FunctionType(I32, []),
                                                       "sched_yield")


def _count(b, g, name):
    b.atomic_rmw("add", g[name], ir.Constant(I64, 1), "monotonic")


def _load(b, p):
    t = p.type.pointee
    return b.load_atomic(p, "seq_cst", t.width // 8 if isinstance(t, ir.IntType) else 8)


def build_module() -> ir.Module:
    """The pool's LLVM IR: `ck_parallel` (GOMP_parallel's signature), `ck_worker` (a loop that
    never returns), `ck_pause_loop(n)` (n pauses: measures how long a spin takes)."""
    m = ir.Module("ck_threadpool")
    m.triple = llvm.get_process_triple()
    g = _globals(m)
    _caller(m, g)
    _worker(m, g)
    _hold(m, g)
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64]), "ck_pause_loop")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    head, body, done = (f.append_basic_block(n) for n in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), f.blocks[0])
    b.cbranch(b.icmp_signed("<", i, f.args[0]), body, done)
    b.position_at_end(body)
    _pause(m, b)
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return m


def _hold(m, g):
    """`ck_hold(+1)` at a run's start wakes the sleeping workers, so that they are awake by its
    first parallel loop, and keeps them spinning between its loops; `ck_hold(-1)` at its end
    lets them sleep again after a spin."""
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [I32]), "ck_hold")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    b.atomic_rmw("add", g["hold"], f.args[0], "seq_cst")
    with b.if_then(b.icmp_signed(">", f.args[0], ir.Constant(I32, 0))):
        # A new seq wakes a worker about to sleep as a job would; it finds no open job
        # (the last one is closed) and spins.
        b.atomic_rmw("add", g["seq"], ir.Constant(I32, 1), "seq_cst")
        with b.if_then(b.icmp_signed(">", _load(b, g["sleepers"]), ir.Constant(I32, 0))):
            _count(b, g, "wakes")
            _futex(m, b, g["seq"], FUTEX_WAKE_PRIVATE, ir.Constant(I32, MAX_WORKERS))
    b.ret_void()


def _caller(m, g):
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [BODY, I8P, I32, I32]), "ck_parallel")
    fn, ctx, n, _ = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    alone, lead = f.append_basic_block("alone"), f.append_basic_block("lead")
    many = b.icmp_signed(">", n, ir.Constant(I32, 1))
    with b.if_then(many):
        got = b.cmpxchg(g["busy"], ir.Constant(I32, 0), ir.Constant(I32, 1), "seq_cst",
                        "seq_cst")
        with b.if_then(b.not_(b.extract_value(got, 1))):
            _count(b, g, "overlaps")
        b.cbranch(b.extract_value(got, 1), lead, alone)
    b.branch(alone)
    b.position_at_end(alone)  # one thread asked for, or another job runs: this thread alone
    b.call(fn, [ctx])
    b.ret_void()
    b.position_at_end(lead)
    b.store_atomic(fn, g["fn"], "seq_cst", 8)
    b.store_atomic(ctx, g["ctx"], "seq_cst", 8)
    b.store_atomic(b.sub(b.zext(n, I64), ir.Constant(I64, 1)), g["slots"], "seq_cst", 8)
    b.store_atomic(ir.Constant(I64, 0), g["state"], "seq_cst", 8)
    b.atomic_rmw("add", g["seq"], ir.Constant(I32, 1), "seq_cst")
    _count(b, g, "jobs")
    with b.if_then(b.icmp_signed(">", _load(b, g["sleepers"]), ir.Constant(I32, 0))):
        _count(b, g, "wakes")
        _futex(m, b, g["seq"], FUTEX_WAKE_PRIVATE, b.sub(n, ir.Constant(I32, 1)))
    b.call(fn, [ctx])
    b.atomic_rmw("or", g["state"], ir.Constant(I64, CLOSED), "seq_cst")
    waited = b.alloca(I64)
    b.store(ir.Constant(I64, 0), waited)
    wait, spin, out = (f.append_basic_block(x) for x in ("wait", "spin", "out"))
    b.branch(wait)
    b.position_at_end(wait)  # only partners that joined are waited for: they are running
    running = b.and_(_load(b, g["state"]), ir.Constant(I64, RUNNING))
    b.cbranch(b.icmp_unsigned("!=", running, ir.Constant(I64, 0)), spin, out)
    b.position_at_end(spin)
    # A partner that takes longer than a spin lost its core to another process: give ours
    # away instead of burning the share it needs.
    k = b.add(b.load(waited), ir.Constant(I64, 1))
    b.store(k, waited)
    with b.if_else(b.icmp_signed("<", k, _load(b, g["spin"]))) as (short, long_):
        with short:
            _pause(m, b)
        with long_:
            b.call(_sched_yield(m), [])
    b.branch(wait)
    b.position_at_end(out)
    b.store_atomic(ir.Constant(I32, 0), g["busy"], "seq_cst", 4)
    b.ret_void()


def _worker(m, g):
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "ck_worker")
    blocks = {n: f.append_basic_block(n) for n in (
        "entry", "idle", "spin", "pause", "held", "sleep", "job", "try", "join", "run")}
    b = ir.IRBuilder(blocks["entry"])
    seen, count, periods = b.alloca(I32), b.alloca(I64), b.alloca(I64)
    b.store(_load(b, g["seq"]), seen)
    b.store(ir.Constant(I64, 0), periods)
    b.branch(blocks["idle"])
    # idle: spin `spin` pauses watching seq, then sleep on it
    b.position_at_end(blocks["idle"])
    b.store(ir.Constant(I64, 0), count)
    b.branch(blocks["spin"])
    b.position_at_end(blocks["spin"])
    changed = b.icmp_unsigned("!=", _load(b, g["seq"]), b.load(seen))
    b.cbranch(changed, blocks["job"], blocks["pause"])
    b.position_at_end(blocks["pause"])
    _pause(m, b)
    k = b.add(b.load(count), ir.Constant(I64, 1))
    b.store(k, count)
    b.cbranch(b.icmp_signed("<", k, _load(b, g["spin"])), blocks["spin"], blocks["held"])
    # held: a run is in progress (ck_hold) and its next loop comes soon: stay awake, for at
    # most HELD_SPINS spins since the last job (a run with a long serial part lets it sleep)
    b.position_at_end(blocks["held"])
    p = b.add(b.load(periods), ir.Constant(I64, 1))
    b.store(p, periods)
    held = b.and_(b.icmp_signed(">", _load(b, g["hold"]), ir.Constant(I32, 0)),
                  b.icmp_signed("<=", p, ir.Constant(I64, HELD_SPINS)))
    b.cbranch(held, blocks["idle"], blocks["sleep"])
    b.position_at_end(blocks["sleep"])
    b.atomic_rmw("add", g["sleepers"], ir.Constant(I32, 1), "seq_cst")
    # ck_hold and a job both change seq before they look for sleepers: one of the two sees
    # the other, so no wake-up is lost
    with b.if_then(b.icmp_unsigned("==", _load(b, g["seq"]), b.load(seen))):
        _count(b, g, "sleeps")
        _futex(m, b, g["seq"], FUTEX_WAIT_PRIVATE, b.load(seen))
    b.atomic_rmw("sub", g["sleepers"], ir.Constant(I32, 1), "seq_cst")
    b.branch(blocks["idle"])
    # job: take a slot while the job is open and has one (one compare-and-swap)
    b.position_at_end(blocks["job"])
    b.store(_load(b, g["seq"]), seen)
    b.store(ir.Constant(I64, 0), periods)
    b.branch(blocks["try"])
    b.position_at_end(blocks["try"])
    s = _load(b, g["state"])
    joined = b.and_(b.lshr(s, ir.Constant(I64, 16)), ir.Constant(I64, 0xFFFF))
    open_ = b.icmp_unsigned("==", b.and_(s, ir.Constant(I64, CLOSED)), ir.Constant(I64, 0))
    room = b.icmp_unsigned("<", joined, _load(b, g["slots"]))
    b.cbranch(b.and_(open_, room), blocks["join"], blocks["idle"])
    b.position_at_end(blocks["join"])
    new = b.add(s, ir.Constant(I64, (1 << 16) + 1))
    got = b.cmpxchg(g["state"], s, new, "seq_cst", "seq_cst")
    b.cbranch(b.extract_value(got, 1), blocks["run"], blocks["try"])
    b.position_at_end(blocks["run"])  # joined: the caller waits for this thread to leave
    _count(b, g, "joins")
    b.call(_load(b, g["fn"]), [_load(b, g["ctx"])])
    b.atomic_rmw("sub", g["state"], ir.Constant(I64, 1), "seq_cst")
    b.branch(blocks["idle"])


class Pool:
    """The process's pool: the JIT-compiled module and its worker threads."""

    def __init__(self):
        from compilerkit.backends.base import init_llvm

        init_llvm()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=llvm.get_host_cpu_features().flatten(),
                                          opt=2, codemodel="jitdefault")
        mod = llvm.parse_assembly(str(build_module()))
        mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        self.engine.finalize_object()
        self.address = self.engine.get_function_address("ck_parallel")
        self._worker = ctypes.CFUNCTYPE(None)(self.engine.get_function_address("ck_worker"))
        pause = ctypes.CFUNCTYPE(None, ctypes.c_int64)(
            self.engine.get_function_address("ck_pause_loop"))
        self._hold = ctypes.CFUNCTYPE(None, ctypes.c_int32)(
            self.engine.get_function_address("ck_hold"))
        self.spin_iterations = spin_iterations(pause)
        ctypes.c_int64.from_address(self.engine.get_global_value_address("spin")).value = (
            self.spin_iterations)
        self.workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.refused = False  # the system refused a worker thread: no more are tried
        self._load_checked, self._busy = -1e9, False
        self._placed = None  # the CPU set the workers were last given (place)

    def ensure_workers(self, threads: int) -> None:
        """At least threads - 1 workers (at most MAX_WORKERS): the caller is the other one.
        A thread the system refuses (a memory or process limit) is not an error: the jobs run
        on the workers there are, the caller included."""
        want = min(threads - 1, MAX_WORKERS)
        if len(self.workers) >= want or self.refused or os.getpid() != self._pid:
            return  # (a child forked since _after_fork ran has none: jobs run on the caller)
        with self._lock:
            while len(self.workers) < want and not self.refused:
                t = threading.Thread(target=self._worker, name=f"ck-pool-{len(self.workers)}",
                                     daemon=True)
                try:
                    t.start()
                except RuntimeError:  # "can't start new thread"
                    self.refused = True
                    break
                self.workers.append(t)
                self._placed = None  # the new worker has the creator's CPUs: place it

    @contextlib.contextmanager
    def held(self):
        """Around one run of a compiled model: the workers wake at its start (their wake-up
        overlaps the run's first serial part instead of its first loop) and spin between its
        parallel loops instead of sleeping in the serial parts between them, where a sleeping
        worker would join the next loop late or not at all. Not on a machine with more
        runnable threads than cores (`oversubscribed`): there a spinning worker is charged
        for its spin and descheduled, while one woken from sleep gets the core sooner."""
        if self.oversubscribed():
            self.place(None)
            yield
            return
        self.place(_current_cpu())
        self._hold(1)
        try:
            yield
        finally:
            self._hold(-1)

    def oversubscribed(self) -> bool:
        """Whether the 1-minute load average exceeds OVERSUBSCRIBED x the cores, read at most
        once a second. The average counts this process's own threads (a held worker spins),
        so the bar stands above the core count, or a run alone would switch holding off."""
        now = time.monotonic()
        if now - self._load_checked > 1.0:
            self._load_checked = now
            try:
                self._busy = os.getloadavg()[0] > OVERSUBSCRIBED * (os.cpu_count() or 1)
            except OSError:
                self._busy = False
        return self._busy

    def place(self, cpu: int | None) -> None:
        """Let the workers run on the calling thread's CPUs except `cpu` (the caller's own):
        a worker woken there would share the caller's core while another stands idle. With
        `cpu` None, or with no CPU to spare for every worker, they get all the caller's CPUs.
        The system call is made only when the set changes (the caller moved, its affinity
        changed, workers were added)."""
        try:
            allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            return
        want = allowed
        if cpu in allowed and len(self.workers) < len(allowed):
            want = allowed - {cpu}
        if want == self._placed:
            return
        for t in self.workers:
            try:
                os.sched_setaffinity(t.native_id, want)
            except OSError:  # a CPU set the system will not grant: leave the worker as it is
                pass
        self._placed = want

    def counters(self) -> dict[str, int]:
        """The event counts so far (COUNTERS): how often partners joined the jobs asked of
        them, how often workers slept and were woken."""
        return {c: ctypes.c_int64.from_address(self._address(c)).value for c in COUNTERS}

    def _address(self, name: str) -> int:
        return self.engine.get_global_value_address(name)

    def _after_fork(self) -> None:
        """In a forked child: the parent's workers do not exist here, a job another thread
        ran at the fork never closes, and a lock may be held by a thread that is gone. Start
        afresh: no workers (ensure_workers starts new ones), no job, nobody asleep or busy."""
        self.workers = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.refused = False
        self._placed = None
        for name, t, value in (("busy", ctypes.c_int32, 0), ("sleepers", ctypes.c_int32, 0),
                               ("hold", ctypes.c_int32, 0),
                               ("slots", ctypes.c_int64, 0), ("state", ctypes.c_int64, CLOSED)):
            t.from_address(self._address(name)).value = value


def _sched_getcpu():
    try:
        f = ctypes.CDLL(None).sched_getcpu
    except (AttributeError, OSError):
        return None
    f.restype, f.argtypes = ctypes.c_int, []
    return f


_GETCPU = _sched_getcpu()


def _current_cpu() -> int | None:
    """The CPU the calling thread runs on (glibc's sched_getcpu), or None where unknown."""
    if _GETCPU is None:
        return None
    cpu = _GETCPU()
    return cpu if cpu >= 0 else None


def spin_iterations(pause, seconds: float = SPIN_SECONDS) -> int:
    """Pauses that take about `seconds` here (the pause instruction's cost varies by CPU)."""
    n = 20000
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        pause(n)
        best = min(best, time.perf_counter() - t)
    return max(100, int(seconds / max(best / n, 1e-10)))


_POOL: list[Pool] = []
_POOL_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()  # another thread may have held it at the fork
    for p in _POOL:
        p._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def pool() -> Pool:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(Pool())
        return _POOL[0]
