"""Measure this machine for compilerkit.roofline: the GEMM micro-kernel's peak FLOP/s and each
memory level's bandwidth, with kernels compilerkit itself compiles (roofline's docstring says
which), cached per CPU model so the compiler's "auto" can read it without measuring.

    m = roofline_measure.measured_machine()   # measures once (about a minute), then the cache

It lives apart from compilerkit.roofline because it compiles models: the compiler reads the
roofline while it lowers, so the roofline itself must not import the compiler.
"""

from __future__ import annotations

import math
import time

import numpy as np

import compilerkit as ck
from compilerkit import roofline as rl


def _compiled(model):
    return ck.compile(model, asm=False, num_threads=1)


def _best(fn, repeat: int) -> float:
    fn()
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(repeat: int = 20, caches=None, dram_bytes: int = rl.DRAM_TEST_BYTES) -> rl.Machine:
    """Measure the peak and the bandwidths with compilerkit's kernels (compilerkit.roofline's
    docstring says how)."""
    from onnx import helper, numpy_helper

    caches = dict(caches or rl.detect_caches())
    n = 384
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", 1, [n, n])],
                          [helper.make_tensor_value_info("y", 1, None)], [w])
    mm = _compiled(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = rng.standard_normal((n, n)).astype(np.float32)
    peak = 2 * n ** 3 / _best(lambda: mm.run(x, num_threads=1), repeat)
    bw = {}
    sizes = {lv: caches[lv] // 2 for lv in ("L1", "L2", "L3")}
    sizes["DRAM"] = dram_bytes
    for lv, nbytes in sizes.items():
        count = max(1024, nbytes // 8)  # x and y, 4 bytes each
        # a chain of `links` Adds in one model, so a call of a small array outlasts the
        # call's overhead; buffer planning gives the links' outputs two buffers in turn
        links = int(min(256, max(1, 4e6 // count)))
        one = numpy_helper.from_array(np.array(1, np.float32), "one")
        names = ["x"] + [f"y{i}" for i in range(links)]
        nodes = [helper.make_node("Add", [names[i], "one"], [names[i + 1]])
                 for i in range(links)]
        g = helper.make_graph(nodes, "add", [helper.make_tensor_value_info("x", 1, [count])],
                              [helper.make_tensor_value_info(names[-1], 1, None)], [one])
        add = _compiled(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
        xv = np.ones(count, np.float32)
        secs = _best(lambda add=add, xv=xv: add.run(xv, num_threads=1), max(3, repeat // 4))
        bw[lv] = 8 * count * links / secs
    return rl.Machine(peak, bw, caches)


def measured_machine(remeasure: bool = False) -> rl.Machine:
    """The cached measurement of this machine, measured and cached on first use (or when
    `remeasure`)."""
    if rl.cache_path().is_file() and not remeasure:
        return rl.machine()
    m = measure()
    rl.save(m)
    return m
