"""Measurements shared by benchmarks/znn_bench.py and notebook 33: the benchmark nets, timings
at 1 and 2 threads, Brent's prediction beside them, FFT against direct against TensorFlow, and
how busy the machine was (other processes make every timing an upper bound).

TensorFlow is imported inside the functions that need it: importing segkit.znn stays light.
So is the shared timer (`compilerkit.measure.timing`, best-of-N, interleaved): importing it
imports compilerkit.
"""

from __future__ import annotations

import os
import time
from functools import partial

import numpy as np

from compilerkit.measure.timing import parallel_ceiling  # noqa: F401 (measure's API)

from .brent import brent, simulate, task_costs, work_span
from .network import Network


# the machine ----------------------------------------------------------------------------------
def _cpu_times():
    with open("/proc/stat") as f:
        fields = [float(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def cpu_busy(seconds: float = 1.0) -> float:
    """Share of all cores busy over the next ``seconds`` (0..1), from /proc/stat."""
    total0, idle0 = _cpu_times()
    time.sleep(seconds)
    total1, idle1 = _cpu_times()
    return 1.0 - (idle1 - idle0) / max(total1 - total0, 1e-9)


def wait_quiet(threshold: float = 0.15, timeout: float = 300.0, progress: bool = True) -> dict:
    """Wait (up to ``timeout`` s) until other processes use under ``threshold`` of the CPU;
    returns what the machine looked like when we started measuring.  ``progress``: a bar of the
    seconds waited (a busy machine makes this the longest silence of a notebook)."""
    from tqdm.auto import tqdm

    start = time.perf_counter()
    busy = cpu_busy()
    waiting = busy > threshold and timeout > 0
    with tqdm(total=round(timeout), desc="waiting for a quiet CPU", leave=False,
              bar_format="{l_bar}{bar}| {n}/{total} s", disable=not (progress and waiting)) as bar:
        while busy > threshold and time.perf_counter() - start < timeout:
            busy = cpu_busy(2.0)
            bar.update(min(bar.total, round(time.perf_counter() - start)) - bar.n)
    return {"busy_before": round(busy, 3), "load1": os.getloadavg()[0],
            "waited_s": round(time.perf_counter() - start, 1), "quiet": busy <= threshold}


# nets -----------------------------------------------------------------------------------------
def bench_model(kernel=3, channels=8, size=32, layers=3, batch=1, seed=0, in_channels=1):
    """A 'wide' ZNN benchmark net: ``layers`` Conv3D of ``channels`` maps with cubic (or
    given) kernels and ReLU, then a 1x1x1 output map; random input and target."""
    import keras

    keras.utils.set_random_seed(seed)
    k = (kernel,) * 3 if isinstance(kernel, int) else tuple(kernel)
    body = [keras.layers.Conv3D(channels, k, activation="relu") for _ in range(layers)]
    model = keras.Sequential([keras.Input((size, size, size, in_channels)), *body,
                              keras.layers.Conv3D(1, 1)])
    rng = np.random.default_rng(seed)
    x = rng.random((batch, size, size, size, in_channels), dtype=np.float32)
    y = rng.random(model.output_shape[1:], dtype=np.float32)[None].repeat(batch, 0)
    return model, x, y


def tf_gradients(model, x, y):
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    return [g.numpy() for g in tape.gradient(loss, model.trainable_weights)]


def max_relative_error(ours, ref) -> float:
    """max over weight tensors of max|ours - ref| / max|ref|."""
    return max(float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-30))
               for a, b in zip(ours, ref, strict=True))


def tf_step_seconds(model, x, y, repeat: int = 3) -> float:
    """Best time of one TensorFlow training step (forward, loss, gradients) in a tf.function,
    on every core (TensorFlow's default)."""
    import tensorflow as tf

    from compilerkit.measure.timing import best_of

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        return tape.gradient(loss, model.trainable_weights)

    xt, yt = tf.constant(x), tf.constant(y)
    # the untimed first call traces and warms up; wall clock: TensorFlow runs on its own threads
    return best_of(lambda: [g.numpy() for g in step(xt, yt)], repeat, "wall")


# timings ----------------------------------------------------------------------------------------
def thread_timings(net: Network, x, y, threads=(1, 2), repeat: int = 5) -> dict:
    """Gradient passes at each thread count, interleaved so drifts in load hit all alike;
    keeps the best time and that run's records for each count (wall clock: the passes run on
    `p` threads)."""
    from compilerkit.measure.timing import samples

    net.gradients(x, y, threads=max(threads))  # compile kernels, warm caches
    runs = {p: [] for p in threads}

    def one(p):
        runs[p].append(net.gradients(x, y, threads=p, return_run=True)[2])
    seconds = samples({p: partial(one, p) for p in threads}, repeat, "wall", warmup=False)
    out = {}
    for p, ts in seconds.items():
        best = min(range(len(ts)), key=ts.__getitem__)
        out[p] = {"seconds": ts[best], "run": runs[p][best]}
    return out


def brent_table(timings: dict, threads=(1, 2, 4, 8, 16)) -> dict:
    """Work and span from the best 1-thread run; Brent's prediction and the greedy simulation
    at each P, beside the measured time where we have one."""
    one = timings[1]["run"]
    cost = task_costs(one["records"], one["wall"])
    work, span = work_span(one["graph"], cost)
    rows = []
    for p in threads:
        row = brent(work, span, p)
        row["simulated"] = simulate(one["graph"], cost, p)
        if p in timings:
            row["measured"] = timings[p]["run"]["wall"]
            row["error"] = (row["predicted"] - row["measured"]) / row["measured"]
        rows.append(row)
    return {"work": work, "span": span, "tasks": len(one["graph"]), "rows": rows}


def method_timings(model, x, y, threads: int = 2, repeat: int = 3) -> dict:
    """Best seconds of a gradient pass with direct and with FFT convolutions (wall clock)."""
    from compilerkit.measure.timing import best_of

    out = {}
    for method in ("direct", "fft"):
        net = Network(model, method=method)
        out[method] = best_of(lambda net=net: net.gradients(x, y, threads=threads), repeat,
                              "wall")
    return out


def kernel_scaling(size: int = 48, seconds: float = 0.5) -> dict:
    """Do the compute kernels release the GIL?  About ``seconds`` of calls of each kernel on one
    thread, then the same calls split over two threads; the ratio is ~2 when they run in
    parallel, ~1 when the GIL (or anything else) serialises them."""
    import threading

    import scipy.fft

    from . import kernels

    rng = np.random.default_rng(0)
    x = rng.random((1, size, size, size), dtype=np.float32)
    w = rng.random((3, 3, 3), dtype=np.float32)
    out = np.zeros((1, size - 2, size - 2, size - 2), np.float32)
    spec = kernels.rfft3(x, (size,) * 3)
    filt = spec[0].copy()
    jobs = {
        "direct conv (numba)": lambda: kernels.corr_valid_acc(x, w, out.copy()),
        "rfftn (scipy.fft)": lambda: scipy.fft.rfftn(x[0], workers=1),
        "spectrum multiply-add (numba)": lambda: kernels.mad_conj(spec, filt, spec.copy()),
    }
    result = {}
    for name, job in jobs.items():
        job()  # compile / warm up
        t0 = time.perf_counter()
        job()
        calls = 2 * max(2, int(seconds / max(time.perf_counter() - t0, 1e-6) / 2))

        def many(n, job=job):
            for _ in range(n):
                job()
        t0 = time.perf_counter()
        many(calls)
        one = time.perf_counter() - t0
        threads = [threading.Thread(target=many, args=(calls // 2,)) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        two = time.perf_counter() - t0
        result[name] = {"calls": calls, "one_thread_s": one, "two_threads_s": two,
                        "ratio": one / two}
    return result


# (channels, side, layers) of the small-step curve: 3x3x3 kernels, steps of about 2 to 300 ms
CURVE = ((4, 12, 2), (6, 16, 2), (8, 16, 3), (8, 20, 3), (12, 24, 3), (12, 36, 3))


def small_step_curve(cases=CURVE, repeat: int = 7, granularities=("edge", "node"),
                     progress: bool = True) -> list[dict]:
    """Speed-up of two threads over one against the step's size: per case and granularity, the
    best wall time of a training step (a Network's second and later passes reuse its task
    graph) of `repeat` interleaved runs at 1 and 2 threads, each right after an untimed step at
    the same thread count, and the machine's parallel_ceiling measured just before and
    after."""
    from tqdm.auto import tqdm

    from compilerkit.measure.timing import samples

    rows = []
    for channels, side, layers in tqdm(cases, desc="small steps", disable=not progress):
        model, x, y = bench_model(kernel=3, channels=channels, size=side, layers=layers)
        nets = {g: Network(model, method="direct", granularity=g) for g in granularities}
        fns = {(g, p): partial(net.gradients, x, y, threads=p)
               for g, net in nets.items() for p in (1, 2)}
        before = parallel_ceiling()
        # steady: each timed step right after one at the same thread count, as in training
        seconds = samples(fns, repeat, "wall", steady=True)
        after = parallel_ceiling()
        for g, net in nets.items():
            t1, t2 = min(seconds[(g, 1)]), min(seconds[(g, 2)])
            rows.append({"channels": channels, "side": side, "layers": layers,
                         "granularity": g, "tasks": len(net.build(x, y)[0]),
                         "t1_s": t1, "t2_s": t2, "speedup": t1 / t2,
                         "machine_ceiling": [round(before, 3), round(after, 3)]})
    return rows


def gil_check(size: int = 64, seconds: float = 0.3) -> dict:
    """Does a kernel hold Python's GIL?  A pure-Python thread counts while the kernel runs;
    its rate, relative to its rate while the main thread sleeps, is ~1 (or ~0.5 when the two
    share one free core) if the kernel releases the GIL and ~0 if it holds it.  Unlike a
    speed-up, this reads the same on a loaded machine."""
    import threading

    import scipy.fft
    import scipy.ndimage
    import scipy.signal

    from . import kernels

    rng = np.random.default_rng(0)
    x = rng.random((1, size, size, size), dtype=np.float32)
    w = rng.random((3, 3, 3), dtype=np.float32)
    out = np.zeros((1, size - 2, size - 2, size - 2), np.float32)
    spec = kernels.rfft3(x, (size,) * 3)
    filt = spec[0].copy()
    jobs = {
        "sleep": lambda: time.sleep(0.05),
        "direct conv (numba)": lambda: kernels.corr_valid_acc(x, w, out),
        "spectrum multiply-add (numba)": lambda: kernels.mad_conj(spec, filt, spec.copy()),
        "rfftn (scipy.fft, workers=1)": lambda: scipy.fft.rfftn(x[0], workers=1),
        "scipy.ndimage.correlate": lambda: scipy.ndimage.correlate(x[0], w),
        "scipy.signal.correlate (direct)":
            lambda: scipy.signal.correlate(x[0], w, mode="valid", method="direct"),
    }
    rates = {}
    for name, job in jobs.items():
        job()  # compile / warm up
        count, stop = [0], [False]

        def spin(count=count, stop=stop):
            while not stop[0]:
                count[0] += 1
        thread = threading.Thread(target=spin)
        t0 = time.perf_counter()
        thread.start()
        while time.perf_counter() - t0 < seconds:
            job()
        stop[0] = True
        thread.join()
        rates[name] = count[0] / (time.perf_counter() - t0)
    return {name: round(rate / rates["sleep"], 3) for name, rate in rates.items()
            if name != "sleep"}
