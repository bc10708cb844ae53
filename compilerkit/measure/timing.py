"""The one best-of-N timer that the benchmarks, the experiments, the roofline measurement, the
conformance timings, LoopTune's measurer, the ZNNi planner and segkit's ZNN measurements share.

    best_of({"a": f, "b": g}, repeat=5)            # {name: best seconds}
    best_of(f, repeat=5)                           # one callable: its best seconds
    best_of(f, 5, ("wall", "thread"))              # (best wall seconds, best thread seconds)
    samples({"a": f, "b": g}, 5, "wall")           # {name: [seconds of each timed call]}

Every callable is called once untimed (warm-up: JIT caches, page faults, the thread pool),
then `repeat` rounds in which each is called once in turn, so a slow spell of a loaded
machine falls on every contender alike; the best call is kept (noise only ever adds time).
With `shuffle` (a seed) each round runs in a new random order, because what ran just before
decides which data is still in the cache. `samples` keeps every call's seconds (for a median
beside the best); `best_of` is their minimum.

Clocks: "thread" (time.thread_time, the calling thread's CPU time: for code that runs on the
calling thread, time the core was lent to other processes is left out), "process"
(time.process_time, every thread of this process: user + system), "wall" (time.perf_counter).
Several clocks at once (a tuple of names) read each around the same calls and give a tuple
per call, the best of each clock taken on its own. `load()` is the machine's load average,
recorded beside a measurement so a reader can tell a quiet run from a busy one;
`parallel_ceiling()` what two threads can gain over one here at that moment (on a virtual
machine whose two CPUs may share a physical core it swings within minutes), recorded beside any
two-thread speed-up.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping

import numpy as np

CLOCKS = {"thread": time.thread_time, "process": time.process_time, "wall": time.perf_counter}
BUDGET_MIN_ROUNDS = 3  # a budget never cuts a measurement below three rounds (a median exists)


def clock(name: str) -> Callable[[], float]:
    """The clock called `name` (CLOCKS), or a ValueError naming the choices."""
    if name not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {name!r}")
    return CLOCKS[name]


def samples(fns, repeat, clock_name="thread", shuffle: int | None = None, warmup: bool = True,
            before: Callable[[], object] | None = None, budget_s: float | None = None,
            steady: bool = False):
    """Seconds of every timed call, round by round (the module docstring says how).

    `fns`: a mapping name -> callable (returns {name: [seconds, ...]}) or one callable
    (returns its list). `clock_name`: a name of CLOCKS, or a tuple of them (each entry is then
    a tuple of seconds, one per clock). `repeat`: the rounds, or a mapping name -> its calls (a
    contender given fewer sits out the later rounds: a slow peer is called less often).
    `before`: called untimed before each timed call (a pause while another library's idle
    threads stop spinning, a garbage collection). `budget_s`: stop after the round in which
    this many wall seconds have passed since the first timed call (BUDGET_MIN_ROUNDS at least).
    `steady`: each timed call right after an untimed call of the same callable, as in a loop
    that runs it again and again; otherwise the contender before it decides what state it
    starts from (a second thread's CPU that slept through a 1-thread contender, a cache another
    contender filled).
    """
    single = not isinstance(fns, Mapping)
    table = {None: fns} if single else dict(fns)
    counts = _counts(repeat, table)
    several = not isinstance(clock_name, str)
    names = tuple(clock_name) if several else (clock_name,)
    if not names:
        raise ValueError("clock_name names no clock")
    clocks = [clock(n) for n in names]
    if warmup:
        for f in table.values():
            f()
    times = {k: [] for k in table}
    order = list(table)
    rng = np.random.default_rng(shuffle) if shuffle is not None else None
    wall = CLOCKS["wall"]
    start = wall()
    for r in range(max(counts.values(), default=0)):
        if rng is not None:
            rng.shuffle(order)
        for k in order:
            if r >= counts[k]:
                continue
            if before is not None:
                before()
            if steady:
                table[k]()
            begin = [c() for c in clocks]
            table[k]()
            end = [c() for c in reversed(clocks)][::-1]  # the first clock brackets the others
            spent = tuple(b - a for a, b in zip(begin, end, strict=True))
            times[k].append(spent if several else spent[0])
        if budget_s is not None and r + 1 >= BUDGET_MIN_ROUNDS and wall() - start > budget_s:
            break
    return times[None] if single else times


def best_of(fns, repeat, clock_name="thread", shuffle: int | None = None, warmup: bool = True,
            before: Callable[[], object] | None = None, budget_s: float | None = None,
            steady: bool = False):
    """Best seconds of each callable over `repeat` interleaved rounds: the minimum of
    `samples` (same arguments). {name: seconds} for a mapping, seconds for one callable; with
    several clocks a tuple of each clock's best."""
    got = samples(fns, repeat, clock_name, shuffle, warmup, before, budget_s, steady)
    several = not isinstance(clock_name, str)

    def best(ts):
        return tuple(min(col) for col in zip(*ts, strict=True)) if several else min(ts)

    return {k: best(ts) for k, ts in got.items()} if isinstance(got, dict) else best(got)


def _counts(repeat, table: dict) -> dict:
    """Timed calls per contender: `repeat` for each, or its entry when `repeat` is a mapping."""
    if isinstance(repeat, Mapping):
        missing = [k for k in table if k not in repeat]
        if missing:
            raise ValueError(f"repeat gives no count for {missing}")
        counts = {k: repeat[k] for k in table}
    else:
        counts = dict.fromkeys(table, repeat)
    for k, n in counts.items():
        if not isinstance(n, (int, np.integer)) or n < 1:
            what = "repeat" if k is None or not isinstance(repeat, Mapping) else f"repeat[{k!r}]"
            raise ValueError(f"{what} must be at least 1, got {n!r}")
    return counts


def load() -> list[float]:
    """`cat /proc/loadavg`'s three numbers (os.getloadavg), rounded to hundredths."""
    return [round(v, 2) for v in os.getloadavg()]


_FMA: list = []   # parallel_ceiling's kernel, compiled on first use (numba, once a process)


def _fma_kernel():
    if not _FMA:
        import numba

        @numba.njit(nogil=True, fastmath=True)
        def fma(a, b, c, reps):
            for _ in range(reps):
                for i in range(a.size):
                    c[i] += a[i] * b[i]
        _FMA.append(fma)
    return _FMA[0]


def parallel_ceiling(seconds: float = 0.05, repeat: int = 3) -> float:
    """What two threads reach over one on perfectly parallel vector arithmetic split evenly
    here: each thread multiply-adds its own 8 KB arrays (in L1, nothing shared, the GIL
    released), about ``seconds`` of work on one thread; best of ``repeat`` each, interleaved.
    2.0 on two free cores; less where the two logical CPUs share a physical core or the host
    slows one of them (a virtual machine). A static split of work between two threads cannot
    beat it in the same minute; one that balances as it goes can, when one CPU is slower than
    the other (OpenVINO's did here: 1.5-1.8x while this read 0.75-1.19x). Speed-ups are
    reported beside it."""
    if not (isinstance(seconds, (int, float)) and 0 < seconds < math.inf):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a whole number >= 1, got {repeat!r}")
    fma = _fma_kernel()
    arrays = [[np.ones(2048, np.float32) for _ in range(3)] for _ in range(2)]
    fma(*arrays[0], 1)
    t0 = time.perf_counter()
    fma(*arrays[0], 100)
    reps = 2 * max(1, int(seconds / max(time.perf_counter() - t0, 1e-9) * 100 / 2))

    def timed(threads):
        pool = [threading.Thread(target=fma, args=(*arrays[t], reps // threads))
                for t in range(threads)]
        t0 = time.perf_counter()
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        return time.perf_counter() - t0
    one = two = float("inf")
    for _ in range(repeat):
        one = min(one, timed(1))
        two = min(two, timed(2))
    return one / two
