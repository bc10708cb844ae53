"""Winograd convolution (lowering/winograd.py) against today's Conv lowering and onnxruntime,
one 3x3 Conv + ReLU at a time, 1 thread, interleaved in the same run.

    python benchmarks/winograd_bench.py [--repeat 15] [--only 64@56] [--algos auto,winograd]

Per layer every algorithm is compiled once (`compile(model, conv_algorithm=...)`), checked
against onnxruntime, then all are called in turn `repeat` times (interleaved, so a change of
machine load hits them alike, in a new random order each round, so no variant always follows
one that flushed the cache); a call's time is the calling thread's CPU time (both run on the
calling thread at 1 thread; CPU time leaves out the time other processes hold the core) and
the best call is kept. Algorithms: "classic" (conv.py's choice, "auto" before Winograd:
shifted GEMMs or im2col panels), "im2col" (im2col + GEMM panels forced), Winograd
F(2,3)/F(4,3)/F(6,3) three-stage and L3-fused, and "auto" (conv_algorithm.auto_choice).
Writes benchmarks/results/winograd_bench.json with the times, the speed-ups, what "auto"
chose, and the issue's two goals (2-D layers):

- F(4,3) three-stage >= 1.8x im2col on 3x3 layers with >= 64 channels;
- L3-fused >= 1.3x three-stage (same F(m,3)) on layers with <= 64 channels.

    python benchmarks/winograd_bench.py --section fft [--repeat 5]

FFT section (lowering/fft.py): 3-D Convs with 5^3 and 7^3 kernels ('same' pads, bias, ReLU),
"fft" (conv_tiles.choose_fft_tile's tile), "fft-t8", "fft-t16", against "im2col", "classic"
(conv.py's choice; "direct" takes no Conv with more than DIRECT_MAX_TAPS taps, so on these
layers it is "classic") and onnxruntime, timed the same way; writes
benchmarks/results/fft_bench.json with the issue's goal (FFT >= 2x direct/classic on 5^3 and
up) per layer.

    python benchmarks/winograd_bench.py --section sweep [--repeat 5] [--only "2d k3 64@56"]

Roofline sweep (mlsys_workbench/experiments/fastconv.py): the layers of fastconv.SWEEP (2-D and
3-D, kernels 3/5/7, 8-256 channels), each with its candidate algorithms (im2col, Winograd
F(2,3)/F(4,3)/F(4,3) L3-fused and FFT for 3x3, im2col and FFT three-stage/fused for 5 and 7)
and onnxruntime, timed the same way; beside each, compilerkit.roofline's prediction with this
machine's cached measurement. Writes benchmarks/results/sweep_bench.json with the issue's goal:
the roofline's pick within 5% of the fastest candidate on >= 80% of the layers, and how many
predictions fall within 35% of the measured time; /proc/loadavg before and after.
"""

import argparse
import json
import math
import os

import numpy as np

import compilerkit as ck
from compilerkit.lowering.conv_algorithm import auto_choice
from compilerkit.oracle import ort_session
from compilerkit.pipeline import compile_to
from mlsys_workbench.experiments.fastconv import best_cpu, compile_variants, conv_model

# (name, C in, C out, H = W (= D)): ResNet-50's 3x3 layers, then layers of <= 64 channels,
# then 3x3x3 layers of a 3D U-Net (its wide levels: 128 channels at 16^3, 256 at 8^3)
LAYERS = [("64@56", 64, 64, 56), ("128@28", 128, 128, 28), ("256@14", 256, 256, 14),
          ("512@7", 512, 512, 7), ("16@112", 16, 16, 112), ("32@112", 32, 32, 112),
          ("32@56", 32, 32, 56), ("64@112", 64, 64, 112), ("3d 16@32", 16, 16, 32),
          ("3d 32@16", 32, 32, 16), ("3d 128@16", 128, 128, 16), ("3d 256@8", 256, 256, 8)]
# (name, C in, C out, D = H = W, kernel): 3-D layers with large kernels for the FFT section
FFT_LAYERS = [("3d k5 16@32", 16, 16, 32, 5), ("3d k5 32@24", 32, 32, 24, 5),
              ("3d k7 16@24", 16, 16, 24, 7), ("3d k7 8@32", 8, 8, 32, 7)]
FFT_ALGOS = ["im2col", "classic", "fft", "fft-t8", "fft-t16"]
ALGOS = ["classic", "im2col", "winograd-f2", "winograd-f4", "winograd-f6", "winograd-f2-fused",
         "winograd-f4-fused", "winograd-f6-fused", "auto"]


def model_row(name, repeat):
    """A whole real-weight model under "classic" and "auto" and in onnxruntime, interleaved."""
    import onnx
    from mlsys_datasets import real_weight_model

    path = str(real_weight_model(name, "full"))
    inp = onnx.load(path, load_external_data=False).graph.input[0]
    shape = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = ort_session(path)
    ref = sess.run(None, {inp.name: x})[0]
    fns = {"onnxruntime": lambda: sess.run(None, {inp.name: x})}
    row = {"model": name, "input": shape, "error": {}}
    for a in ("classic", "auto"):
        cm = ck.compile(path, asm=False, num_threads=1, conv_algorithm=a,
                        input_shapes={inp.name: shape})
        got = cm.run(x, num_threads=1)[0]
        row["error"][a] = float(np.abs(got - ref).max() / np.abs(ref).max())
        fns[a] = lambda cm=cm: cm.run(x, num_threads=1)
    t = best_cpu(fns, max(3, repeat // 2))
    row["ms"] = {k: v * 1e3 for k, v in t.items()}
    row["auto_vs_classic"] = t["classic"] / t["auto"]
    row["auto_vs_onnxruntime"] = t["onnxruntime"] / t["auto"]
    print(name, {k: round(v, 1) for k, v in row["ms"].items()}, flush=True)
    return row


def fft_section(args):
    """The FFT rows: every algorithm of FFT_ALGOS and onnxruntime on FFT_LAYERS, same run."""
    from compilerkit import roofline
    from compilerkit.conv_tiles import choose_fft_tile
    from compilerkit.measure.machine import measured_machine

    machine = measured_machine()  # measured once, then cached
    rows = []
    for name, c_in, c_out, hw, ks in FFT_LAYERS:
        m = conv_model(c_in, c_out, hw, 3, ks)
        x = np.random.default_rng(1).standard_normal((1, c_in) + (hw,) * 3).astype(np.float32)
        sess = ort_session(m.SerializeToString())
        ref = sess.run(None, {"x": x})[0]
        fns = {"onnxruntime": lambda s=sess, x=x: s.run(None, {"x": x})}
        row = {"layer": name, "c_in": c_in, "c_out": c_out, "hw": hw, "kernel": ks,
               "fft_tile": choose_fft_tile(c_in, c_out, [ks] * 3, [hw] * 3),
               "gflop_direct": 2 * c_in * c_out * ks ** 3 * hw ** 3 / 1e9, "error": {},
               "compile_s": {}}
        compile_variants(m, x, ref, FFT_ALGOS, row, fns)
        t = best_cpu(fns, args.repeat)
        ms = row["ms"] = {k: v * 1e3 for k, v in t.items()}
        row["fft_vs_im2col"] = ms["im2col"] / ms["fft"]
        row["fft_vs_classic"] = ms["classic"] / ms["fft"]
        row["fft_vs_onnxruntime"] = ms["onnxruntime"] / ms["fft"]
        layer = roofline.Layer(c_in, c_out, (hw,) * 3, ks)
        row["predicted_ms"] = {a: roofline.predict(layer, a, machine) * 1e3
                               for a in ("im2col", "fft", "fft-t8", "fft-t16")}
        row["predicted_over_measured"] = {a: row["predicted_ms"][a] / ms[a]
                                          for a in row["predicted_ms"]}
        row["roofline_pick"] = roofline.best_algorithm(layer, machine, ["im2col", "fft"])
        rows.append(row)
        print(f"{name:12s} " + "  ".join(f"{k} {v:.2f}" for k, v in ms.items()), flush=True)
    summary = {"fft_ge_2x_classic_on_all": all(r["fft_vs_classic"] >= 2 for r in rows),
               "fft_ge_2x_im2col_on_all": all(r["fft_vs_im2col"] >= 2 for r in rows)}
    out = os.path.join(os.path.dirname(args.out), "fft_bench.json")
    with open(out, "w") as f:
        json.dump({"threads": 1, "timer": "thread CPU time, best of repeat, interleaved",
                   "repeat": args.repeat, "load": os.getloadavg(), "rows": rows,
                   "machine": vars(machine), "summary": summary}, f, indent=1)
    print(summary)


def sweep_section(args):
    """The roofline sweep: fastconv.sweep on SWEEP (or --only), same run."""
    from compilerkit.measure.machine import measured_machine
    from mlsys_workbench.experiments import fastconv as fc

    machine = measured_machine()  # measured once, then cached
    only = set(args.only.split(",")) if args.only else None
    specs = [s for s in fc.SWEEP if not only or fc.layer_name(s) in only]
    load_before = fc.load()
    rows = []
    for spec in specs:
        row = fc.measure_layer(spec, args.repeat, machine)
        rows.append(row)
        print(f"{row['layer']:16s} pick {row['pick']:18s} fastest {row['fastest']:18s} "
              + "  ".join(f"{a} {row['ms'][a]:.2f}/{row['predicted_ms'][a]:.2f}"
                          for a in row["candidates"]) + f"  ort {row['ms']['onnxruntime']:.2f}",
              flush=True)
    summary = fc.summary(rows)
    held = [r for r in rows if fc.SWEEP.index(tuple(r["spec"])) >= len(fc.SWEEP) - fc.HELD_OUT]
    if held:  # layers added after the model's fitted constants were chosen
        summary["held_out"] = fc.summary(held) | {"layers_named": [r["layer"] for r in held]}
    out = os.path.join(os.path.dirname(args.out), "sweep_bench.json")
    with open(out, "w") as f:
        json.dump({"threads": 1, "timer": "thread CPU time, best of repeat, interleaved",
                   "repeat": args.repeat, "loadavg_before": load_before,
                   "loadavg_after": fc.load(), "machine": vars(machine),
                   "pick_slack": fc.PICK_SLACK, "rows": rows, "summary": summary}, f, indent=1)
    print(json.dumps(summary, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--section", choices=["winograd", "fft", "sweep"], default="winograd")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default="", help="comma-separated layer names")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--models", default="resnet50",
                    help="comma-separated real-weight models (mlsys_datasets, 'full' size) to "
                         "time whole under classic and auto; '' for none")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "results", "winograd_bench.json"))
    args = ap.parse_args()
    if args.section == "fft":
        fft_section(args)
        return
    if args.section == "sweep":
        sweep_section(args)
        return
    algos = args.algos.split(",")
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for name, c_in, c_out, hw in LAYERS:
        if only and name not in only:
            continue
        rank = 3 if name.startswith("3d") else 2
        m = conv_model(c_in, c_out, hw, rank)
        x = np.random.default_rng(1).standard_normal((1, c_in) + (hw,) * rank).astype(
            np.float32)
        sess = ort_session(m.SerializeToString())
        ref = sess.run(None, {"x": x})[0]
        fns = {"onnxruntime": lambda s=sess, x=x: s.run(None, {"x": x})}
        conv = next(op for op in compile_to("onnx-ir", m).walk() if op.name == "onnx.Conv")
        row = {"layer": name, "rank": rank, "c_in": c_in, "c_out": c_out, "hw": hw,
               "auto_choice": auto_choice(conv),
               "gflop": 2 * c_in * c_out * (3 * hw) ** rank / 1e9, "error": {}, "compile_s": {}}
        compile_variants(m, x, ref, algos, row, fns)
        t = best_cpu(fns, args.repeat)
        row["ms"] = {k: v * 1e3 for k, v in t.items()}
        rows.append(row)
        print(f"{name:8s} " + "  ".join(f"{k.replace('winograd', 'w')} {v * 1e3:.2f}"
                                        for k, v in t.items()), flush=True)
    goals = {"f4_vs_im2col_ge64": [], "fused_vs_three_stage_le64": [], "auto": [],
             "three_d": []}
    for row in rows:
        ms = row["ms"]
        if "auto" in ms and "classic" in ms:
            goals["auto"].append({"layer": row["layer"], "choice": row["auto_choice"],
                                  "vs_classic": ms["classic"] / ms["auto"],
                                  "vs_onnxruntime": ms["onnxruntime"] / ms["auto"]})
        if row["rank"] == 3:
            best = min((a for a in ms if a.startswith("winograd")), key=ms.get, default=None)
            if best and "classic" in ms:
                goals["three_d"].append({"layer": row["layer"], "best_winograd": best,
                                         "vs_classic": ms["classic"] / ms[best]})
            continue
        if min(row["c_in"], row["c_out"]) >= 64 and "winograd-f4" in ms and "im2col" in ms:
            goals["f4_vs_im2col_ge64"].append(
                {"layer": row["layer"], "speedup": ms["im2col"] / ms["winograd-f4"],
                 "vs_classic": ms.get("classic", math.nan) / ms["winograd-f4"]})
        if max(row["c_in"], row["c_out"]) <= 64:
            for f in (2, 4, 6):
                a, b = f"winograd-f{f}", f"winograd-f{f}-fused"
                if a in ms and b in ms:
                    goals["fused_vs_three_stage_le64"].append(
                        {"layer": row["layer"], "m": f, "speedup": ms[a] / ms[b]})
    summary = {
        "f4_ge_1.8x_im2col_on_all_ge64": all(g["speedup"] >= 1.8
                                             for g in goals["f4_vs_im2col_ge64"]),
        "fused_ge_1.3x_three_stage_on_all_le64": all(
            g["speedup"] >= 1.3 for g in goals["fused_vs_three_stage_le64"])}
    models = [model_row(name, args.repeat) for name in args.models.split(",") if name]
    print(json.dumps(goals, indent=1), summary)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"threads": 1, "timer": "thread CPU time, best of repeat, interleaved",
                   "repeat": args.repeat, "load": os.getloadavg(), "rows": rows,
                   "goals": goals, "summary": summary, "models": models}, f, indent=1)


if __name__ == "__main__":
    main()
