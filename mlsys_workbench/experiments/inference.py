"""What notebook 18 (3-D inference, ZNNi half) and `benchmarks/conv_bench.py --section znni`
run: a small ZNN-like valid 3-D net, its throughput measured against the patch size per Conv
algorithm (the ZNNi curve), the planner's pick under RAM caps against the best measured, and
the figures.

    net = znn_net()                                  # ONNX, seeded weights
    rows = measure_curve(net, {"im2col": [8, 16, 32], "fft": [8, 16, 32]}, volume)
    picks = compare_plans(net, rows, volume, caps)   # planner vs best measured per cap

Timing: each patch size is compiled once (1 thread) and its patch run `repeat` times after a
warm-up, the calling thread's CPU time per call (time.thread_time: the compiled code runs on
the calling thread at 1 thread, so time the core was lent to other processes is left out),
best call kept. Still an upper bound on a loaded machine (caches are shared). Throughput over
the volume is out_voxels / (patches * seconds per patch): the same rule the planner predicts
with (`inference.volume_throughput`). plotly is imported inside the figure functions.
"""

from __future__ import annotations

import math
import time

import numpy as np

from compilerkit import inference as inf
from compilerkit.measure.timing import best_of, load

# (C out, kernel) per Conv, after a one-channel input; "pool" is a 2^3 max filter (stride 1)
ZNN_LAYERS = [(8, 3), (8, 5), "pool", (8, 3), (3, 1)]
SMOKE_LAYERS = [(4, 3), "pool", (2, 3)]
ALGO_COLOURS = {"im2col": "#4e79a7", "classic": "#76b7b2", "fft": "#59a14f",
                "fft-fused": "#b07aa1"}
GIB = 1 << 30


def znn_net(layers=ZNN_LAYERS, seed: int = 0, name: str = "znn_like"):
    """ONNX: x [1, 1, z, y, x] (dims named) through valid Convs + ReLU and stride-1 max
    filters, the last Conv followed by a Sigmoid (ZNN's affinity / boundary output), seeded
    random weights scaled by 1/sqrt(fan-in)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, x, c = [], [], "x", 1
    convs = [i for i, spec in enumerate(layers) if spec != "pool"]
    for i, spec in enumerate(layers):
        if spec == "pool":
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], kernel_shape=[2, 2, 2]))
            x = f"p{i}"
            continue
        k_out, ks = spec
        w = rng.standard_normal((k_out, c, ks, ks, ks)) / math.sqrt(c * ks ** 3)
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((0.1 * rng.standard_normal(k_out)).astype(np.float32),
                                          f"b{i}")]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}"))
        act = "Sigmoid" if i == convs[-1] else "Relu"
        nodes.append(helper.make_node(act, [f"c{i}"], [f"a{i}"]))
        x, c = f"a{i}", k_out
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(
        "x", 1, [1, 1, "z", "y", "x"])], [helper.make_tensor_value_info(x, 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def best_cpu(fn, repeat: int) -> float:
    """Best thread CPU seconds of `repeat` calls after one warm-up."""
    return best_of(fn, repeat, "thread")


def measure_curve(model, sides: dict, volume_shape, repeat: int = 3, progress: bool = True,
                  machine=None) -> list[dict]:
    """For each algorithm and cube side in `sides` ({algorithm: [side, ...]}): compile at
    that output patch (1 thread), time one patch, and put the memory model's bytes and the
    planner's prediction beside the measurement."""
    from tqdm.auto import tqdm

    from compilerkit import roofline as rl

    net = inf.inspect(model)
    m = machine or rl.machine()
    out_shape = tuple(n - f + 1 for n, f in zip(volume_shape, net.fov, strict=True))
    jobs = [(a, s) for a, ss in sides.items() for s in ss]
    rows = []
    x_rng = np.random.default_rng(1)
    for a, s in tqdm(jobs, desc="patch sizes", disable=not progress):
        p = inf._cube(s, out_shape)
        t0 = time.perf_counter()
        sw = inf.SlidingWindow(net.proto, p, conv_algorithm=a, num_threads=1, net=net, asm=False)
        compile_s = time.perf_counter() - t0
        x = x_rng.standard_normal((net.channels_in, *sw.patch_in)).astype(np.float32)
        sec = best_cpu(lambda sw=sw, x=x: sw.run_patch(x), repeat)
        pred = inf.predict_patch(net, p, a, m)["seconds"]
        rows.append({"algorithm": a, "side": s, "patch_out": list(p),
                     "patch_in": list(sw.patch_in), "bytes": sw.bytes().total,
                     "arena_bytes": sw.compiled.arena_bytes, "compile_s": round(compile_s, 2),
                     "seconds": sec, "predicted_seconds": pred,
                     "patch_voxels_per_s": math.prod(p) / sec,
                     "predicted_patch_voxels_per_s": math.prod(p) / pred,
                     "voxels_per_s": inf.volume_throughput(out_shape, p, sec),
                     "predicted_voxels_per_s": inf.volume_throughput(out_shape, p, pred),
                     "patches": len(inf.patch_grid(out_shape, p))})
    return rows


MEASURE_TOP = 3  # the planner's measured refinement: its 3 best predicted candidates


def compare_plans(model, rows, volume_shape, caps, machine=None,
                  measure: int = MEASURE_TOP, progress: bool = False) -> list[dict]:
    """Per RAM cap: the planner's pick among the measured (algorithm, side) pairs, from
    predictions only ("pick") and with its `measure` best predicted candidates measured
    ("pick_measured"; the measurement is the row's own, the same compile and timing the
    planner would do), against the best measured pair that fits; each pick's measured
    throughput over the best's and over the smallest valid patch's (side 1). `progress`: a
    bar counting the caps (about 80 s for six at the notebook's full size)."""
    from tqdm.auto import tqdm

    net = inf.inspect(model)
    sides = {}
    for r in rows:
        sides.setdefault(r["algorithm"], []).append(r["side"])
    by_key = {(r["algorithm"], tuple(r["patch_out"])): r for r in rows}
    smallest = [r["voxels_per_s"] for r in rows if r["side"] == 1]
    out = []
    for cap in tqdm(caps, desc="RAM caps", unit="cap", disable=not progress):
        try:
            plans = {"pick": inf.plan(net, volume_shape, cap, algorithms=tuple(sides),
                                      sizes=sides, machine=machine),
                     "pick_measured": inf.plan(
                         net, volume_shape, cap, algorithms=tuple(sides), sizes=sides,
                         machine=machine, measure=measure,
                         timer=lambda a, p: by_key[(a, tuple(p))]["seconds"])}
        except ValueError as error:
            out.append({"cap_bytes": cap, "pick": None, "error": str(error)})
            continue
        best = max((r for r in rows if r["bytes"] <= cap), key=lambda r: r["voxels_per_s"])
        row = {"cap_bytes": cap, "best": {"algorithm": best["algorithm"], "side": best["side"],
                                          "bytes": best["bytes"]},
               "best_voxels_per_s": best["voxels_per_s"]}
        for key, pl in plans.items():
            got = by_key[(pl.algorithm, tuple(pl.patch_out))]
            row[key] = {"algorithm": pl.algorithm, "side": got["side"], "bytes": pl.bytes.total}
            row[f"{key}_voxels_per_s"] = got["voxels_per_s"]
            row[f"{key}_over_best"] = got["voxels_per_s"] / best["voxels_per_s"]
            if smallest:
                row[f"{key}_over_smallest"] = got["voxels_per_s"] / max(smallest)
        out.append(row)
    return out


def stitched_vs_whole(model, volume_shape, patch_out, algorithm="im2col", seed=0) -> dict:
    """The same model compiled at a patch and at the whole volume: the stitched output
    against the whole-volume run, and against onnxruntime on the whole volume."""
    from compilerkit.oracle import ort_session

    net = inf.inspect(model)
    vol = np.random.default_rng(seed).standard_normal((1, *volume_shape)).astype(np.float32)
    stitched = inf.SlidingWindow(net.proto, patch_out, conv_algorithm=algorithm, net=net,
                                 asm=False)(vol, progress=False)
    out_shape = tuple(n - f + 1 for n, f in zip(volume_shape, net.fov, strict=True))
    whole = inf.SlidingWindow(net.proto, out_shape, conv_algorithm=algorithm, net=net,
                              asm=False).run_patch(vol)
    ref = ort_session(net.proto.SerializeToString()).run(None, {net.input: vol[None]})[0][0]
    return {"stitched": stitched, "whole": whole, "onnxruntime": ref,
            "max_abs_vs_whole": float(np.abs(stitched - whole).max()),
            "max_abs_vs_onnxruntime": float(np.abs(stitched - ref).max()),
            "patches": len(inf.patch_grid(out_shape, patch_out))}


# ---- figures -------------------------------------------------------------------------------
def overlap_figure(fov, patch_out, volume_shape):
    """A z-slice of the input: the output patches tiling the output (the last moved back),
    and the input window of two neighbouring patches overlapping by fov - 1."""
    import plotly.graph_objects as go

    fy, fx = fov[1], fov[2]
    ny, nx = volume_shape[1], volume_shape[2]
    oy, ox = ny - fy + 1, nx - fx + 1
    py, px = patch_out[1], patch_out[2]
    hy, hx = (fy - 1) // 2, (fx - 1) // 2  # output voxel (0, 0) sits at the window's centre
    fig = go.Figure()
    fig.add_shape(type="rect", x0=0, y0=0, x1=nx, y1=ny, line={"color": "black"})
    fig.add_shape(type="rect", x0=hx, y0=hy, x1=hx + ox, y1=hy + oy,
                  line={"color": "grey", "dash": "dot"})
    for i, y in enumerate(inf.axis_starts(oy, py)):
        for j, x in enumerate(inf.axis_starts(ox, px)):
            fig.add_shape(type="rect", x0=hx + x, y0=hy + y, x1=hx + x + px, y1=hy + y + py,
                          fillcolor="#4e79a7" if (i + j) % 2 == 0 else "#a0cbe8",
                          opacity=0.55, line={"width": 1, "color": "#4e79a7"})
    xs = inf.axis_starts(ox, px)
    for k, colour in zip(range(min(2, len(xs))), ("#e15759", "#f28e2b"), strict=False):
        x = xs[k]
        fig.add_shape(type="rect", x0=x, y0=0, x1=x + px + fx - 1, y1=py + fy - 1,
                      line={"color": colour, "width": 3})
    fig.add_scatter(x=[None], y=[None], mode="lines", line={"color": "#e15759"},
                    name=f"input window of patch 0 ({py + fy - 1} x {px + fx - 1})")
    fig.add_scatter(x=[None], y=[None], mode="lines", line={"color": "#f28e2b"},
                    name=f"input window of patch 1 (overlap {fx - 1} = fov - 1)")
    fig.add_scatter(x=[None], y=[None], mode="markers", marker={"color": "#4e79a7"},
                    name=f"output patches {py} x {px} (last moved back)")
    fig.update_xaxes(range=[-1, nx + 1], title="x", scaleanchor="y")
    fig.update_yaxes(range=[ny + 1, -1], title="y")
    fig.update_layout(title=f"One z-slice: field of view {tuple(fov)}, output patch "
                            f"{tuple(patch_out)}, volume {tuple(volume_shape)}",
                      height=520, width=760)
    return fig


def curve_figure(rows, picks=None):
    """The ZNNi curve: measured (filled) and predicted (open) output voxels per second of the
    whole volume against the patch side, per algorithm; the planner's pick per cap starred.
    Right: the memory model's bytes per patch against the side, with the caps."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "output voxels / s over the volume (filled: measured, open: predicted)",
        "memory per patch (memory model)"))
    for a in sorted({r["algorithm"] for r in rows}):
        rs = sorted((r for r in rows if r["algorithm"] == a), key=lambda r: r["side"])
        colour = ALGO_COLOURS.get(a)
        sides = [r["side"] for r in rs]
        fig.add_scatter(x=sides, y=[r["voxels_per_s"] for r in rs], mode="lines+markers",
                        name=f"{a} measured", line={"color": colour}, row=1, col=1)
        fig.add_scatter(x=sides, y=[r["predicted_voxels_per_s"] for r in rs],
                        mode="lines+markers", name=f"{a} predicted",
                        line={"color": colour, "dash": "dot"},
                        marker={"symbol": "circle-open", "size": 9}, row=1, col=1)
        fig.add_scatter(x=sides, y=[r["bytes"] / 2 ** 20 for r in rs], mode="lines+markers",
                        line={"color": colour}, showlegend=False, row=1, col=2)
        best = max(rs, key=lambda r: r["voxels_per_s"])
        fig.add_annotation(x=math.log10(best["side"]), y=math.log10(best["voxels_per_s"]),
                           text=f"{a} optimum", showarrow=True, row=1, col=1)
    for i, p in enumerate(q for q in picks or [] if q.get("pick")):
        for key, symbol, label in (("pick", "star", "planner's pick (predicted)"),
                                   ("pick_measured", "x", "pick (+ top-3 measured)")):
            fig.add_scatter(x=[p[key]["side"]], y=[p[f"{key}_voxels_per_s"]], mode="markers",
                            marker={"symbol": symbol, "size": 14, "color": "black"},
                            name=label, legendgroup=key, showlegend=i == 0, row=1, col=1)
    all_sides = [r["side"] for r in rows]
    for p in picks or []:  # the caps as lines (a log axis takes shapes' text in log10 units)
        fig.add_scatter(x=[min(all_sides), max(all_sides)], y=[p["cap_bytes"] / 2 ** 20] * 2,
                        mode="lines+text", text=["", f"cap {p['cap_bytes'] / 2 ** 20:.0f} MiB"],
                        textposition="top left", line={"color": "grey", "dash": "dash"},
                        showlegend=False, row=1, col=2)
    fig.update_xaxes(type="log", title="output patch side (voxels)")
    fig.update_yaxes(type="log", title="output voxels / s", row=1, col=1)
    fig.update_yaxes(type="log", title="MiB", row=1, col=2)
    fig.update_layout(title="ZNNi: throughput against patch size, 1 thread (black: the "
                            "planner's picks under the RAM caps)", height=520)
    return fig


def picks_figure(picks):
    """Per RAM cap: the measured throughput of the planner's picks (from predictions alone,
    and with its top predictions measured) and of the best measured that fits."""
    import plotly.graph_objects as go

    ps = [p for p in picks if p.get("pick")]
    names = [f"{p['cap_bytes'] / 2 ** 20:.0f} MiB" for p in ps]
    fig = go.Figure()
    fig.add_bar(x=names, y=[p["best_voxels_per_s"] for p in ps], name="best measured",
                text=[f"{p['best']['algorithm']} {p['best']['side']}" for p in ps],
                marker_color="#bab0ac")
    fig.add_bar(x=names, y=[p["pick_voxels_per_s"] for p in ps],
                name="planner's pick (predicted)",
                text=[f"{p['pick']['algorithm']} {p['pick']['side']}" for p in ps],
                marker_color="#4e79a7")
    fig.add_bar(x=names, y=[p["pick_measured_voxels_per_s"] for p in ps],
                name=f"planner's pick (top {MEASURE_TOP} predicted, measured)",
                text=[f"{p['pick_measured']['algorithm']} {p['pick_measured']['side']}"
                      for p in ps], marker_color="#59a14f")
    fig.update_layout(barmode="group", height=450, xaxis_title="RAM cap",
                      yaxis_title="output voxels / s (measured)",
                      title="The planner's picks against the best measured per RAM cap, 1 thread")
    return fig


def stitch_figure(res, z: int = 0):
    """One z-slice (first output channel): stitched, whole-volume run, their difference."""
    from plotly.subplots import make_subplots

    panels = [("stitched", res["stitched"][0, z]), ("whole volume", res["whole"][0, z]),
              ("stitched - whole", res["stitched"][0, z] - res["whole"][0, z])]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p[0] for p in panels])
    for i, (_, a) in enumerate(panels, 1):
        fig.add_heatmap(z=a, showscale=i == 3, colorscale="Viridis" if i < 3 else "RdBu",
                        row=1, col=i)
        fig.update_yaxes(autorange="reversed", title="y (voxels)", row=1, col=i)
        fig.update_xaxes(title="x (voxels)", row=1, col=i)
    fig.update_layout(title=f"Stitched from {res['patches']} patches == whole volume: "
                            f"max |diff| {res['max_abs_vs_whole']:.1e} (onnxruntime: "
                            f"{res['max_abs_vs_onnxruntime']:.1e})", height=380)
    return fig


# ---- the benchmark (benchmarks/conv_bench.py --section znni) -----------------------------------
BENCH_SIDES = {"im2col": [1, 2, 4, 8, 16, 32, 64, 128], "fft": [4, 8, 16, 32, 64, 128]}
SMOKE_SIDES = {"im2col": [1, 2, 4, 8], "fft": [4]}
BENCH_VOLUME = (265, 265, 265)  # output 256^3 with ZNN_LAYERS' field of view 10
MIB = 1 << 20
BENCH_CAPS = [16 * MIB, 64 * MIB, 256 * MIB, GIB, 2 * GIB, 4 * GIB]


def bench(model=None, sides=None, volume_shape=BENCH_VOLUME, caps=BENCH_CAPS,
          repeat: int = 3, progress: bool = True, machine=None) -> dict:
    """The ZNNi curve of `model` (default znn_net()) measured per algorithm and side, and the
    planner's pick per RAM cap against the best measured (`compare_plans`), with the load
    before and after. Goals: the pick within 10% of the best measured, and at
    least 2x the smallest valid patch."""
    from compilerkit import roofline as rl

    name = f"znn_like {ZNN_LAYERS}" if model is None else model.graph.name
    model = model or znn_net()
    m = machine or rl.machine()
    load_before = load()
    rows = measure_curve(model, sides or BENCH_SIDES, volume_shape, repeat, progress, m)
    picks = compare_plans(model, rows, volume_shape, caps, m)
    done = [p for p in picks if p.get("pick")]
    return {"model": name,
            "fov": list(inf.inspect(model).fov), "volume": list(volume_shape),
            "threads": 1, "timer": "thread CPU time, best of repeat after a warm-up",
            "repeat": repeat, "machine": {"peak_flops": m.peak_flops, "bandwidth": m.bandwidth},
            "loadavg_before": load_before, "loadavg_after": load(),
            "rows": rows, "picks": picks,
            "measure_top": MEASURE_TOP,
            "goal_within_10pct_predicted": all(p["pick_over_best"] >= 0.9 for p in done),
            "goal_within_10pct_measured_top": all(p["pick_measured_over_best"] >= 0.9
                                                  for p in done),
            "goal_2x_smallest": all(p.get("pick_measured_over_smallest", 0) >= 2
                                    and p.get("pick_over_smallest", 0) >= 2 for p in done)}
