"""Measure this machine for compilerkit.roofline: the GEMM micro-kernel's peak FLOP/s, each
memory level's bandwidth and the transforms' rates, with kernels compilerkit itself compiles
(roofline's docstring says which), cached per CPU model so the compiler's "auto" can read it
without measuring.

    m = measure.machine.measured_machine()   # measures once (about a minute), then the cache

It lives apart from compilerkit.roofline because it compiles models: the compiler reads the
roofline while it lowers, so the roofline itself must not import the compiler.
"""

from __future__ import annotations

import math

import numpy as np

import compilerkit as ck
from compilerkit import roofline as rl
from compilerkit.measure.timing import best_of


def _compiled(model):
    return ck.compile(model, asm=False, num_threads=1)


def _best(fn, repeat: int) -> float:
    # wall clock: the bandwidth kernels' time is the memory system's, not only this thread's
    return best_of(fn, repeat, "wall")


def to_layer(spec) -> rl.Layer:
    """(C in, C out, spatial size, rank, kernel) -> the roofline's Layer."""
    c, k, hw, rank, ks = spec
    return rl.Layer(c, k, (hw,) * rank, ks)


def conv_model(c_in, c_out, hw, rank=2, kernel=3, seed=0, stride=1):
    """ONNX: x [1, c_in, hw...] -> Relu(Conv(x, w, b)), pads kernel // 2 ('same' at stride
    1), `stride` on every axis, random weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((c_out, c_in) + (kernel,) * rank)
         / math.sqrt(kernel ** rank * c_in)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32), "b")]
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"conv_model: stride must be a whole number >= 1, got {stride!r}")
    strides = {"strides": [stride] * rank} if stride != 1 else {}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[kernel // 2] * (2 * rank),
                              **strides),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info(
        "x", 1, [1, c_in] + [hw] * rank)], [helper.make_tensor_value_info("z", 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# Calibration layers (C in, C out, spatial size, rank, kernel) for the transform rates: small,
# 2-D and 3-D, 12-48 channels, none of them in the fast-convolution experiment's SWEEP
# (mlsys_workbench.experiments.fastconv, which checks the model).
# The FFT's include 3x3(x3) kernels: "auto" and the sweep weigh the FFT on them too, and its
# small tiles there run the butterflies slower than on 5^3 and 7^3 kernels' larger ones
CALIBRATION = {
    "winograd_flops": ("winograd-f4", [(24, 24, 48, 2, 3), (16, 16, 20, 3, 3),
                                       (48, 48, 24, 2, 3), (12, 12, 16, 3, 3)]),
    "transform_flops": ("fft", [(24, 24, 40, 2, 5), (12, 12, 16, 3, 5),
                                (16, 16, 12, 3, 7), (40, 40, 24, 2, 7),
                                (24, 24, 40, 2, 3), (12, 12, 20, 3, 3)]),
}
RATE_GRID = [4e9 * 1.05 ** i for i in range(120)]  # 4 GFLOP/s to 1.2 TFLOP/s, 5% apart


def fit_transform_rates(m: rl.Machine, measured) -> dict:
    """{rate field: FLOP/s} for each transform rate that `measured` ([(field, algorithm,
    Layer, seconds)]) calibrates: the RATE_GRID value, at most `m`'s peak (no transform
    outruns the FMA peak), whose predictions, with `m`'s other numbers, have the least median
    |log(predicted / measured)| over that field's layers."""
    grid = [r for r in RATE_GRID if r <= m.peak_flops] or RATE_GRID[:1]
    rates = {}
    for name in {row[0] for row in measured}:
        rows = [row[1:] for row in measured if row[0] == name]

        def error(rate, rows=rows, name=name):
            trial = rl.Machine(**{**m.__dict__, name: rate})
            return float(np.median([abs(math.log(rl.predict(layer, algo, trial) / seconds))
                                    for algo, layer, seconds in rows]))
        rates[name] = min(grid, key=error)
    return rates


def calibrate_transforms(m: rl.Machine, repeat: int = 7) -> rl.Machine:
    """`m` with Winograd's and the FFT's transform rates calibrated on CALIBRATION's layers,
    each compiled (1 thread, three-stage) and timed here (best of `repeat`)."""
    measured = []
    for name, (algo, specs) in CALIBRATION.items():
        for spec in specs:
            c, k, hw, rank, kernel = spec
            cm = ck.compile(conv_model(c, k, hw, rank, kernel), asm=False, num_threads=1,
                            conv_algorithm=algo)
            x = np.random.default_rng(1).standard_normal((1, c) + (hw,) * rank).astype(
                np.float32)
            seconds = _best(lambda cm=cm, x=x: cm.run(x, num_threads=1), repeat)
            measured.append((name, algo, to_layer(list(spec)), seconds))
    return rl.Machine(**{**m.__dict__, **fit_transform_rates(m, measured),
                         "transforms_measured": True})


def measure(repeat: int = 20, caches=None, dram_bytes: int = rl.DRAM_TEST_BYTES,
            progress: bool = False) -> rl.Machine:
    """Measure the peak, the bandwidths and the transform rates with compilerkit's kernels
    (compilerkit.roofline's docstring says how); ``progress``: a tqdm bar of the six
    measurements (about 25 s on a 2-core machine)."""
    from onnx import helper, numpy_helper
    from tqdm.auto import tqdm

    from compilerkit.backends.host import host_target

    caches = dict(caches or rl.detect_caches())
    bar = tqdm(total=6, desc="machine rates", unit="rate", leave=False, disable=not progress)
    n = 384
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", 1, [n, n])],
                          [helper.make_tensor_value_info("y", 1, None)], [w])
    mm = _compiled(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = rng.standard_normal((n, n)).astype(np.float32)
    peak = 2 * n ** 3 / _best(lambda: mm.run(x, num_threads=1), repeat)
    bar.update()
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
        bar.update()
    lanes = host_target().vector_width
    measured = calibrate_transforms(rl.Machine(peak, bw, caches, lanes=lanes), max(3, repeat // 3))
    bar.update()
    bar.close()
    return measured


def measured_machine(remeasure: bool = False, progress: bool = False) -> rl.Machine:
    """The cached measurement of this machine, measured and cached on first use, when
    `remeasure`, or when the cache predates the calibrated transform rates (``progress``: a bar
    while measuring)."""
    if rl.cache_path().is_file() and not remeasure:
        m = rl.machine()
        if m.transforms_measured:
            return m
    m = measure(progress=progress)
    rl.save(m)
    return m
