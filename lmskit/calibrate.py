"""Calibrate the simulator's time model from measured profiles, and check its predictions.

CPU (this machine): TF's profiler (tf.profiler.experimental) records real training steps of
captured Graphs run by lmskit.tfrun with one inter-op thread (one op at a time, as the
simulator's single compute stream assumes; each op still uses both cores). Every executor event
"op_name:OpType" gives that op's time. Grappler fuses some ops (Conv2D + BiasAdd + Relu ->
_FusedConv2D, named after the last op): a fused event's time is shared by the chain it
replaced; ops Grappler removed count as 0 s. The profiled times add up to more than the step's
wall time (profiling slows each op), so each profile is scaled to its wall time: the profile
gives the split across ops, the wall clock the total. Wall times are the fastest of seven runs
taken in rounds over all models (load on a shared machine comes and goes; round-robin sees
every model in every phase of it). Per op type, time = factor x roofline + seconds per op,
fitted by non-negative least squares over that type's ops in the calibration runs; types never
seen take the median of their class (heavy: convolutions and matrix products; light: the rest).
Held-out runs (other batches, an unseen size, an unseen model) check the predictions.

GPU presets: one number per device is fitted on one ResNet-50 step time (GPU_ANCHORS): phi,
the share of the roofline time that memory-bound ops take (fusion; see fit_gpu), with the
convolution efficiency assumed (CONV_EFFICIENCY). The P100 and the H100 are fitted; the V100
(with the P100's phi) and the H100's save_on_cpu step are predictions.

Regenerate lmskit/data/calibration.json (no network; about fifteen minutes on two cores):
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
from .simulate import FREE_TYPES, op_time, simulate

HEAVY = ("Conv", "MatMul", "BatchMatMul", "DepthwiseConv")
# Roofline base of the CPU preset (2 cores of AVX2 FMA; DRAM); the factors do the rest.
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


def profile_step(graph: Graph, inputs, steps: int = 5, profiled: int = 2) -> dict:
    """Run the captured step in TF: its fastest wall time of `steps` runs (the least disturbed
    by other work on the machine), and the per-op times averaged over `profiled` profiled runs
    ({op name: seconds}, fused events attributed to their chain)."""
    import tensorflow as tf

    from .tfrun import runnable

    step = runnable(graph, fetch=[graph.loss])
    step(*inputs)                               # warm-up: tracing, allocations
    walls = []
    for _ in range(steps):
        t = time.perf_counter()
        step(*inputs)
        walls.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(profiled):
            step(*inputs)
        tf.profiler.experimental.stop()
        events = _events(logdir)
    measured: dict[str, float] = defaultdict(float)
    for name, typ, sec in events:
        if name not in graph.ops:
            continue
        members = fused_chain(graph, name, typ)
        for member in members:
            measured[member] += sec / len(members) / profiled
    return {"wall_s": min(walls), "wall_median_s": statistics.median(walls),
            "ops": dict(measured), "op_sum_s": sum(s for n, _, s in events) / profiled}


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


# -- fitting --------------------------------------------------------------------------------

def _linear_fit(roof: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    """Least squares t = f * roof + c with f, c >= 0 (the two-variable NNLS by hand)."""
    if len(roof) == 1 or np.ptp(roof) == 0:
        return (float(meas.sum() / roof.sum()) if roof.sum() > 0 else 0.0), 0.0
    f, c = np.linalg.lstsq(np.stack([roof, np.ones_like(roof)], 1), meas, rcond=None)[0]
    if f < 0:
        return 0.0, float(max(meas.mean(), 0.0))
    if c < 0:
        return float((roof @ meas) / (roof @ roof)), 0.0
    return float(f), float(c)


def fit_cpu(profiles: list[tuple[Graph, int, dict]]) -> Device:
    """The CPU preset from profiles [(graph, batch, profile_step result)]: per op type, measured
    time = factor x roofline + seconds per op (least squares over that type's ops; ops Grappler
    removed count as 0 s), and the executor's overhead per op (wall - summed op times)."""
    base = Device(**CPU_BASE)
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for graph, batch, prof in profiles:
        # The profiled ops' times add up to more than the step's wall time: two inter-op
        # threads run ops side by side (and the profiler slows each a little). The profile
        # gives the split across ops; the wall time gives the total.
        scale = prof["wall_s"] / max(sum(prof["ops"].values()), 1e-12)
        for name, op in graph.ops.items():
            if op.type in FREE_TYPES or "swap" in op.attrs:
                continue
            samples[op.type].append((op_time(graph, name, batch, base),
                                     scale * prof["ops"].get(name, 0.0)))
    factors = {}
    for t, pairs in samples.items():
        arr = np.array(pairs)
        factors[t] = _linear_fit(arr[:, 0], arr[:, 1])
    return Device(**{**CPU_BASE, "launch_overhead_s": 0.0,
                     "type_factor": tuple(sorted(factors.items())),
                     "calibrated": "TF profiler, " + ", ".join(
                         f"{g.cache.get('label', '?')} b{b}" for g, b, _ in profiles)})


def fill_unseen(device: Device, graph: Graph) -> Device:
    """Types the calibration never saw get their class's median (factor, seconds per op)."""
    import dataclasses

    known = {t: device.factor(t) for t, _ in device.type_factor}
    med = {}
    for h in (True, False):
        vals = [v for t, v in known.items() if heavy(t) == h] or [(1.0, 0.0)]
        med[h] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
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
    """label -> (builder, x shape, y shape, batch, role): calibration and validation runs."""
    import mlsys_datasets as zoo

    runs = {
        "lenet": (zoo.lenet, (28, 28, 1), (), 64, "calibrate"),
        "small_resnet": (zoo.small_resnet, (32, 32, 3), (), 32, "calibrate"),
        "unet3d-16": (lambda: zoo.unet3d(side=16, base_filters=8, depth=2), (16, 16, 16, 4),
                      (16, 16, 16, 3), 2, "calibrate"),
        "wide_resnet": (lambda: zoo.small_resnet((64, 64, 3), filters=(32, 64, 128)),
                        (64, 64, 3), (), 8, "calibrate"),
        # Held out: the same models at other batches, and models never profiled.
        "lenet-b256": (zoo.lenet, (28, 28, 1), (), 256, "validate"),
        "small_resnet-b128": (zoo.small_resnet, (32, 32, 3), (), 128, "validate"),
        "unet3d-16-b4": (lambda: zoo.unet3d(side=16, base_filters=8, depth=2), (16, 16, 16, 4),
                         (16, 16, 16, 3), 4, "validate"),
        "mlp": (zoo.mlp, (28, 28, 1), (), 256, "validate (unseen model)"),
        "unet3d-24": (lambda: zoo.unet3d(side=24, base_filters=8, depth=2), (24, 24, 24, 4),
                      (24, 24, 24, 3), 2, "validate (unseen size)"),
    }
    if include_resnet50:
        runs["resnet50-b2"] = (zoo.resnet50, (224, 224, 3), (), 2, "calibrate")
        runs["resnet50-b4"] = (zoo.resnet50, (224, 224, 3), (), 4, "validate")
    return runs


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


def run(include_resnet50: bool = True, steps: int = 3, profiles: str | None = None,
        rounds: int = 7) -> dict:
    """Profile, fit, validate (module docstring); returns the JSON document. profiles: a JSON
    file of measured profiles to reuse (written when it does not exist yet)."""
    import os

    runs = _models(include_resnet50)
    cached = json.load(open(profiles)) if profiles and os.path.exists(profiles) else {}
    measured = {}
    for label, (builder, xs, ys, batch, role) in progress.bar(runs.items(), total=len(runs),
                                                              desc="profiling steps"):
        g = _capture(builder, xs, ys)
        g.cache["label"] = label
        classes = 1000 if label.startswith("resnet50") else 10
        if label not in cached:
            cached[label] = profile_step(g, _inputs(xs, ys, batch, classes), steps)
            if profiles:
                with open(profiles, "w") as f:
                    json.dump(cached, f)
        measured[label] = (g, batch, cached[label], role)
    # Wall times in rounds over all runs, fastest of each: on a machine shared with other work,
    # load comes and goes; round-robin sees each run in every phase of it.
    from .tfrun import runnable

    steps = {}
    for label, (_, xs, ys, batch, _) in runs.items():
        g = measured[label][0]
        classes = 1000 if label.startswith("resnet50") else 10
        steps[label] = (runnable(g, fetch=[g.loss]), _inputs(xs, ys, batch, classes))
        steps[label][0](*steps[label][1])
    walls = {label: [] for label in runs}
    for _ in progress.bar(range(rounds), desc="timing rounds"):
        for label, (step, inputs) in steps.items():
            t = time.perf_counter()
            step(*inputs)
            walls[label].append(time.perf_counter() - t)
    for label in runs:
        g, b, prof, role = measured[label]
        measured[label] = (g, b, {**prof, "wall_s": min(walls[label]),
                                  "wall_median_s": statistics.median(walls[label])}, role)
    cpu = fit_cpu([(g, b, p) for g, b, p, role in measured.values() if role == "calibrate"])
    rows = {}
    for label, (g, b, p, role) in measured.items():
        pred = predict(g, cpu, b)
        rows[label] = {"role": role, "batch": b, "measured_s": round(p["wall_s"], 5),
                       "measured_median_s": round(p["wall_median_s"], 5),
                       "predicted_s": round(pred, 5),
                       "error": round(pred / p["wall_s"] - 1, 4)}
    doc = {"generated_by": "python -m lmskit.calibrate", "devices": {}, "cpu_runs": rows}
    doc["devices"]["cpu-here"] = {k: v for k, v in {
        **CPU_BASE, "launch_overhead_s": cpu.launch_overhead_s,
        "type_factor": {t: [round(f, 5), round(c, 8)] for t, (f, c) in cpu.type_factor},
        "calibrated": cpu.calibrated}.items() if k != "name"}
    r50 = measured.get("resnet50-b2", (None,))[0]
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
    """One inter-op thread: TF runs one op at a time (each on both cores), as the simulator's
    single compute stream assumes. Must run before TF starts its runtime."""
    import tensorflow as tf

    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
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
