"""compilerkit's Conv kernels vs onnxruntime, one fused Conv at a time, at 1 thread, same run.

    python benchmarks/conv_bench.py [--repeat 20] [--only depthwise]
    python benchmarks/conv_bench.py --section znni [--smoke]    # ZNNi sliding window
    python benchmarks/conv_bench.py --section pznet [--smoke] [--no-layers]   # PZnet 3-D U-Net

The layers are the Conv shapes of Keras MobileNetV2, ResNet-50 and EfficientNet-B0 at 224x224,
each followed by the activation the model puts after it (so onnxruntime fuses it too, and
compilerkit's fuse-conv pass does). Each case is compiled once, then compilerkit and
onnxruntime are called in turn `repeat` times; the time of a call is the calling thread's CPU
time (time.thread_time: both run on the calling thread at 1 thread, and CPU time does not count
the time other processes hold the core, which wall time does on a loaded machine), the
best of the calls is kept. Writes benchmarks/results/conv_bench.json: per case the schedule
compilerkit chose, both times and ratio = onnxruntime / compilerkit (> 1: compilerkit faster),
and the geometric mean per model.

`--section znni` (compilerkit.inference, mlsys_workbench/experiments/inference.py `bench`): a small
ZNN-like valid 3-D net (Convs 3^3, 5^3, 3^3, 1^3 with 8 channels and a 2^3 max filter, seeded
weights) compiled at output patches of side 1 to 128 under im2col and FFT, each patch timed
(thread CPU time, best of `--repeat`, default 3 here); output voxels per second over a
265^3 volume against the side (the ZNNi curve), and the planner's pick per RAM cap (16, 64,
256 MiB and the issue's 1, 2, 4 GiB) against the best measured that fits: from predictions
alone (roofline + memory model), and with its 3 best predictions measured (`plan(...,
measure=3)`; the measurements are the sweep's own rows). Writes
benchmarks/results/znni_bench.json (smoke: znni_bench_smoke.json).

`--section pznet` (mlsys_workbench/experiments/pznet.py `bench`): the real-weight 3-D U-Net of
mlsys_datasets.real_weights ("full": 64^3 x 4 modalities, base 16 filters, depth 4; `--smoke`:
"small", 32^3, base 8, depth 3) compiled at 1 thread under conv_algorithm "pznet"
(lowering/blocked3d.py), "classic" (no Winograd), "auto" (the default) and "winograd", against
onnxruntime and the same Keras model under TensorFlow (Conv3D, one intra- and inter-op thread), all
called in turn (process CPU time, best of `--repeat`, default 3 here); then each 3x3x3 Conv
of the net alone (pznet, classic, onnxruntime, TensorFlow) unless `--no-layers`. Ratios and
the issue's goals (>= 1.0x onnxruntime, >= 3.5x TensorFlow) from the same run. Writes
benchmarks/results/pznet_bench.json (smoke: pznet_bench_smoke.json).
"""

import argparse
import json
import math
import os

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

import compilerkit as ck
from compilerkit.lowering import conv as conv_lowering
from compilerkit.lowering import conv_taps
from compilerkit.measure.timing import best_of

# (model, name, x shape, w shape, Conv attributes, activation)
P1, S2 = [1, 1, 1, 1], [2, 2]
CASES = [
    ("mobilenet_v2", "stem 3x3/2", (1, 3, 224, 224), (32, 3, 3, 3),
     dict(strides=S2, pads=[0, 0, 1, 1]), "Clip"),
    ("mobilenet_v2", "dw 32@112", (1, 32, 112, 112), (32, 1, 3, 3),
     dict(group=32, pads=P1), "Clip"),
    ("mobilenet_v2", "dw 96@112/2", (1, 96, 112, 112), (96, 1, 3, 3),
     dict(group=96, strides=S2, pads=[0, 0, 1, 1]), "Clip"),
    ("mobilenet_v2", "dw 144@56", (1, 144, 56, 56), (144, 1, 3, 3),
     dict(group=144, pads=P1), "Clip"),
    ("mobilenet_v2", "dw 384@14", (1, 384, 14, 14), (384, 1, 3, 3),
     dict(group=384, pads=P1), "Clip"),
    ("mobilenet_v2", "dw 960@7", (1, 960, 7, 7), (960, 1, 3, 3),
     dict(group=960, pads=P1), "Clip"),
    ("mobilenet_v2", "expand 16->96@112", (1, 16, 112, 112), (96, 16, 1, 1),
     {}, "Clip"),
    ("mobilenet_v2", "expand 96->576@14", (1, 96, 14, 14), (576, 96, 1, 1),
     {}, "Clip"),
    ("mobilenet_v2", "project 576->96@14", (1, 576, 14, 14), (96, 576, 1, 1),
     {}, None),
    ("mobilenet_v2", "head 320->1280@7", (1, 320, 7, 7), (1280, 320, 1, 1),
     {}, "Clip"),
    ("resnet50", "stem 7x7/2", (1, 3, 224, 224), (64, 3, 7, 7),
     dict(strides=S2, pads=[3, 3, 3, 3]), "Relu"),
    ("resnet50", "3x3 64@56", (1, 64, 56, 56), (64, 64, 3, 3),
     dict(pads=P1), "Relu"),
    ("resnet50", "3x3 128@28", (1, 128, 28, 28), (128, 128, 3, 3),
     dict(pads=P1), "Relu"),
    ("resnet50", "3x3 256@14", (1, 256, 14, 14), (256, 256, 3, 3),
     dict(pads=P1), "Relu"),
    ("resnet50", "3x3 512@7", (1, 512, 7, 7), (512, 512, 3, 3),
     dict(pads=P1), "Relu"),
    ("resnet50", "1x1 64->256@56", (1, 64, 56, 56), (256, 64, 1, 1),
     {}, None),
    ("resnet50", "1x1 256->512@56/2", (1, 256, 56, 56), (512, 256, 1, 1),
     dict(strides=S2), None),
    ("resnet50", "1x1 1024->256@14", (1, 1024, 14, 14), (256, 1024, 1, 1),
     {}, "Relu"),
    ("resnet50", "1x1 512->2048@7", (1, 512, 7, 7), (2048, 512, 1, 1),
     {}, None),
    ("efficientnet_b0", "dw5x5 240@28/2", (1, 240, 56, 56), (240, 1, 5, 5),
     dict(group=240, strides=S2, pads=[1, 1, 2, 2]), "Swish"),
    ("efficientnet_b0", "dw5x5 672@14", (1, 672, 14, 14), (672, 1, 5, 5),
     dict(group=672, pads=[2, 2, 2, 2]), "Swish"),
    ("efficientnet_b0", "expand 112->672@14", (1, 112, 14, 14), (672, 112, 1, 1),
     {}, "Swish"),
]


def model(x_shape, w_shape, attrs, act):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)]
    out = "y"
    if act == "Clip":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
        out = "z"
    elif act == "Swish":
        nodes += [helper.make_node("Sigmoid", ["y"], ["s"]),
                  helper.make_node("Mul", ["y", "s"], ["z"])]
        out = "z"
    elif act is not None:
        nodes.append(helper.make_node(act, ["y"], ["z"]))
        out = "z"
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", 1, list(x_shape))],
                          [helper.make_tensor_value_info(out, 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def schedule_of(x_shape, w_shape, attrs):
    """Which schedule lowering/conv.py picks (mirrors lower_conv's dispatch)."""
    group = attrs.get("group", 1)
    taps = w_shape[1] * math.prod(w_shape[2:])
    if group > 1 and taps <= conv_lowering.MAX_TAPS and (
            w_shape[1] <= conv_lowering.DIRECT_CHANNELS):
        return "direct"
    stride1 = attrs.get("strides", [1, 1]) == [1, 1]
    out_sp = [x + sum(attrs.get("pads", [0] * 4)[d::2]) - k + 1
              for d, (x, k) in enumerate(zip(x_shape[2:], w_shape[2:], strict=True))]
    if stride1 and group == 1 and math.prod(w_shape[2:]) > 1 and conv_taps.waste(
            w_shape[2:], [1] * len(out_sp), out_sp) <= conv_taps.MAX_WASTE:
        return "taps (X^T read in place)"
    if math.prod(w_shape[2:]) == 1 and stride1:
        return "GEMM on x"
    return "im2col + GEMM"


def best_cpu(fns, repeat):
    return best_of(fns, repeat, "thread")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="", help="substring of the case names to run")
    ap.add_argument("--section", choices=("layers", "znni", "pznet"), default="layers")
    ap.add_argument("--smoke", action="store_true",
                    help="znni: a few small patches; pznet: the 32^3 U-Net")
    ap.add_argument("--no-layers", action="store_true", help="pznet: the whole net only")
    args = ap.parse_args()
    if args.section == "znni":
        return znni(args)
    if args.section == "pznet":
        return pznet(args)
    rows = []
    for model_name, name, x_shape, w_shape, attrs, act in CASES:
        if args.only and args.only not in name:
            continue
        m = model(x_shape, w_shape, attrs, act)
        x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        cm = ck.compile(m, asm=False, num_threads=1)
        ref = sess.run(None, {"x": x})[0]
        err = float(np.abs(cm.run(x)[0] - ref).max() / max(1.0, np.abs(ref).max()))
        t = best_cpu({"ck": lambda cm=cm, x=x: cm.run(x),
                      "ort": lambda s=sess, x=x: s.run(None, {"x": x})}, args.repeat)
        row = {"model": model_name, "case": name, "x": list(x_shape), "w": list(w_shape),
               "attrs": attrs, "activation": act, "schedule": schedule_of(x_shape, w_shape, attrs),
               "compilerkit_ms": t["ck"] * 1e3, "onnxruntime_ms": t["ort"] * 1e3,
               "ratio": t["ort"] / t["ck"], "max_rel_error": err}
        rows.append(row)
        print(f"{model_name:16s} {name:22s} {row['schedule']:15s}"
              f" ck {row['compilerkit_ms']:7.3f} ms  ort {row['onnxruntime_ms']:7.3f} ms"
              f"  {row['ratio']:5.2f}x  err {err:.1e}",
              flush=True)
    geo = {}
    for m_name in sorted({r["model"] for r in rows}):
        rs = [r["ratio"] for r in rows if r["model"] == m_name]
        geo[m_name] = math.exp(sum(math.log(v) for v in rs) / len(rs))
        print(f"geomean ratio {m_name}: {geo[m_name]:.3f}x over {len(rs)} layers")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "conv_bench.json"), "w") as f:
        json.dump({"threads": 1, "timer": "thread CPU time, best of repeat",
                   "load": os.getloadavg(), "rows": rows, "geomean_ratio": geo}, f, indent=1)


def znni(args):
    """ZNNi sliding-window throughput against patch size, and the planner vs best measured."""
    from mlsys_workbench.experiments import inference as zf

    repeat = args.repeat if args.repeat != 20 else 3  # 20 is the layers section's default
    res = zf.bench(sides=zf.SMOKE_SIDES if args.smoke else None,
                   volume_shape=(40, 40, 40) if args.smoke else zf.BENCH_VOLUME, repeat=repeat)
    for r in res["rows"]:
        print(f"{r['algorithm']:7s} side {r['side']:4d}  {r['bytes'] / 2 ** 20:8.1f} MiB  "
              f"{r['seconds'] * 1e3:9.2f} ms/patch (predicted {r['predicted_seconds'] * 1e3:9.2f})"
              f"  {r['voxels_per_s'] / 1e6:6.3f} Mvox/s (predicted "
              f"{r['predicted_voxels_per_s'] / 1e6:6.3f})", flush=True)
    for p in res["picks"]:
        if p.get("pick"):
            print(f"cap {p['cap_bytes'] / 2 ** 20:6.0f} MiB: best {p['best']}\n"
                  f"    predicted pick {p['pick']}: /best {p['pick_over_best']:.3f}"
                  f" /smallest {p.get('pick_over_smallest', float('nan')):.1f}\n"
                  f"    top-{res['measure_top']} measured pick {p['pick_measured']}: /best "
                  f"{p['pick_measured_over_best']:.3f}"
                  f" /smallest {p.get('pick_measured_over_smallest', float('nan')):.1f}")
    print("loadavg before/after:", res["loadavg_before"], res["loadavg_after"], "goals: within "
          "10% (predicted)", res["goal_within_10pct_predicted"], "(top measured)",
          res["goal_within_10pct_measured_top"], "2x smallest", res["goal_2x_smallest"])
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    name = "znni_bench_smoke.json" if args.smoke else "znni_bench.json"
    with open(os.path.join(out, name), "w") as f:
        json.dump(res, f, indent=1)


def pznet(args):
    """The 3-D U-Net at one thread: compilerkit (pznet, classic, auto, winograd) against
    onnxruntime and TensorFlow's Conv3D, whole net and per layer."""
    from mlsys_workbench.experiments import pznet as pf

    pf.tf_one_thread()  # before anything runs TensorFlow
    repeat = args.repeat if args.repeat != 20 else 3  # 20 is the layers section's default
    res = pf.bench("small" if args.smoke else "full", repeat=repeat,
                   layers=not args.no_layers)
    net = res["net"]
    for k, v in net["seconds"].items():
        print(f"{k:12s} {v:8.3f} s  onnxruntime/this {net['seconds']['onnxruntime'] / v:5.2f}x"
              f"  tensorflow/this {net['seconds']['tensorflow'] / v:5.2f}x"
              f"  err {net['max_rel_error'].get(k, 0):.1e}", flush=True)
    for r in res.get("layers", []):
        print(f"{r['layer']:12s} {r['c_in']:4d}->{r['c_out']:4d}@{r['side']:3d} " + " ".join(
            f"{k} {r['gflops'][k]:6.1f}" for k in r["gflops"]) + " GFLOP/s")
    print("loadavg before/after:", net["loadavg_before"], net["loadavg_after"], "goals:",
          res["goals"])
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    name = "pznet_bench_smoke.json" if args.smoke else "pznet_bench.json"
    with open(os.path.join(out, name), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
