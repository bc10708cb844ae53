"""Latency per model on one machine: compilerkit's GPU backend (inputs copied in, every kernel
launched, outputs copied back, synchronised; `gpu_ms` replays the launches from a CUDA graph,
`gpu_no_graph_ms` launches kernel by kernel) against compilerkit's host backend and
onnxruntime's CPU provider (one thread, and all threads), batch 1, -O3; each GPU output is also
compared with the host's (rtol 1e-4, atol 1e-5).

    python benchmarks/gpu_bench.py [OUT.json] [--repeat 5] [--budget-s 400] [--models a,b]
                                   [--real-weights]

Models: every mlsys_datasets ONNX model and the "light" models inside the onnx package; with
`--real-weights` (default OUT: results/gpu_real_weights.json) instead the real-weight light
models (mlsys_datasets.real_weight_model, built on first use; the Keras ones need TensorFlow).
Every row also compares the GPU's outputs with onnxruntime's (`rel_l2_vs_ort`,
||gpu - ort|| / ||ort|| over all outputs). A model's median of `repeat` runs after one warm-up
run is reported; models left when `budget-s` is spent are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import mlsys_datasets
import numpy as np
import onnxruntime as ort

import compilerkit as ck
from compilerkit.backends import cuda_driver
from compilerkit.measure import timing
from compilerkit.measure.conformance import light_model_path, light_models, random_inputs


def models(real_weights=False):
    if real_weights:  # paths are built lazily: a model is built only when its turn comes
        return [(n, lambda n=n: str(mlsys_datasets.real_weight_model(n, progress=False)))
                for n in mlsys_datasets.REAL_WEIGHT_MODELS if n.startswith("light_")]
    out = [(n, str(mlsys_datasets.onnx_path(n))) for n in mlsys_datasets.ONNX_MODELS]
    return out + [(name, light_model_path(name)) for name in light_models()]


def median_ms(fn, repeat):
    """Median wall milliseconds of `repeat` calls after one untimed call (first-run costs:
    module load, device buffers, constant upload)."""
    return round(statistics.median(timing.samples(fn, repeat, "wall")) * 1e3, 4)


def bench(name, path, repeat):
    path = path() if callable(path) else path
    feeds = random_inputs(path)
    arrays = [a for _, a in feeds]
    shapes = {n: list(a.shape) for n, a in feeds}
    row = {"model": name}
    t = time.perf_counter()
    host = ck.compile(path, target="host", asm=False, input_shapes=shapes)
    row["host_compile_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    gpu = ck.compile(path, target="gpu", asm=False, input_shapes=shapes)
    row["gpu_compile_s"] = round(time.perf_counter() - t, 2)
    row["kernels"] = len(gpu.session.launches)
    row["launches_per_run"] = len(gpu.session.steps)
    ref, out = host.run(*arrays), gpu.run(*arrays)
    diff = max(float(np.max(np.abs(o.astype(np.float64) - r))) if o.size else 0.0
               for o, r in zip(out, ref, strict=True))
    row["max_abs_diff_vs_host"] = diff
    row["matches_host"] = all(np.allclose(o, r, rtol=1e-4, atol=1e-5)
                              for o, r in zip(out, ref, strict=True))
    row["gpu_ms"] = median_ms(lambda: gpu.run(*arrays), repeat)
    # Launches replayed from a CUDA graph (else kernel by kernel, and why).
    row["cuda_graph"] = gpu.session.graph is not None
    if gpu.session.graph_error:
        row["cuda_graph_error"] = gpu.session.graph_error
    gpu.session.use_graph = False
    row["gpu_no_graph_ms"] = median_ms(lambda: gpu.run(*arrays), repeat)
    row["host_ms"] = median_ms(lambda: host.run(*arrays), repeat)
    for threads, key in ((1, "ort_cpu_1t_ms"), (0, "ort_cpu_ms")):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        row[key] = median_ms(lambda sess=sess: sess.run(None, dict(feeds)), repeat)
    ort_out = sess.run(None, dict(feeds))
    num = sum(float(np.sum((o.astype(np.float64) - r) ** 2)) for o, r in zip(out, ort_out,
                                                                          strict=True))
    den = sum(float(np.sum(r.astype(np.float64) ** 2)) for r in ort_out)
    row["rel_l2_vs_ort"] = (num / den) ** 0.5 if den else num ** 0.5
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=400)
    ap.add_argument("--models", default="")
    ap.add_argument("--real-weights", action="store_true")
    args = ap.parse_args()
    args.out = args.out or os.path.join(os.path.dirname(__file__), "results", (
        "gpu_real_weights.json" if args.real_weights else "gpu_bench.json"))
    try:
        info = cuda_driver.context().info
    except cuda_driver.NoCudaDevice as error:
        # `make bench` runs every benchmark; on a laptop this one has nothing to measure.
        print(f"gpu_bench: skipped, {error}")
        return
    result = {"device": info.name, "sm": info.sm, "cpu_count": os.cpu_count(),
              "python": platform.python_version(), "onnxruntime": ort.__version__,
              "timing": f"median of {args.repeat} runs after 1 warm-up; gpu_ms includes "
                        "host<->device copies and synchronisation", "rows": [], "skipped": []}
    if args.real_weights:
        result["models"] = ("mlsys_datasets.real_weight_model(name, 'small'): light "
                            "architectures, seeded weights, 224x224 input")
    start = time.perf_counter()
    wanted = set(filter(None, args.models.split(",")))
    for name, path in models(args.real_weights):
        if wanted and name not in wanted:
            continue
        if time.perf_counter() - start > args.budget_s:
            result["skipped"].append(name)
            continue
        try:
            row = bench(name, path, args.repeat)
        except Exception as error:  # one model's failure is a result, not the end
            row = {"model": name, "error": f"{type(error).__name__}: {error}"[:500]}
        print(json.dumps(row), flush=True)
        result["rows"].append(row)
        with open(args.out, "w") as f:  # after every model: a killed run keeps what it did
            json.dump(result, f, indent=1)
    with open(args.out, "w") as f:  # and the models the budget left out
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
