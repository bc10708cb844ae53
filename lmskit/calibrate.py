"""Calibrate the simulator's time model from measured profiles, and check its predictions.

CPU (this machine, one core): TF's profiler (tf.profiler.experimental) records real training
steps of captured Graphs run by lmskit.tfrun with one thread (one op at a time, as the
simulator's single compute stream assumes). Every executor event
"op_name:OpType" gives that op's time. Grappler fuses some ops (Conv2D + BiasAdd + Relu ->
_FusedConv2D, named after the last op): a fused event's time is shared by the chain it
replaced; ops Grappler removed count as 0 s. The profiled times add up to more than the step's
wall time (profiling slows each op), so each profile is scaled to its wall time: the profile
gives the split across ops, the step's CPU time (less the fixed cost of a step outside its
ops, measured on a near-empty step) the total. Each op's time is its least over the profiled
runs: the profiler reads wall time, and one preemption makes a 4 us op read milliseconds;
a fused event is shared by its chain in proportion to the members' roofline times. The steps
run on one thread (single_stream), so the CPU time of a step is its quiet wall time, and other
sessions on a shared machine delay it without adding to it (preemption also stretches the
profiled ops in proportion to their length, on average, so the split survives it). Step times
are steady-state steps (steady_step: the step of a training loop, not the cold first step
after other work), the least CPU time of 9 rounds taken over all runs (round-robin sees every
run in every phase of the load); wall times and the load average around them are recorded
beside.
Per op type, time = a x compute roofline + b x memory roofline + c seconds + d x a
convolution's patch matrix (im2col) over the memory bandwidth (non-negative least squares, each
run weighted by its relative error; fit_cpu says why), plus the step's fixed cost; fitted
on every model at two batches (RUNS); types never seen take the median of their class (heavy:
convolutions and matrix products; light: the rest). Six held-out runs check the predictions:
each fitted model at twice its larger batch, a model never profiled and a size never profiled.

GPU presets: one number per device is fitted on one ResNet-50 step time (GPU_ANCHORS): phi,
the share of the roofline time that memory-bound ops take (fusion; see fit_gpu), with the
convolution efficiency assumed (CONV_EFFICIENCY). The P100 and the H100 are fitted; the V100
(with the P100's phi) and the H100's save_on_cpu step are predictions.

Regenerate lmskit/data/calibration.json (no network; about seven minutes on a quiet machine):
    python -m lmskit.calibrate                         # profile, fit, validate, write the JSON
    python -m lmskit.calibrate --gpu-only              # refit the GPU presets only
    python -m lmskit.calibrate --profiles prof.json    # keep/reuse measured profiles
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import tempfile
import time
from collections import defaultdict

import numpy as np

from . import progress
from .devices import CALIBRATION, GB, Device, get_device
from .graph import Graph, producer_name
from .simulate import FREE_TYPES, _linear_costs, op_bytes, op_flops, simulate

HEAVY = ("Conv", "MatMul", "BatchMatMul", "DepthwiseConv")
# Roofline base of the CPU preset (nominal: AVX2 FMA, DRAM); the fitted coefficients do the rest.
CPU_BASE = dict(name="cpu-here", memory_bytes=64 * 2**30, flops=100e9, memory_bandwidth=10 * GB,
                h2d_bandwidth=10 * GB, d2h_bandwidth=10 * GB, compute_efficiency=1.0,
                bandwidth_efficiency=1.0, launch_overhead_s=0.0)


def heavy(op_type: str) -> bool:
    return op_type.lstrip("_").startswith(HEAVY) or op_type.startswith("_Fused")


# -- measuring ------------------------------------------------------------------------------

def _events(logdir: str):
    """(op name, op type, seconds) for every executor op event in the profile under logdir."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    out = []
    for path in glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            md = plane.event_metadata
            for line in plane.lines:
                if not line.name.startswith("tf_Compute"):
                    continue
                for e in line.events:
                    name = md[e.metadata_id].name
                    if ":" in name:
                        op, typ = name.rsplit(":", 1)
                        out.append((op, typ, e.duration_ps * 1e-12))
    return out


def profile_step(graph: Graph, inputs, steps: int = 5, profiled: int = 5) -> dict:
    """Run the captured step in TF: its fastest wall time of `steps` runs (the least disturbed
    by other work on the machine), and each op's least time over `profiled` profiled runs
    ({op name: seconds}, fused events attributed to their chain). The profiler times an op by
    its wall time, so on a shared machine an op that was preempted once reads many times its
    length (a 4 us MatMul read 1.5 ms in one profile here): best-of-N per op, as for whole
    steps, and not the mean."""
    import tensorflow as tf

    from .tfrun import runnable

    step = runnable(graph, fetch=[graph.loss])
    batch = len(inputs[0])
    step(*inputs)                               # warm-up: tracing, allocations
    # Timed here, not with compilerkit.measure.timing (the workbench's one best-of-N timer):
    # lmskit may not import compilerkit (docs/DESIGN.md). The same rules: a warm-up, then the
    # best of N, wall clock (perf_counter; TensorFlow runs on its own threads).
    walls = []
    for _ in range(steps):
        t = time.perf_counter()
        step(*inputs)
        walls.append(time.perf_counter() - t)
    best: dict[str, float] = {}
    op_sums = []
    for _ in range(profiled):
        with tempfile.TemporaryDirectory() as logdir:
            tf.profiler.experimental.start(logdir)
            step(*inputs)
            tf.profiler.experimental.stop()
            events = _events(logdir)
        measured: dict[str, float] = defaultdict(float)
        for name, typ, sec in events:
            if name not in graph.ops:
                continue
            for member, share in fused_shares(graph, name, typ, batch).items():
                measured[member] += sec * share
        for name, sec in measured.items():
            best[name] = min(best.get(name, sec), sec)
        op_sums.append(sum(measured.values()))
    return {"wall_s": min(walls), "wall_median_s": statistics.median(walls),
            "ops": best, "op_sum_s": min(op_sums)}


def fused_chain(graph: Graph, name: str, event_type: str) -> list[str]:
    """The graph ops one profiler event covers: the op itself, or for a Grappler fusion the
    chain from the heavy op it starts at up to the named op."""
    op = graph.ops[name]
    if op.type == event_type or not event_type.startswith("_Fused"):
        return [name]
    members = [name]
    cur = op
    for _ in range(4):
        if heavy(cur.type) or not cur.inputs:
            break
        cur = graph.ops[producer_name(cur.inputs[0])]
        members.append(cur.name)
    return members[::-1]


def fused_shares(graph: Graph, name: str, event_type: str, batch: int) -> dict[str, float]:
    """{graph op: share of the event's time} for one profiler event. A Grappler fusion's time
    goes to its chain in proportion to each member's roofline time on the CPU base (max of
    compute and memory): the convolution or matrix product of Conv2D + BiasAdd + Relu takes
    nearly all of it. (An equal split gave LeNet's fused first dense layer 1,600 GFLOP/s, 17
    times one core's peak, and its BiasAdd and Relu a third of the convolutions' time each.)"""
    members = fused_chain(graph, name, event_type)
    if len(members) == 1:
        return {name: 1.0}
    roof = [max(op_flops(graph, m, batch) / CPU_BASE["flops"],
                op_bytes(graph, m, batch) / CPU_BASE["memory_bandwidth"]) for m in members]
    total = sum(roof)
    if total <= 0:
        return {m: 1.0 / len(members) for m in members}
    return {m: r / total for m, r in zip(members, roof, strict=True)}


# -- fitting --------------------------------------------------------------------------------

def _nnls(columns: np.ndarray, meas: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least squares with every coefficient >= 0 (scipy's NNLS on columns scaled to
    unit norm: the roofline terms are microseconds, the constant column ones)."""
    from scipy.optimize import nnls

    a = columns * weights[:, None]
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    coef, _ = nnls(a / norms, meas * weights)
    return coef / norms


def fit_cpu(profiles: list[tuple[Graph, int, dict]], step_overhead_s: float = 0.0) -> Device:
    """The CPU preset from profiles [(graph, batch, profile_step result)]. Per op type, three
    coefficients: measured time = a x compute roofline + b x memory roofline + c, by
    non-negative least squares over that type's ops in every profile (ops Grappler removed
    count as 0 s). A CPU does not hide memory traffic behind arithmetic the way the max() of a
    GPU roofline assumes, and a small op's fixed cost (the executor, thread hand-off) is the
    same at any batch; fitted at two batches per model, the constant and the slopes separate.
    A fourth coefficient d, on convolutions only, prices the patch matrix (im2col,
    simulate.op_patch_bytes): measured here, LeNet's 1-to-16-channel weight gradients run at
    3.6 GFLOP/s and ResNet-50's at 35, because the patch work per FLOP is 1 / (2 x output
    channels); with the FLOPs alone one coefficient per type cannot serve both.
    Each op's error is weighted by 1 / its run's wall time, so every run counts by its
    relative error: unweighted, ResNet-50's second-long steps would drown LeNet's 10 ms ones.
    step_overhead_s: the step's fixed cost outside its ops (measure_step_overhead); the ops
    share what is left of each step, and the preset adds it back to every simulated step."""
    base = Device(**CPU_BASE)
    samples: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    for graph, batch, prof in profiles:
        # The profiler times each op by its wall time (and slows it a little): the profile
        # gives the split across ops; the step's CPU time, less its fixed cost, the total.
        step = prof.get("step_s", prof["wall_s"])
        scale = max(step - step_overhead_s, 0.0) / max(sum(prof["ops"].values()), 1e-12)
        costs = _linear_costs(graph)
        for name, op in graph.ops.items():
            if op.type in FREE_TYPES or "swap" in op.attrs:
                continue
            fa, fc, ba, bc, pa, pc = costs[name]
            samples[op.type].append(((fa * batch + fc) / base.flops,
                                     (ba * batch + bc) / base.memory_bandwidth,
                                     (pa * batch + pc) / base.memory_bandwidth,
                                     scale * prof["ops"].get(name, 0.0), 1.0 / step))
    coefs = {}
    for t, rows in samples.items():
        arr = np.array(rows)
        columns = np.stack([arr[:, 0], arr[:, 1], np.ones(len(arr)), arr[:, 2]], 1)
        coefs[t] = tuple(float(x) for x in _nnls(columns, arr[:, 3], arr[:, 4]))
    runs = ", ".join(f"{g.cache.get('label', '?')} b{b}" for g, b, _ in profiles)
    return Device(**{**CPU_BASE, "launch_overhead_s": 0.0, "step_overhead_s": step_overhead_s,
                     "type_factor": tuple(sorted(coefs.items())),
                     "calibrated": "TF profiler, a x compute + b x memory roofline + c per op "
                                   f"type, fitted on {runs}; {step_overhead_s * 1e3:.3f} ms "
                                   "per step outside the ops"})


def measure_step_overhead(prof: dict) -> float:
    """The fixed cost of a step outside its ops, from the near-empty step's profile (_models'
    "null"): its CPU time less the time its ops took (best of the profiled runs), never
    below 0."""
    return max(prof.get("step_s", prof["wall_s"]) - sum(prof["ops"].values()), 0.0)


def fill_unseen(device: Device, graph: Graph) -> Device:
    """Types the calibration never saw get their class's median coefficients (heavy:
    convolutions and matrix products; light: the rest)."""
    import dataclasses

    known = dict(device.type_factor)
    width = max((len(v) for v in known.values() if not isinstance(v, (int, float))), default=2)

    def coefs(v):
        v = (v, 0.0) if isinstance(v, (int, float)) else tuple(v)
        if len(v) == width:
            return v
        if width == 2:
            return v[0], v[1 if len(v) == 2 else 2]
        return ((v[0], 0.0, v[1]) if len(v) == 2 else tuple(v[:3])) + (0.0,) * (width - 3)

    med = {}
    for h in (True, False):
        vals = [coefs(v) for t, v in known.items() if heavy(t) == h]
        vals = vals or [(1.0,) + (0.0,) * (width - 1)]
        med[h] = tuple(float(statistics.median(v[i] for v in vals)) for i in range(width))
    extra = {op.type: med[heavy(op.type)] for op in graph.ops.values()
             if op.type not in known and op.type not in FREE_TYPES}
    if not extra:
        return device
    return dataclasses.replace(device, type_factor=tuple(sorted({**known, **extra}.items())))


def predict(graph: Graph, device, batch: int) -> float:
    dev = fill_unseen(get_device(device), graph) if isinstance(device, Device) else device
    return simulate(graph, dev, batch).step_time


# -- GPU anchors ----------------------------------------------------------------------------

# (device preset, ResNet-50 224^2 batch, measured seconds per step, source)
GPU_ANCHORS = [
    ("h100-80gb-pcie", 192, 0.113,
     "measured here: PyTorch 2.11, H100 capped at 16 GiB, fp32 (TF32 convolutions), 1700 img/s"),
    ("p100-16gb", 64, 64 / 219,
     "tensorflow.org/performance/benchmarks (2017): ResNet-50, 1 P100 (DGX-1), batch 64, "
     "synthetic data, 219 img/s"),
    ("v100-16gb", 64, 64 / 368,
     "tf_cnn_benchmarks-era fp32 ResNet-50 on one V100 SXM2, about 368 img/s (approximate)"),
]
# Kernel efficiency of the convolutions (cuDNN fp32 on Pascal/Volta; TF32 tensor cores on the
# H100, where 378 TFLOP/s dense is far from what ResNet-50's small convolutions reach). Assumed,
# not fitted: one anchor per device can only fit one number.
CONV_EFFICIENCY = {"p100-16gb": 0.6, "v100-16gb": 0.6, "v100-32gb": 0.6, "h100-80gb-pcie": 0.25}


def fit_gpu(graph: Graph, preset: str, batch: int, seconds: float,
            efficiency: float | None = None) -> dict:
    """The one number fitted per GPU: the share phi of the roofline time that memory-bound
    (non-convolution, non-matmul) ops take, so the simulated step of `graph` at `batch` takes
    `seconds`. phi < 1 says the framework fuses elementwise work that lmskit's Keras 3 graph
    spells out op by op (BatchNorm alone is ~10 elementwise ops here, 1-2 cuDNN kernels in TF
    1.x and PyTorch). The convolution efficiency is CONV_EFFICIENCY's."""
    import dataclasses

    dev = dataclasses.replace(get_device(preset), type_factor=(),
                              compute_efficiency=efficiency or CONV_EFFICIENCY[preset],
                              bandwidth_efficiency=0.8)
    light = sorted({op.type for op in graph.ops.values()
                    if op.type not in FREE_TYPES and not heavy(op.type)})

    def step(phi):
        d = dataclasses.replace(dev, type_factor=tuple((t, phi) for t in light))
        return simulate(graph, d, batch).step_time

    lo, hi = 1e-3, 1.0
    if step(hi) <= seconds:
        phi = 1.0
    else:
        for _ in range(30):
            mid = (lo * hi) ** 0.5
            lo, hi = (mid, hi) if step(mid) < seconds else (lo, mid)
        phi = (lo * hi) ** 0.5
    return {"compute_efficiency": dev.compute_efficiency, "bandwidth_efficiency": 0.8,
            "type_factor": {t: round(phi, 4) for t in light},
            "calibrated": f"ResNet-50 b{batch}: {seconds * 1e3:.1f} ms/step; memory-bound "
                          f"share phi={phi:.3f}"}


def _with(preset: str, fields: dict) -> Device:
    import dataclasses

    f = dict(fields)
    f["type_factor"] = tuple(sorted(f["type_factor"].items()))
    return dataclasses.replace(get_device(preset), **f)


# -- the command ----------------------------------------------------------------------------

def _models(include_resnet50=True):
    """model label -> (builder, x shape, y shape): every model the CPU runs use."""
    import mlsys_datasets as zoo

    models = {
        "lenet": (zoo.lenet, (28, 28, 1), ()),
        "small_resnet": (zoo.small_resnet, (32, 32, 3), ()),
        "unet3d-16": (lambda: zoo.unet3d(side=16, base_filters=8, depth=2), (16, 16, 16, 4),
                      (16, 16, 16, 3)),
        "wide_resnet": (lambda: zoo.small_resnet((64, 64, 3), filters=(32, 64, 128)),
                        (64, 64, 3), ()),
        "mlp": (zoo.mlp, (28, 28, 1), ()),
        "unet3d-24": (lambda: zoo.unet3d(side=24, base_filters=8, depth=2), (24, 24, 24, 4),
                      (24, 24, 24, 3)),
    }
    if include_resnet50:
        models["resnet50"] = (zoo.resnet50, (224, 224, 3), ())
    models["null"] = (_null_model, (1,), ())
    return models


def _null_model():
    """A near-empty step (one 1-to-10 dense layer at batch 1): its CPU time is what any step
    costs outside its ops (Device.step_overhead_s)."""
    import keras

    inp = keras.Input((1,), name="x")
    return keras.Model(inp, keras.layers.Dense(10, activation="softmax", name="d")(inp))


# (run label, model, batch, role). Every calibrated model is fitted at two batches and held
# out at twice the larger one; two more rows are models the fit never saw (the MLP) or a size
# it never saw (the U-Net at 24^3). The held-out rows are the six the model is judged on.
RUNS = [
    ("lenet-b64", "lenet", 64, "calibrate"),
    ("lenet-b128", "lenet", 128, "calibrate"),
    ("lenet-b256", "lenet", 256, "validate"),
    ("small_resnet-b32", "small_resnet", 32, "calibrate"),
    ("small_resnet-b64", "small_resnet", 64, "calibrate"),
    ("small_resnet-b128", "small_resnet", 128, "validate"),
    ("unet3d-16-b1", "unet3d-16", 1, "calibrate"),
    ("unet3d-16-b2", "unet3d-16", 2, "calibrate"),
    ("unet3d-16-b4", "unet3d-16", 4, "validate"),
    ("wide_resnet-b4", "wide_resnet", 4, "calibrate"),
    ("wide_resnet-b8", "wide_resnet", 8, "calibrate"),
    ("mlp-b256", "mlp", 256, "validate (unseen model)"),
    ("unet3d-24-b2", "unet3d-24", 2, "validate (unseen size)"),
    ("resnet50-b1", "resnet50", 1, "calibrate"),
    ("resnet50-b2", "resnet50", 2, "calibrate"),
    ("resnet50-b4", "resnet50", 4, "validate"),
    ("null-b1", "null", 1, "step overhead"),
]


def _capture(builder, xs, ys):
    import keras
    import tensorflow as tf

    from .tfcapture import capture

    model = builder()
    if ys:
        loss, spec_y = keras.losses.BinaryCrossentropy(), tf.TensorSpec((None, *ys))
    else:
        loss = keras.losses.SparseCategoricalCrossentropy()
        spec_y = tf.TensorSpec((None,), tf.int32)
    return capture(model, loss, keras.optimizers.SGD(0.01, momentum=0.9),
                   (tf.TensorSpec((None, *xs)), spec_y))


def _inputs(xs, ys, batch, classes=10):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, *xs)).astype("float32")
    if ys:
        return x, (rng.random(size=(batch, *ys)) > 0.5).astype("float32")
    return x, rng.integers(0, classes, size=batch).astype("int32")


def _cpu_s() -> float:
    """This process's CPU time (user + system), all threads."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(include_resnet50: bool = True, steps: int = 1, profiles: str | None = None,
            rounds: int = 9) -> tuple[dict, dict]:
    """Capture every model and measure every run of RUNS: ({model: Graph}, {run label:
    profile with the wall times of the timing rounds and the load average around them}).
    profiles: a JSON file of measurements to reuse; runs missing from it are measured and it
    is rewritten (so a refit needs no TensorFlow run at all)."""
    import os

    models = _models(include_resnet50)
    runs = [r for r in RUNS if r[1] in models]
    cached = json.load(open(profiles)) if profiles and os.path.exists(profiles) else {}
    graphs = {}
    for label in progress.bar(models, total=len(models), desc="capturing"):
        builder, xs, ys = models[label]
        graphs[label] = _capture(builder, xs, ys)
        graphs[label].cache["label"] = label
    todo = [r for r in runs if r[0] not in cached or "walls" not in cached[r[0]]]
    if todo:
        from .tfrun import runnable

        for label, model, batch, _ in progress.bar(
                [r for r in todo if "ops" not in cached.get(r[0], {})], desc="profiling steps"):
            _, xs, ys = models[model]
            classes = 1000 if model == "resnet50" else 10
            cached[label] = profile_step(graphs[model], _inputs(xs, ys, batch, classes), steps)
        # Wall times in rounds over all runs, fastest of each: on a machine shared with other
        # work, load comes and goes; round-robin sees each run in every phase of it. (As
        # compilerkit.measure.timing.samples(..., ("wall", "process")) would, with the load
        # read after each round; lmskit may not import compilerkit, docs/DESIGN.md.)
        steps_ = {}
        for label, model, batch, _ in todo:
            _, xs, ys = models[model]
            g = graphs[model]
            classes = 1000 if model == "resnet50" else 10
            steps_[label] = (runnable(g, fetch=[g.loss]), _inputs(xs, ys, batch, classes))
            steps_[label][0](*steps_[label][1])
        walls = {label: [] for label in steps_}
        cpus = {label: [] for label in steps_}
        loads = [os.getloadavg()[0]]
        for _ in progress.bar(range(rounds), desc="timing rounds"):
            for label, (step, inputs) in steps_.items():
                wall, cpu = steady_step(step, inputs)
                walls[label].append(wall)
                cpus[label].append(cpu)
            loads.append(os.getloadavg()[0])
        for label in steps_:
            cached[label] = {**cached[label], "walls": walls[label], "cpus": cpus[label],
                             "wall_s": min(walls[label]),
                             "wall_median_s": statistics.median(walls[label]),
                             "step_s": min(cpus[label]),
                             "step_median_s": statistics.median(cpus[label]),
                             "load_average": [round(min(loads), 2), round(max(loads), 2)]}
        if profiles:
            with open(profiles, "w") as f:
                json.dump(cached, f)
    return graphs, cached


def steady_step(step, inputs, min_s: float = 0.05) -> tuple[float, float]:
    """(wall, CPU) seconds of one training step in steady state: the step as a training loop
    runs it, right after another step of the same model. The first step after other work is
    not timed: it finds TF's threads asleep and the model's weights out of the caches, and
    that cold start is a fixed cost the simulator's steady step does not have (measured here:
    a near-empty step takes 0.49 ms in a loop and 1.02 ms right after a small ResNet's step;
    the MLP's 2.6 and 3.8 ms). Then steps back to back until min_s has passed (at least one),
    the least of each (best-of-N, as everywhere)."""
    step(*inputs)
    best_wall = best_cpu = float("inf")
    start = time.perf_counter()
    while True:
        c, t = _cpu_s(), time.perf_counter()
        step(*inputs)
        best_wall = min(best_wall, time.perf_counter() - t)
        best_cpu = min(best_cpu, _cpu_s() - c)
        if time.perf_counter() - start >= min_s:
            return best_wall, best_cpu


def run(include_resnet50: bool = True, steps: int = 3, profiles: str | None = None,
        rounds: int = 9) -> dict:
    """Measure (or reuse measurements), fit, validate (module docstring); returns the JSON
    document."""
    graphs, measured = measure(include_resnet50, steps, profiles, rounds)
    runs = [r for r in RUNS if r[1] in graphs]
    overhead = measure_step_overhead(measured["null-b1"])
    cpu = fit_cpu([(graphs[m], b, measured[label]) for label, m, b, role in runs
                   if role == "calibrate"], overhead)
    rows = {}
    for label, model, b, role in runs:
        if role == "step overhead":
            continue
        p = measured[label]
        pred = predict(graphs[model], cpu, b)
        step = p.get("step_s", p["wall_s"])
        rows[label] = {"role": role, "model": model, "batch": b,
                       "measured_s": round(step, 5),
                       "measured_median_s": round(p.get("step_median_s", p["wall_median_s"]), 5),
                       "wall_s": round(p["wall_s"], 5), "predicted_s": round(pred, 5),
                       "error": round(pred / step - 1, 4),
                       "load_average": p.get("load_average")}
    # Beside the per-op model: each fitted model's own line through its two calibration
    # steps (time = slope x batch + constant), extrapolated to its held-out batch. Where that
    # line predicts and the per-op model does not, the model's ops run at an efficiency the
    # other models' ops of the same types do not share (LeNet's 1-to-16-channel convolutions).
    for model in {m for _, m, _, role in runs if role != "step overhead"}:
        fit = sorted((b, measured[lab]["step_s"]) for lab, m, b, role in runs
                     if m == model and role == "calibrate")
        if len(fit) < 2:
            continue
        (b1, t1), (b2, t2) = fit[0], fit[-1]
        slope = (t2 - t1) / (b2 - b1)
        for label, m, b, role in runs:
            if m == model and role != "calibrate":
                line = t1 + slope * (b - b1)
                rows[label]["linear_in_batch_s"] = round(line, 5)
                rows[label]["linear_in_batch_error"] = round(
                    line / rows[label]["measured_s"] - 1, 4)
    held = [r for r in rows.values() if r["role"] != "calibrate"]
    null = measured["null-b1"]
    doc = {"generated_by": "python -m lmskit.calibrate", "devices": {}, "cpu_runs": rows,
           "cpu_held_out_within_20pct": [sum(abs(r["error"]) <= 0.20 for r in held), len(held)],
           "cpu_step_overhead": {"step_s": round(null["step_s"], 6),
                                 "ops_s": round(sum(null["ops"].values()), 6),
                                 "step_overhead_s": round(overhead, 6),
                                 "load_average": null.get("load_average")}}
    doc["devices"]["cpu-here"] = {k: v for k, v in {
        **CPU_BASE, "launch_overhead_s": cpu.launch_overhead_s,
        "step_overhead_s": round(cpu.step_overhead_s, 6),
        "type_factor": {t: [round(x, 8 if i == 2 else 5) for i, x in enumerate(v)]
                        for t, v in cpu.type_factor},
        "calibrated": cpu.calibrated}.items() if k != "name"}
    r50 = graphs.get("resnet50")
    doc["gpu_anchors"] = gpu_calibration(r50)
    for name, row in doc["gpu_anchors"]["fitted"].items():
        doc["devices"][name] = row
    return doc


def gpu_calibration(resnet50: Graph | None = None) -> dict:
    """Fit the P100 and the H100 on their anchors; predict the V100 (with the P100's phi: the
    same TF software) and the H100's save_on_cpu step at batch 384 (measured 2.25 s)."""
    import mlsys_datasets as zoo

    from .planner import plan

    g = resnet50 or _capture(zoo.resnet50, (224, 224, 3), ())
    fitted, rows = {}, []
    anchors = {a[0]: a for a in GPU_ANCHORS}
    for preset in ("p100-16gb", "h100-80gb-pcie"):
        _, batch, seconds, source = anchors[preset]
        fitted[preset] = fit_gpu(g, preset, batch, seconds)
        pred = simulate(g, _with(preset, fitted[preset]), batch).step_time
        rows.append({"device": preset, "batch": batch, "measured_s": round(seconds, 4),
                     "predicted_s": round(pred, 4), "error": round(pred / seconds - 1, 4),
                     "source": source, "role": "fitted"})
    for v in ("v100-16gb", "v100-32gb"):
        fitted[v] = {**fitted["p100-16gb"], "compute_efficiency": CONV_EFFICIENCY[v],
                     "calibrated": "the P100's phi (same TF stack): "
                                   + fitted["p100-16gb"]["calibrated"]}
    _, b, s, src = anchors["v100-16gb"]
    pred = simulate(g, _with("v100-16gb", fitted["v100-16gb"]), b).step_time
    rows.append({"device": "v100-16gb", "batch": b, "measured_s": round(s, 4),
                 "predicted_s": round(pred, 4), "error": round(pred / s - 1, 4), "source": src,
                 "role": "predicted (P100's phi)"})
    h = _with("h100-80gb-pcie", fitted["h100-80gb-pcie"]).with_memory(16 * 2**30)
    soc = plan(g, "save-on-cpu", h, 384)
    sim = simulate(soc, h, 384)
    rows.append({"device": "h100@16GiB save-on-cpu", "batch": 384, "measured_s": 2.25,
                 "predicted_s": round(sim.step_time, 4),
                 "error": round(sim.step_time / 2.25 - 1, 4), "fits": sim.fits,
                 "source": "measured here: torch.autograd.graph.save_on_cpu(pin_memory=True), "
                           "171 img/s", "role": "predicted"})
    return {"fitted": fitted, "rows": rows}


def single_stream() -> None:
    """One thread: TF runs one op at a time (the simulator's single compute stream) on one
    core (the "cpu-here" preset is one core of this machine). Then a step's CPU time is its
    wall time on a quiet machine, and CPU time is what a shared machine still measures: other
    sessions' work delays the step but does not add to its CPU time. Must run before TF
    starts its runtime."""
    import tensorflow as tf

    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError:
        pass   # runtime already started (e.g. inside a notebook): measure as configured


def main(argv=None):
    from .tfrun import configure_devices

    single_stream()
    configure_devices()   # the captured steps run with their swaps on two logical CPUs
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-resnet50", action="store_true", help="skip the ResNet-50 CPU run")
    ap.add_argument("--out", default=str(CALIBRATION))
    ap.add_argument("--profiles", default=None,
                    help="JSON file of measured profiles to reuse (refit without re-measuring)")
    ap.add_argument("--gpu-only", action="store_true",
                    help="keep the stored CPU calibration; refit the GPU presets only")
    args = ap.parse_args(argv)
    if args.gpu_only:
        doc = json.loads(CALIBRATION.read_text())
        doc["gpu_anchors"] = gpu_calibration()
        for name, row in doc["gpu_anchors"]["fitted"].items():
            doc["devices"][name] = row
    else:
        doc = run(include_resnet50=not args.no_resnet50, profiles=args.profiles)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    for label, r in doc["cpu_runs"].items():
        print(f"cpu {label:20s} {r['role']:9s} measured {r['measured_s'] * 1e3:9.1f} ms  "
              f"predicted {r['predicted_s'] * 1e3:9.1f} ms  error {r['error']:+.1%}")
    for r in doc["gpu_anchors"]["rows"]:
        print(f"gpu {r['device']:30s} b{r['batch']:<4d} measured {r['measured_s'] * 1e3:8.1f} ms "
              f"predicted {r['predicted_s'] * 1e3:8.1f} ms  error {r['error']:+.1%} ({r['role']})")


if __name__ == "__main__":
    main()
