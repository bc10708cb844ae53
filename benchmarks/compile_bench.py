"""compilerkit vs onnxruntime: compile time and single-thread batch-1 latency, same run.

    python benchmarks/compile_bench.py [--models squeezenet,resnet50] [-O 3] [--repeat 5]
    python benchmarks/compile_bench.py --emulated [--models lenet,mlp]   # s390x/ppc64 rows

Writes benchmarks/results/compile_bench.json and prints a table of ratios (ORT latency /
compilerkit latency: > 1 means compilerkit is faster) with the geometric mean over the light
models. Datasets models (mlsys_datasets) are included when that package is importable.

`--emulated` instead times the emulated big-endian targets (s390x, ppc64: Unicorn) against the
host on a few small models and writes them under the key "emulated_rows" (one row per model
and target, with "target"); each mode keeps the other's keys in the JSON file.
"""

import argparse
import json
import math
import os
import time
from functools import partial

import numpy as np

import compilerkit as ck
from compilerkit import conformance as cf


def models():
    """name -> (kind, path): onnx's light models, then the committed mlsys_datasets models."""
    out = {name: ("light", cf.light_model_path(name)) for name in cf.light_models()}
    try:
        import mlsys_datasets
        for name in mlsys_datasets.ONNX_MODELS:
            out[name] = ("datasets", str(mlsys_datasets.onnx_path(name)))
    except Exception:  # noqa: BLE001 - the datasets package may not be built yet
        pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("-O", dest="opt", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--emulated", action="store_true",
                    help="time the emulated s390x/ppc64 targets against the host instead")
    args = ap.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    if args.emulated:
        return emulated(wanted or set(EMULATED_MODELS), args.opt, min(args.repeat, 3))
    rows = []
    for name, (kind, path) in models().items():
        if wanted and name not in wanted:
            continue
        row = cf.time_model(path, opt_level=args.opt, repeat=args.repeat, name=name)
        row["kind"] = kind
        row["matches_ort"] = row.pop("matches")
        rows.append(row)
        print(f"{name:14s} compile {row['compile_s']:6.2f}s  ck {row['compilerkit_ms']:8.2f} ms"
              f"  ort {row['ort_ms']:8.2f} ms  ratio {row['speed_ratio']:5.2f}x"
              f"  ok={row['matches_ort']}", flush=True)
    light = [r["speed_ratio"] for r in rows if r["kind"] == "light"]
    geo = math.exp(sum(math.log(x) for x in light) / len(light)) if light else None
    print(f"\ngeomean speed vs onnxruntime over {len(light)} light models: "
          f"{geo:.3f}x" if geo else "")
    write_results({"rows": rows, "geomean_light_speed_ratio": geo})


def write_results(update):
    """Merge `update` into benchmarks/results/compile_bench.json, keeping the other keys (the
    host table and the emulated rows are written by different runs)."""
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "compile_bench.json")
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data.update(update)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


# Small models only: emulation runs ~20-40 M instructions/s (s390x vector code slower still).
EMULATED_MODELS = ("mlp", "gemm_mlp", "matmul_16x16", "conv_bn_pool", "lenet", "small_resnet")
EMULATED_TARGETS = ("s390x", "ppc64")


def emulated(wanted, opt, repeat):
    """Emulated time per inference relative to the host, same model, same -O level."""
    rows = []
    for name, (kind, path) in models().items():
        if name not in wanted:
            continue
        feeds = cf.random_inputs(path)
        shapes = {n: list(a.shape) for n, a in feeds}
        arrays = [a for _, a in feeds]
        host = ck.compile(path, opt_level=opt, input_shapes=shapes, asm=False)
        ref = host.run(*arrays)
        host_s = cf.best_seconds(partial(host.run, *arrays), 5)
        for target in EMULATED_TARGETS:
            t = time.perf_counter()
            cm = ck.compile(path, target=target, opt_level=opt, input_shapes=shapes, asm=False)
            compile_s = time.perf_counter() - t
            out = cm.run(*arrays)
            diff = max(float(np.max(np.abs(o.astype(np.float64) - r))) if o.size else 0.0
                       for o, r in zip(out, ref, strict=True))
            emu_s = cf.best_seconds(partial(cm.run, *arrays), repeat)
            rows.append(dict(model=name, kind=kind, target=target, opt_level=opt,
                             compile_s=compile_s, host_ms=host_s * 1e3, emulated_ms=emu_s * 1e3,
                             slowdown=emu_s / host_s, max_abs_diff_vs_host=diff,
                             bit_identical=all(o.tobytes() == r.tobytes()
                                               for o, r in zip(out, ref, strict=True))))
            print(f"{name:14s} {target:6s} host {host_s*1e3:8.3f} ms  emulated "
                  f"{emu_s*1e3:9.2f} ms  x{emu_s/host_s:8.0f}  max|diff| {diff:.1e}", flush=True)
            del cm
    write_results({"emulated_rows": rows})


if __name__ == "__main__":
    main()
