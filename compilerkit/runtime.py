"""Running compiled code: check every argument BEFORE native code sees it (a wrong shape or
dtype must be a Python error, never a crash), pass C-contiguous buffers in native byte order,
return numpy arrays; raise `RunError` when the compiled code reports a failed run-time check.

Threads: the compiled entry point takes the thread count of its parallel loops per call
(`main_graph(buffers, num_threads)`), so one compiled model can run with different counts from
several Python threads at once; `check_num_threads` resolves and checks the count, and
`load_libgomp` loads the OpenMP runtime the host code calls (GCC's libgomp).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import threading

import numpy as np

# The most threads a run may ask for: compilerkit's pool has at most 255 workers besides the
# caller (threadpool.MAX_WORKERS), and libgomp, asked for 1024, starts 1023 threads, which
# a memory cap turns into an abort of the whole process.
MAX_THREADS = 256


def check_num_threads(num_threads) -> int:
    """`num_threads` as an int: None means the machine's cores (os.cpu_count()); anything but
    an int from 1 to MAX_THREADS is a ValueError naming it."""
    if type(num_threads) is int and 1 <= num_threads <= MAX_THREADS:
        return num_threads  # the usual case, first: every run checks its count
    if num_threads is None:
        return max(1, os.cpu_count() or 1)
    from compilerkit.frontend.arguments import OptionError

    if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)):
        raise OptionError(f"num_threads must be a whole number of threads (or None for the "
                         f"machine's {os.cpu_count()} cores), got {num_threads!r}")
    if not 1 <= num_threads <= MAX_THREADS:
        raise OptionError(f"num_threads must be 1..{MAX_THREADS} (or None for the machine's "
                         f"{os.cpu_count()} cores), got {num_threads}")
    return int(num_threads)


_GOMP = []  # the path loaded, once per process


# libgomp's spin iterations before an idle thread sleeps (its default: 300000). Short, because a
# spinning thread waiting at a loop's end barrier burns the share of CPU its partner needs when
# another process competes for the cores (the kernel's autogroups split CPU between sessions
# whatever their nice level): MobileNetV2 at 2 threads beside one niced busy process took
# 364 ms (median) at 100000, 58 ms at 10000, 19 ms passive, against 17 ms at 1 thread; on the
# idle machine 10000 was as fast as 100000 (MobileNetV2 10.6 vs 12.3 ms, ResNet-50 81.7 vs
# 81.7 ms at 2 threads, best of 12). The cure for the contended case is a pool whose caller
# does the work its late partners have not started (onnxruntime's); libgomp's barrier always
# waits for every thread of the team.
SPIN_COUNT = 10_000


def openmp_defaults() -> None:
    """Before libgomp loads (it reads its environment once, then), unless the user chose a
    policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT): on an idle machine, idle threads spin
    SPIN_COUNT times (a fraction of a millisecond) before they sleep; on a busy one (1-minute
    load average above the core count less one half) they sleep at once (passive).
    Why: a Conv starts the thread team once per parallel loop, back to back; waking sleeping
    threads took so long that 2 threads ran no faster than 1 (ResNet-50 Conv 256 x 14 x 14:
    3.47 ms at 2 threads passive, 1.68 ms spinning, 3.45 ms at 1 thread; quiet machine). But
    spinning threads take the cores other work needs: at load 10 on 2 cores, libgomp's default
    spin made MobileNetV2 at 2 threads 3-8x slower than at 1."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    cores = os.cpu_count() or 1
    if os.getloadavg()[0] > cores - 0.5:
        os.environ["OMP_WAIT_POLICY"] = "passive"
    else:
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)


def libgomp_candidates() -> list[str]:
    """Where libgomp may be: what the system's linker knows, then the usual folders (the
    interpreter's prefix first, as conda installs it there)."""
    names = []
    found = ctypes.util.find_library("gomp")
    if found:
        names.append(found)
    dirs = [os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib"),
            "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
            "/opt/homebrew/lib"]
    for d in dirs:
        names += sorted(glob.glob(os.path.join(d, "libgomp.so*")))
        names += sorted(glob.glob(os.path.join(d, "libgomp*.dylib")))
    names.append("libgomp.so.1")
    return list(dict.fromkeys(names))


def load_libgomp() -> str:
    """Load libgomp into the process for LLVM's JIT to link against (once); returns its
    path. A RuntimeError that says what to do when it is nowhere."""
    if _GOMP:
        return _GOMP[0]
    import llvmlite.binding as llvm

    openmp_defaults()
    tried = libgomp_candidates()
    for path in tried:
        try:
            llvm.load_library_permanently(path)
        except RuntimeError:
            continue
        _GOMP.append(path)
        return path
    raise RuntimeError(
        "compiled code with parallel loops needs libgomp (GCC's OpenMP runtime, "
        f"libgomp.so.1) and it was not found (tried {', '.join(tried)}): install it "
        "(apt install libgomp1, or conda install libgomp), or compile without the "
        "'parallelize' pass (opt_level=1, or schedule='tile-matmul,unroll-small')")


class InputError(ValueError):
    """An argument to `run` does not match the compiled signature."""


def check_inputs(arrays, inputs):
    """Check `arrays` against the compiled signature [(name, shape, dtype)]; return them
    C-contiguous in native byte order. Every backend's session calls this first."""
    if len(arrays) != len(inputs):
        names = [n for n, _, _ in inputs]
        raise InputError(f"expected {len(inputs)} inputs {names}, got {len(arrays)}")
    out = []
    for a, (name, shape, dtype) in zip(arrays, inputs, strict=True):
        # The usual case, first (every run checks its arrays): a C-contiguous ndarray of the
        # compiled dtype in native byte order (`==` with a native dtype says both) and shape.
        if (type(a) is np.ndarray and a.dtype == dtype and a.shape == tuple(shape)
                and a.flags.c_contiguous):
            out.append(a)
            continue
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        # Byte order is no part of the type: a big-endian float32 is converted below.
        if a.dtype.newbyteorder("=") != dtype:
            raise InputError(f"input {name!r}: expected dtype {np.dtype(dtype).name}, got "
                             f"{a.dtype.name}")
        if tuple(a.shape) != tuple(shape):
            raise InputError(f"input {name!r}: expected shape {list(shape)}, got "
                             f"{list(a.shape)}")
        # Native byte order and C order: what the generated code indexes.
        out.append(np.ascontiguousarray(a.astype(a.dtype.newbyteorder("="), copy=False)))
    return out


class RunError(ValueError):
    """The compiled code met input data it cannot compute with (a Gather index out of range,
    integer division by zero or INT_MIN / -1): the message names the node. onnxruntime raises
    for the first two too; INT_MIN / -1 is undefined there (SIGFPE from one kernel, a wrapped
    INT_MIN from another), and compilerkit raises this error for it on every backend."""


def raise_for_status(status: int, message) -> None:
    """After a call: 0 is success; k > 0 means run-time check k failed, and `message(k)`
    (the compiled `main_graph_check_message`) says which."""
    if status:
        text = message(status) if message is not None else None
        raise RunError(text or f"run-time check {status} failed")


class Session:
    """Holds the native entry point, its signature and a pool of arenas.

    Thread-safe: each call takes an arena of its own from the pool (a new one when every
    arena is in use by another thread) and gives it back after the call, so one thread runs
    with no extra allocation after the first call, and N concurrent calls hold at most N
    arenas. The generated code keeps no other state between calls, apart from constants it
    fills once (under a lock here on the first call). ctypes releases the GIL during the
    call, so threads do run at once.

    Lifetime: the code `fn` points into lives as long as `keep_alive` (the JIT's engine and
    its `owner`, a shared library); `close()` releases `owner` (backends/lifetimes.py) once
    the runs in progress have returned, and a run after it is a RuntimeError, never a call
    into freed code. Dropping the session releases the owner too."""

    takes_num_threads = True  # run(..., num_threads=n) sets the parallel loops' threads

    def __init__(self, fn, arena_bytes, inputs, outputs, keep_alive=None, message=None,
                 pool=None, owner=None):
        # int64 main_graph(void **buffers, int64 num_threads): 0, or a failed check's number
        self.fn = fn
        self.message = message  # status -> text (main_graph_check_message)
        self.arena_bytes = arena_bytes
        self.inputs = inputs  # [(name, shape, dtype)]
        self.outputs = outputs
        self.keep_alive = keep_alive
        self.pool = pool  # backends.threadpool's Pool running the parallel loops, or None
        self._pointers = ctypes.c_void_p * (len(inputs) + len(outputs) + 1)
        # One lock guards the arena pool, the count of runs in progress and `closed`; close()
        # waits on a condition of the same lock for the runs to return.
        self._lock = threading.Lock()
        self._state = threading.Condition(self._lock)
        self._free = [self._new_arena()]  # (arena, its address) pairs not in use
        self._first = threading.Lock()  # the first call fills splat constants
        self._warm = False
        self.owner = owner  # what close() releases (a NativeOwner), or None
        self._running = 0
        self.closed = False

    def close(self) -> None:
        """Wait for the runs in progress, then release the native code (idempotent)."""
        with self._state:
            self.closed = True
            self._state.wait_for(lambda: self._running == 0)
        if self.owner is not None:
            self.owner.close()

    def _new_arena(self):
        # 64-byte aligned workspace; the array it views stays alive through `.base`.
        raw = np.zeros(self.arena_bytes + 64, dtype=np.uint8)
        start = (-raw.ctypes.data) % 64
        arena = raw[start:start + self.arena_bytes]
        return arena, (arena.ctypes.data if arena.size else 0)

    def run(self, *arrays, num_threads=None):
        """Outputs for `arrays`; the parallel loops use `num_threads` threads (None: the
        machine's cores). The answer is the same for every count."""
        # A call costs the model's work plus about 5 us here (11 us before the checks took
        # the usual case first and the locks merged): a twentieth of a 0.1 ms attention block.
        threads = check_num_threads(num_threads)
        pool = self.pool if threads > 1 else None
        if pool is not None:
            pool.ensure_workers(threads)
        ins = check_inputs(arrays, self.inputs)
        outs = [np.empty(shape, dtype=dtype) for _, shape, dtype in self.outputs]
        with self._lock:
            if self.closed:
                raise RuntimeError("this compiled model was closed: its native code is "
                                   "released; compile it again")
            self._running += 1
            arena = self._free.pop() if self._free else None
        try:
            if arena is None:
                arena = self._new_arena()
            buf = self._pointers(*[a.ctypes.data for a in ins],
                                 *[o.ctypes.data for o in outs], arena[1])
            if pool is not None:
                with pool.held():  # workers stay awake through the run's loops
                    status = self._call(buf, threads)
            else:
                status = self._call(buf, threads)
        finally:
            with self._lock:
                if arena is not None:
                    self._free.append(arena)
                self._running -= 1
                if self.closed and not self._running:
                    self._state.notify_all()
        if status:
            raise_for_status(int(status), self.message)
        return outs

    def _call(self, buf, threads):
        if self._warm:
            return self.fn(buf, threads)
        with self._first:
            status = self.fn(buf, threads)
            self._warm = True
        return status
