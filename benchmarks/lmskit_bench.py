"""lmskit benchmark: the TFLMS papers' headline figures, simulated, and lmskit's own speed.

Writes benchmarks/results/lmskit_bench.json:
- resnet50: ResNet-50 224x224 fp32 on "p100-16gb": the largest batch per policy (none, swap-all,
  tflms, tflms-v2, lmskit), the ratio against no swapping (TFLMS reports 4.7x, v2 4.9x), and the
  simulated overhead of every policy at a few batch sizes.
- unet3d: the 3D U-Net (mlsys_datasets.unet3d with the 3DUnetCNN shape the papers used:
  base_filters=32, depth=3, 4 modalities, 3 masks) at 192^3: fits without swapping or not, the
  largest batch per policy, each policy's overhead at batch 1; and the largest cube side each
  policy fits at batch 1 (one capture per side, steps of 32).
- speed: capture time, and lifetimes + TFLMS rewrite + one simulation on the ResNet-50 graph
  (target under 2 s), and how long each max-batch search took (no re-tracing).
- swap_vs_recompute (both models): swap-only (lmskit), recompute-only and swap+recompute: the
  largest batch within 30% overhead and the throughput there (issue 13).
- calibration: the stored time-model calibration (lmskit/data/calibration.json): predicted
  against measured step times (CPU here; GPU anchors). Regenerate with
  `python -m lmskit.calibrate` (about ten minutes).
- resnet50.v1_link: TFLMS v1's largest batch on the P100, on IBM's V100 16 GB and with an
  instant link (memory alone decides: the ceiling the rule and the capture allow). IBM's 2.88x
  is 3900^2 / 2300^2 pixels at batch 1 on a V100 (examples/Keras_ResNet50.py), not a batch.
- cpu_scaling: real Keras training steps of LeNet and the small ResNet at batches 32-256 here:
  wall time (fastest of 7) and process CPU time (median) per image, cores used (CPU / wall) and
  the load average. Wall per image that grows with the batch while CPU per image stays flat
  means the machine was shared (long steps get preempted), not that the work is superlinear:
  calibrate the CPU preset on a quiet machine.

Usage: python benchmarks/lmskit_bench.py [--quick]   (--quick: U-Net sides in steps of 64)
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import mlsys_datasets as zoo
import tensorflow as tf

import lmskit

DEVICE = "p100-16gb"
OUT = Path(__file__).parent / "results" / "lmskit_bench.json"


def capture(model, x_shape, y_shape, y_dtype, loss):
    import keras

    t = time.perf_counter()
    g = lmskit.capture(model, loss, keras.optimizers.SGD(0.01, momentum=0.9),
                       (tf.TensorSpec((None, *x_shape)), tf.TensorSpec((None, *y_shape), y_dtype)))
    return g, time.perf_counter() - t


def sim_row(graph, policy, batch):
    try:
        r = lmskit.plan(graph, policy, DEVICE, batch)
    except lmskit.InfeasibleError as e:
        return {"policy": policy, "batch": batch, "fits": False, "error": str(e)}
    s = lmskit.simulate(r, DEVICE, batch)
    return {"policy": policy, "batch": batch, "fits": s.fits, "oom_op": s.oom_op,
            "peak_device_gib": round(s.peak_device_bytes / 2**30, 3),
            "peak_host_gib": round(s.peak_host_bytes / 2**30, 3),
            "step_time_s": round(s.step_time, 4), "overhead": round(s.overhead, 4),
            "stall_s": round(s.stall_time, 4),
            "swapped_gib": round(s.swapped_bytes / 2**30, 3)}


COMPARE = ("none", "lmskit", "recompute", "swap+recompute")


def swap_vs_recompute(graph):
    """Largest batch within 30% overhead and throughput there, per policy of COMPARE."""
    from lmskit import views

    out = {}
    for r in views.max_batches(graph, DEVICE, COMPARE, max_overhead=0.3):
        out[r["policy"]] = {"max_batch_30pct": r["max batch"],
                            "overhead": round(r.get("overhead", 0.0), 4),
                            "items_per_s": round(r.get("images_per_s") or 0.0, 2),
                            "search_s": round(r["search_s"], 1)}
        print(f"  {r['policy']:15s} within 30%: batch {r['max batch']}", flush=True)
    return out


def max_batches(graph):
    out = {}
    for policy in lmskit.POLICIES:
        t = time.perf_counter()
        try:
            b = lmskit.max_batch_size(graph, DEVICE, policy)
            row = sim_row(graph, policy, b) if b else {"policy": policy, "batch": 0}
        except lmskit.InfeasibleError as e:
            b, row = 0, {"policy": policy, "batch": 0, "error": str(e)}
        row["search_s"] = round(time.perf_counter() - t, 2)
        out[policy] = row
        print(f"  {policy:9s} max batch {b:5d}  ({row['search_s']} s)", flush=True)
    return out


def resnet50():
    import keras

    print("ResNet-50 224^2 fp32 on", DEVICE, flush=True)
    g, t_capture = capture(zoo.resnet50(), (224, 224, 3), (), tf.int32,
                           keras.losses.SparseCategoricalCrossentropy())
    print(f"  captured {len(g)} ops in {t_capture:.1f} s", flush=True)
    # The pipeline timing: a fresh copy so no cached schedule or cost table helps.
    fresh = g.copy()
    fresh.cache = {}
    t = time.perf_counter()
    lt = lmskit.lifetimes(fresh, 64)
    t_life = time.perf_counter() - t
    r = lmskit.swap(fresh)
    t_swap = time.perf_counter() - t - t_life
    s = lmskit.simulate(r, DEVICE, 64)
    t_total = time.perf_counter() - t
    speed = {"ops": len(g), "capture_s": round(t_capture, 2), "lifetimes_s": round(t_life, 3),
             "rewrite_s": round(t_swap, 3), "simulate_s": round(t_total - t_life - t_swap, 3),
             "lifetimes_rewrite_simulate_s": round(t_total, 3), "target_s": 2.0,
             "swap_ins": sum(op.attrs.get("swap") == "in" for op in r.ops.values()),
             "peak_batch64_gib": round(lt.peak / 2**30, 3),
             "peak_batch64_by_kind_gib": {k: round(v / 2**30, 3)
                                          for k, v in lt.by_kind(g).items()},
             "simulated_peak_tflms_batch64_gib": round(s.peak_device_bytes / 2**30, 3)}
    print(f"  lifetimes + rewrite + simulate: {t_total:.2f} s", flush=True)
    best = max_batches(g)
    base = best["none"]["batch"]
    ratios = {p: round(best[p]["batch"] / base, 2) for p in best}
    points = sorted({base, 2 * base, best["tflms"]["batch"], 4 * base})
    overheads = {str(b): [sim_row(g, p, b) for p in lmskit.POLICIES] for b in points}
    return {"device": DEVICE, "max_batch": best, "ratio_vs_none": ratios,
            "swap_vs_recompute": swap_vs_recompute(g),
            "paper": {"tflms_v1_ratio": 4.7, "tflms_v2_ratio": 4.9,
                      "pytorch_save_on_cpu_measured": {"vanilla": 192, "save_on_cpu": 384}},
            "overhead_at_batch": overheads, "v1_link": v1_link(g)}, speed


def v1_link(graph):
    """v1 (defaults) on the P100, on the V100 16 GB, and on the P100 with an instant link."""
    import dataclasses

    from lmskit.devices import get_device

    p100 = get_device(DEVICE)
    instant = dataclasses.replace(p100, name=f"{DEVICE} instant link", h2d_bandwidth=1e18,
                                  d2h_bandwidth=1e18, copy_latency_s=0.0)
    v1 = lmskit.swap(graph)
    rows = {}
    for dev in (p100, get_device("v100-16gb"), instant):
        base = lmskit.max_batch_size(graph, dev, "none")
        b = lmskit.max_batch_size(v1, dev, "none", start=base)
        rows[dev.name] = {"none": base, "tflms": b, "ratio": round(b / base, 2)}
    rows["ibm_keras_resnet50_example"] = {"pixels": [2300**2, 3900**2], "batch": 1,
                                          "ratio": 2.88, "device": "V100 16 GB, TF 1.12"}
    return rows


def cpu_scaling(batches=(32, 64, 128, 256), rounds=7):
    """Wall and CPU time per image of real training steps (module docstring)."""
    import os
    import resource
    import statistics

    import keras

    def cpu_s():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    out = {}
    for name, build, shape in (("lenet", zoo.lenet, (28, 28, 1)),
                               ("small_resnet", zoo.small_resnet, (32, 32, 3))):
        model, opt = build(), keras.optimizers.SGD(0.01)
        loss = keras.losses.SparseCategoricalCrossentropy()

        @tf.function
        def step(x, y, model=model, opt=opt, loss=loss):
            with tf.GradientTape() as tape:
                value = loss(y, model(x, training=True))
            grads = tape.gradient(value, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return value

        rows = []
        for b in batches:
            x, y = tf.random.normal((b, *shape), seed=0), tf.zeros((b,), tf.int32)
            step(x, y).numpy()                       # trace and warm up
            walls, cpus = [], []
            for _ in range(rounds):
                c, t = cpu_s(), time.perf_counter()
                step(x, y).numpy()
                walls.append(time.perf_counter() - t)
                cpus.append(cpu_s() - c)
            wall, cpu = min(walls), statistics.median(cpus)
            rows.append({"batch": b, "wall_us_per_image": round(wall / b * 1e6, 1),
                         "cpu_us_per_image": round(cpu / b * 1e6, 1),
                         "cores_used": round(cpu / wall, 2),
                         "load_average": round(os.getloadavg()[0], 2)})
        out[name] = rows
    return out


# The shape of the Keras 3D U-Net (3DUnetCNN) the TFLMS experiments started from
# (mlsys_datasets.unet3d docstring): base_filters=32, depth=3, 4 modalities, 3 masks.
UNET = dict(base_filters=32, depth=3)


def unet3d(side_step, side_cap):
    import keras

    print("3D U-Net", UNET, "on", DEVICE, flush=True)
    loss = keras.losses.BinaryCrossentropy()

    def capture_side(side):
        return capture(zoo.unet3d(side=side, **UNET), (side, side, side, 4),
                       (side, side, side, 3), tf.float32, loss)

    g, t_capture = capture_side(192)
    print(f"  192^3 captured {len(g)} ops in {t_capture:.1f} s", flush=True)
    at192 = {"capture_s": round(t_capture, 2),
             "batch1": {p: sim_row(g, p, 1) for p in lmskit.POLICIES},
             "max_batch": max_batches(g), "swap_vs_recompute": swap_vs_recompute(g)}
    # Largest cube side at batch 1: one capture per side (the side is not the batch).
    side_rows, side = [], 96
    while side <= side_cap:
        gs, t = capture_side(side)
        row = {"side": side, "capture_s": round(t, 2)}
        for p in lmskit.POLICIES:
            row[p] = sim_row(gs, p, 1)
        side_rows.append(row)
        print(f"  side {side}: " + " ".join(f"{p}={row[p]['fits']}" for p in lmskit.POLICIES),
              flush=True)
        if not any(row[p]["fits"] for p in lmskit.POLICIES):
            break
        side += side_step
    largest = {p: max([r["side"] for r in side_rows if r[p]["fits"]], default=0)
               for p in lmskit.POLICIES}
    return {"model": {"side": 192, **UNET, "in_channels": 4, "classes": 3},
            "side_192": at192, "sides": side_rows, "largest_side_batch1": largest,
            "paper": {"192_trainable_only_with_swapping": True, "v1_batch_ratio": 2.0,
                      "v2_resolution_ratio": 5.6}}


def calibration():
    from lmskit.devices import CALIBRATION

    if not CALIBRATION.exists():
        return {"missing": "run python -m lmskit.calibrate"}
    doc = json.loads(CALIBRATION.read_text())
    return {"cpu": doc.get("cpu_runs"), "gpu": doc.get("gpu_anchors", {}).get("rows")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="coarser U-Net side search")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res, speed = resnet50()
    unet = unet3d(side_step=64 if args.quick else 32, side_cap=448)
    result = {"benchmark": "lmskit", "machine": platform.machine(),
              "tensorflow": tf.__version__, "device_preset": DEVICE,
              "resnet50": res, "unet3d": unet, "speed": speed,
              "calibration": calibration(), "cpu_scaling": cpu_scaling(),
              "wall_s": round(time.perf_counter() - t0, 1)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT} ({result['wall_s']} s)")


if __name__ == "__main__":
    main()
