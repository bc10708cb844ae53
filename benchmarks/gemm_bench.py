"""compilerkit's matrix-multiply kernel against onnxruntime (MLAS) and numpy (BLAS), 1 thread.

    python benchmarks/gemm_bench.py [--repeat 7] [--rounds 3] [--shapes conv64,fc] [--label after]

Each shape is one ONNX MatMul C[M, N] = A[M, K] @ B[K, N] with A a constant initializer (as a
Conv's weights are: Conv lowers to im2col + the same kernel with A = W) and B an input (the
column buffer). compilerkit compiles it at -O3; onnxruntime runs it with 1 intra-op thread;
numpy calls its BLAS (threads pinned to 1 through threadpoolctl when it is installed, else
through the environment variables set below before numpy loads). The three are timed
interleaved in the same run, `rounds` times `repeat` calls each, and the best call of each
counts. GFLOP/s and the ratio use the calling thread's CPU time (all three run on it at 1
thread), which leaves out time the scheduler gave other processes; the wall-clock ratio is
stored too (`wall_ratio_vs_ort`), with the load average.

Writes benchmarks/results/gemm_bench.json: one row per shape with GFLOP/s of each and the ratio
compilerkit / onnxruntime (>= 0.9 is the goal), under the key `--label` (default "current"),
keeping the other labels' rows (e.g. "before" from an older kernel).
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import compilerkit as ck  # noqa: E402
from compilerkit.measure.timing import best_of  # noqa: E402

# name: (M, N, K). Conv GEMMs are (out channels, output pixels, in channels * kernel area).
SHAPES = {
    "resnet_conv3x3_64": (64, 3136, 576),      # ResNet-50 stage 1, 3x3 conv at 56x56
    "resnet_conv1x1_256": (256, 3136, 64),     # stage 1 1x1 expand (reads the input directly)
    "resnet_conv3x3_512": (512, 784, 1152),    # stage 2 3x3-ish: 128*9 = 1152 (M widened)
    "resnet_conv1x1_2048": (2048, 49, 512),    # stage 4 1x1 expand at 7x7
    "fc_as_conv": (1000, 1, 2048),             # classifier as a 1x1 conv on 1x1 pixels
    "fc_matmul": (1, 1000, 2048),              # classifier as Keras exports it: x @ W
    "mbv2_expand_1x1": (96, 12544, 16),        # MobileNetV2 first expand at 112x112
    "mbv2_project_1x1": (24, 3136, 144),       # MobileNetV2 projection at 56x56
    # compilerkit's Conv lowering works through the output in cache-sized panels of rows: the
    # GEMMs it calls for ResNet-50's 3x3 convs (lowering/conv.py _panel_rows).
    "panel_3x3_64": (64, 224, 576),
    "panel_3x3_128": (128, 112, 1152),
    "panel_3x3_256": (256, 70, 2304),
    "panel_3x3_512": (512, 49, 4608),
    "resnet_conv1x1_1024": (1024, 196, 256),
    "matmul_256": (256, 256, 256),
    "matmul_512": (512, 512, 512),
    "matmul_1024": (1024, 1024, 1024),
}
RESULTS = os.path.join(os.path.dirname(__file__), "results", "gemm_bench.json")


def matmul_model(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])], "gemm",
        [helper.make_tensor_value_info("B", TensorProto.FLOAT, [k, n])],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(a, "A")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, a


def best(fn, repeat):
    """(best wall seconds, best CPU seconds of this thread) over `repeat` calls. All three run
    on the calling thread at 1 thread, so the thread's CPU time leaves out the time the
    scheduler gave to other processes: on a loaded machine it is the steadier measure. The
    shared timer, both clocks around the same calls, every call timed (no warm-up call: the
    best of `rounds` x `repeat` calls leaves the first ones out anyway)."""
    return best_of(fn, repeat, ("wall", "thread"), warmup=False)


def blas_one_thread():
    try:
        from threadpoolctl import threadpool_limits
        return threadpool_limits(1)
    except ImportError:  # the environment variables above already pin it
        import contextlib
        return contextlib.nullcontext()


def run_shape(name, m, n, k, repeat, rounds):
    model, a = matmul_model(m, n, k)
    b = np.random.default_rng(1).standard_normal((k, n)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    t = time.perf_counter()
    cm = ck.compile(model.SerializeToString(), opt_level=3, asm=False)
    compile_s = time.perf_counter() - t
    kw = {"num_threads": 1} if "num_threads" in cm.run.__code__.co_varnames else {}
    got = cm.run(b, **kw)
    got = got[0] if isinstance(got, (list, tuple)) else got
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(got - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
    calls = {"compilerkit": lambda: cm.run(b, **kw),
             "onnxruntime": lambda: sess.run(None, {"B": b}),
             "numpy": lambda: a @ b}
    wall = {who: float("inf") for who in calls}
    cpu = dict(wall)
    for _ in range(rounds):  # interleaved: each round times all three
        for who, fn in calls.items():
            w, c = best(fn, repeat)
            wall[who], cpu[who] = min(wall[who], w), min(cpu[who], c)
    flop = 2.0 * m * n * k
    row = {"shape": name, "M": m, "N": n, "K": k, "max_rel_error": err, "compile_s": compile_s}
    for who in calls:
        row[f"{who}_ms"] = wall[who] * 1e3
        row[f"{who}_cpu_ms"] = cpu[who] * 1e3
        row[f"{who}_gflops"] = flop / cpu[who] / 1e9  # from CPU time (see `best`)
    row["ratio_vs_ort"] = cpu["onnxruntime"] / cpu["compilerkit"]
    row["wall_ratio_vs_ort"] = wall["onnxruntime"] / wall["compilerkit"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default="", help="comma-separated names (default: all)")
    ap.add_argument("--label", default="current")
    args = ap.parse_args()
    wanted = [s for s in args.shapes.split(",") if s] or list(SHAPES)
    rows = []
    load0 = os.getloadavg()[0]
    with blas_one_thread():
        for name in wanted:
            m, n, k = SHAPES[name]
            r = run_shape(name, m, n, k, args.repeat, args.rounds)
            rows.append(r)
            print(f"{name:22s} M={m:5d} N={n:5d} K={k:5d}  ck {r['compilerkit_gflops']:6.1f}"
                  f"  ort {r['onnxruntime_gflops']:6.1f}  numpy {r['numpy_gflops']:6.1f} GFLOP/s"
                  f"  ck/ort {r['ratio_vs_ort']:5.2f}x  err {r['max_rel_error']:.1e}", flush=True)
    ratios = [r["ratio_vs_ort"] for r in rows]
    summary = {"rows": rows, "geomean_ratio_vs_ort": float(np.exp(np.mean(np.log(ratios)))),
               "min_ratio_vs_ort": min(ratios), "loadavg_1min": [load0, os.getloadavg()[0]],
               "threads": 1, "cpu": _cpu()}
    summary["wall_geomean_ratio_vs_ort"] = float(np.exp(np.mean(np.log(
        [r["wall_ratio_vs_ort"] for r in rows]))))
    print(f"geomean ck/ort {summary['geomean_ratio_vs_ort']:.2f}x  min {min(ratios):.2f}x  "
          f"(wall clock {summary['wall_geomean_ratio_vs_ort']:.2f}x)  "
          f"load {load0:.1f}->{os.getloadavg()[0]:.1f}")
    data = {}
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            data = json.load(f)
    data[args.label] = summary
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(data, f, indent=1)


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
