"""The one best-of-N timer that the benchmarks, the experiments, the roofline measurement and
the ZNNi planner share.

    best_of({"a": f, "b": g}, repeat=5)            # {name: best seconds}
    best_of(f, repeat=5)                           # one callable: its best seconds

Every callable is called once untimed (warm-up: JIT caches, page faults, the thread pool),
then `repeat` rounds in which each is called once in turn, so a slow spell of a loaded
machine falls on every contender alike; the best call is kept (noise only ever adds time).
With `shuffle` (a seed) each round runs in a new random order, because what ran just before
decides which data is still in the cache.

Clocks: "thread" (time.thread_time, the calling thread's CPU time: for code that runs on the
calling thread, time the core was lent to other processes is left out), "process"
(time.process_time, every thread of this process), "wall" (time.perf_counter). `load()` is the
machine's load average, recorded beside a measurement so a reader can tell a quiet run from a
busy one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

import numpy as np

CLOCKS = {"thread": time.thread_time, "process": time.process_time, "wall": time.perf_counter}


def clock(name: str) -> Callable[[], float]:
    """The clock called `name` (CLOCKS), or a ValueError naming the choices."""
    if name not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {name!r}")
    return CLOCKS[name]


def best_of(fns, repeat: int, clock_name: str = "thread", shuffle: int | None = None,
            warmup: bool = True):
    """Best seconds of each callable over `repeat` interleaved rounds (the module docstring
    says how). `fns` is a mapping name -> callable (returns {name: seconds}) or one callable
    (returns its seconds)."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    now = clock(clock_name)
    single = not isinstance(fns, Mapping)
    table = {None: fns} if single else dict(fns)
    if warmup:
        for f in table.values():
            f()
    best = {k: float("inf") for k in table}
    order = list(table)
    rng = np.random.default_rng(shuffle) if shuffle is not None else None
    for _ in range(repeat):
        if rng is not None:
            rng.shuffle(order)
        for k in order:
            t = now()
            table[k]()
            best[k] = min(best[k], now() - t)
    return best[None] if single else best


def load() -> list[float]:
    """`cat /proc/loadavg`'s three numbers (os.getloadavg), rounded to hundredths."""
    return [round(v, 2) for v in os.getloadavg()]
