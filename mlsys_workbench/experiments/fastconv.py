"""What notebook 17 (fast convolutions) and `benchmarks/winograd_bench.py --section sweep` run:
Winograd F(2,3) worked by hand on one tile, overlap-save FFT on 1-D tiles, an outline of a
compiled Conv's Kernel IR, and the roofline sweep: Conv layers compiled with each candidate
algorithm (im2col, Winograd three-stage / L3-fused, FFT), timed in the same run beside
onnxruntime, against compilerkit.roofline's prediction.

    rows = sweep(SWEEP, repeat=5)          # compiles and times; a row per layer
    summary(rows)                          # pick accuracy and prediction errors

Timing (`best_cpu`): every variant of a layer is called in turn, `repeat` rounds in a new
random order each round (what ran just before decides which data is still in the L3), the
calling thread's CPU time per call (both compilerkit and onnxruntime run on the calling
thread at 1 thread, so time the core was lent to other processes is left out), best call
kept. Still an upper bound on a loaded machine: cache contention from other processes is not
left out.

The roofline "picks" the algorithm with the least predicted time among a layer's candidates;
the pick counts as right when its measured time is within PICK_SLACK of the fastest
candidate's. plotly is imported inside the figure functions, not with compilerkit.
"""

from __future__ import annotations

import re
import time

import numpy as np

from compilerkit import roofline as rl
from compilerkit.measure.machine import conv_model, to_layer
from compilerkit.measure.timing import best_of, load  # noqa: F401 (load: the sweep's record)

# (C in, C out, spatial size, rank, kernel): 2-D and 3-D, kernels 3 / 5 / 7, 8-256 channels
SWEEP = [
    (8, 8, 112, 2, 3), (16, 16, 56, 2, 3), (32, 32, 56, 2, 3), (64, 64, 56, 2, 3),
    (32, 64, 28, 2, 3), (128, 128, 28, 2, 3), (256, 256, 14, 2, 3), (128, 128, 14, 2, 3),
    (256, 256, 7, 2, 3),
    (16, 16, 56, 2, 5), (32, 32, 56, 2, 5), (64, 64, 28, 2, 5), (128, 128, 14, 2, 5),
    (8, 8, 64, 2, 7), (32, 32, 32, 2, 7), (64, 64, 28, 2, 7),
    (8, 8, 32, 3, 3), (16, 16, 24, 3, 3), (32, 32, 16, 3, 3), (64, 64, 12, 3, 3),
    (8, 8, 24, 3, 5), (16, 16, 24, 3, 5), (32, 32, 16, 3, 5),
    (8, 8, 24, 3, 7), (16, 16, 16, 3, 7), (8, 16, 20, 3, 7),
    # held out: added after roofline.ROW_OVERHEAD was fitted on the layers above
    (16, 32, 40, 2, 3), (48, 48, 20, 2, 5), (24, 24, 12, 3, 3), (12, 12, 20, 3, 5),
]
HELD_OUT = 4  # the last layers of SWEEP
SMOKE_SWEEP = [(16, 16, 28, 2, 3), (32, 32, 14, 2, 3), (8, 8, 12, 3, 5)]
PICK_SLACK = 0.05  # the pick is right when within 5% of the fastest candidate, measured
WITHIN = 0.35  # the bound on |predicted / measured - 1|


def layer_name(spec) -> str:
    c, k, hw, rank, ks = spec
    ch = f"{c}" if c == k else f"{c}-{k}"
    return f"{rank}d k{ks} {ch}@{hw}"


def candidates(spec) -> list[str]:
    """The algorithms the roofline chooses between for a layer: im2col, FFT (three-stage
    and fused) and, for 3x3(x3) kernels, Winograd F(2,3), F(4,3), F(4,3) L3-fused; a fused
    name that makes one group of all the tiles is its three-stage twin's program, and left
    out (roofline.distinct)."""
    if spec[4] == 3:
        names = ["im2col", "winograd-f2", "winograd-f4", "winograd-f4-fused", "fft"]
    else:
        names = ["im2col", "fft", "fft-fused"]
    return rl.distinct(to_layer(spec), names)


def best_cpu(fns: dict, repeat: int, seed: int = 0) -> dict:
    """{name: best thread CPU seconds} over `repeat` interleaved rounds after one warm-up,
    each round in a new random order (the module docstring says why)."""
    return best_of(fns, repeat, "thread", shuffle=seed)


def measure_layer(spec, repeat: int = 5, machine: rl.Machine | None = None,
                  algorithms=None) -> dict:
    """One layer: every candidate compiled (1 thread), checked against onnxruntime, timed
    with onnxruntime in the same rounds; the roofline's predictions and pick beside."""
    from compilerkit.oracle import ort_session

    machine = machine or rl.machine()
    c, k, hw, rank, ks = spec
    algorithms = list(algorithms or candidates(spec))
    m = conv_model(c, k, hw, rank, ks)
    x = np.random.default_rng(1).standard_normal((1, c) + (hw,) * rank).astype(np.float32)
    sess = ort_session(m.SerializeToString())
    ref = sess.run(None, {"x": x})[0]
    fns = {"onnxruntime": lambda: sess.run(None, {"x": x})}
    row = {"layer": layer_name(spec), "spec": list(spec), "candidates": algorithms,
           "error": {}, "compile_s": {}}
    compile_variants(m, x, ref, algorithms, row, fns)
    row["ms"] = {a: s * 1e3 for a, s in best_cpu(fns, repeat).items()}
    return add_predictions(row, machine)


def compile_variants(m, x, ref, algorithms, row: dict, fns: dict) -> None:
    """Compile `m` once per conv algorithm (1 thread): row["compile_s"] and row["error"] (max
    |got - ref| / max |ref|) per algorithm, and fns[algorithm] runs it on `x`."""
    import compilerkit as ck

    for a in algorithms:
        t = time.perf_counter()
        cm = ck.compile(m, asm=False, num_threads=1, conv_algorithm=a)
        row["compile_s"][a] = round(time.perf_counter() - t, 2)
        got = cm.run(x, num_threads=1)[0]
        row["error"][a] = float(np.abs(got - ref).max() / np.abs(ref).max())
        fns[a] = lambda cm=cm: cm.run(x, num_threads=1)


def add_predictions(row: dict, machine: rl.Machine) -> dict:
    """The roofline's predicted ms per candidate, predicted / measured, its pick, the fastest
    candidate measured and whether the pick is within PICK_SLACK of it (recomputable from a
    stored row with another machine or model)."""
    layer, ms = to_layer(row["spec"]), row["ms"]
    algos = row["candidates"]
    row["predicted_ms"] = {a: rl.predict(layer, a, machine) * 1e3 for a in algos}
    row["ratio"] = {a: row["predicted_ms"][a] / ms[a] for a in algos}
    row["pick"] = rl.best_algorithm(layer, machine, algos)
    row["fastest"] = min(algos, key=ms.get)
    row["pick_over_fastest"] = ms[row["pick"]] / ms[row["fastest"]]
    row["pick_ok"] = row["pick_over_fastest"] <= 1 + PICK_SLACK
    row["fastest_vs_onnxruntime"] = ms["onnxruntime"] / ms[row["fastest"]]
    return row


def sweep(specs=SWEEP, repeat: int = 5, machine: rl.Machine | None = None,
          progress: bool = True) -> list[dict]:
    """measure_layer on every layer of `specs`."""
    from tqdm.auto import tqdm

    machine = machine or rl.machine()
    rows = []
    for spec in tqdm(specs, desc="layers", disable=not progress):
        rows.append(measure_layer(spec, repeat, machine))
    return rows


def summary(rows) -> dict:
    """Pick accuracy and prediction errors: |predicted / measured - 1| of every candidate of
    every layer, and of the picked algorithm alone."""
    errs = [abs(r["ratio"][a] - 1) for r in rows for a in r["candidates"]]
    pick_errs = [abs(r["ratio"][r["pick"]] - 1) for r in rows]
    ratios = [r["ratio"][a] for r in rows for a in r["candidates"]]
    return {
        "layers": len(rows), "pairs": len(errs),
        "pick_ok_fraction": sum(r["pick_ok"] for r in rows) / len(rows),
        "pick_exact_fraction": sum(r["pick"] == r["fastest"] for r in rows) / len(rows),
        "within_35pct_fraction": sum(e <= WITHIN for e in errs) / len(errs),
        "picked_within_35pct_fraction": sum(e <= WITHIN for e in pick_errs) / len(rows),
        "abs_error_median": float(np.median(errs)),
        "abs_error_p90": float(np.quantile(errs, 0.9)),
        "ratio_quartiles": [float(q) for q in np.quantile(ratios, [0.25, 0.5, 0.75])],
        "goal_pick_ge_80pct": sum(r["pick_ok"] for r in rows) / len(rows) >= 0.8,
    }


# ---- by hand ---------------------------------------------------------------------------------
def winograd_by_hand(m: int = 2, seed: int = 0) -> dict:
    """F(m, 3) on one 2-D tile with the matrices wincnn computes (conv_tiles.winograd_matrices):
    d [alpha, alpha] input, g [3, 3] filter, U = G g G^T, V = B^T d B, Y = A^T (U * V) A,
    against the direct correlation y[i, j] = sum d[i + u, j + v] g[u, v]."""
    from compilerkit.conv_tiles import winograd_matrices

    at, g_mat, bt = winograd_matrices(m, 3)
    alpha = m + 2
    rng = np.random.default_rng(seed)
    d = rng.integers(-3, 4, (alpha, alpha)).astype(np.float64)
    g = rng.integers(-2, 3, (3, 3)).astype(np.float64)
    u = g_mat @ g @ g_mat.T
    v = bt @ d @ bt.T
    y = at @ (u * v) @ at.T
    direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(m)] for i in range(m)])
    return {"AT": at, "G": g_mat, "BT": bt, "d": d, "g": g, "U": u, "V": v, "UV": u * v,
            "Y": y, "direct": direct, "max_abs_diff": float(np.abs(y - direct).max()),
            "multiplies": alpha * alpha, "direct_multiplies": m * m * 9}


def overlap_save_1d(x: np.ndarray, w: np.ndarray, t: int) -> dict:
    """1-D 'valid' correlation by FFT on tiles of t (overlap-save, as lowering/fft.py does per
    axis): each tile's circular correlation is exact on its first m = t - k + 1 outputs.
    numpy's FFT here is for teaching; the compiled code generates its butterflies."""
    k = len(w)
    m = t - k + 1
    n_out = len(x) - k + 1
    tiles = -(-n_out // m)
    xp = np.concatenate([x, np.zeros(tiles * m + k - 1 - len(x))])
    wf = np.conj(np.fft.rfft(np.concatenate([w, np.zeros(t - k)])))
    out, per_tile = [], []
    for i in range(tiles):
        seg = xp[i * m:i * m + t]
        circ = np.fft.irfft(np.fft.rfft(seg) * wf, t)
        per_tile.append(circ)
        out.append(circ[:m])
    y = np.concatenate(out)[:n_out]
    direct = np.correlate(x, w, mode="valid")
    return {"t": t, "m": m, "tiles": tiles, "y": y, "direct": direct, "per_tile": per_tile,
            "max_abs_diff": float(np.abs(y - direct).max())}


def kernel_ir_outline(text: str, max_lines: int = 60) -> str:
    """A Kernel IR text cut to its skeleton: buffers (krnl.global, krnl.alloc with shapes),
    one line per loop nest with its bounds (filled in when the nest closes), and the matmuls,
    indented by nesting depth."""
    out, open_nests = [], []
    for line in text.splitlines():
        indent = max(0, (len(line) - len(line.lstrip())) // 2 - 2)
        s = line.strip()
        pad = "  " * indent
        if "krnl.global" in s or "krnl.alloc" in s:
            name = re.search(r'sym_name = "([^"]+)"', s)
            ty = re.search(r"-> (memref<[^>]*>)", s)
            what = "global" if "global" in s else "alloc"
            out.append(f"{pad}{what} {name.group(1) + ' ' if name else ''}"
                       f"{ty.group(1) if ty else ''}")
        elif s.startswith('"krnl.matmul"'):
            out.append(pad + "krnl.matmul")
        elif '"krnl.iterate"(' in s:
            open_nests.append(len(out))
            out.append(pad + "for")
        elif s.startswith("})") and "bounds = " in s and open_nests:
            at = open_nests.pop()
            bounds = re.findall(r"\[(-?\d+) : i64, (-?\d+) : i64\]", s.split("bounds = ", 1)[1])
            out[at] += " " + " x ".join(f"[{lo}, {hi})" for lo, hi in bounds)
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... ({len(out) - max_lines} more lines)"]
    return "\n".join(out)


# ---- figures ---------------------------------------------------------------------------------
def tile_figure(h: dict):
    """Heatmaps of one Winograd tile: d, V = B^T d B, U = G g G^T, U * V, and Y beside the
    direct result."""
    from plotly.subplots import make_subplots

    panels = [("input tile d", h["d"]), ("V = Bᵀ d B", h["V"]), ("U = G g Gᵀ", h["U"]),
              ("U ⊙ V", h["UV"]), ("Y = Aᵀ (U ⊙ V) A", h["Y"]), ("direct correlation", h["direct"])]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels])
    for i, (_, a) in enumerate(panels, 1):
        fig.add_heatmap(z=a, text=np.round(a, 2), texttemplate="%{text}", showscale=False,
                        colorscale="RdBu", zmid=0, row=1, col=i)
        fig.update_yaxes(autorange="reversed", showticklabels=False, title="row", row=1, col=i)
        fig.update_xaxes(showticklabels=False, title="column", row=1, col=i)
    m = len(h["Y"])
    fig.update_layout(title=f"F({m},3) on one tile: {h['multiplies']} multiplies instead of "
                            f"{h['direct_multiplies']}; |Y - direct| = {h['max_abs_diff']:.1e}",
                      height=330)
    return fig


ALGO_COLOURS = {"im2col": "#4e79a7", "winograd-f2": "#f28e2b", "winograd-f4": "#e15759",
                "winograd-f4-fused": "#76b7b2", "fft": "#59a14f", "fft-fused": "#b07aa1",
                "onnxruntime": "#9c755f"}


def binding(layer: rl.Layer, algorithm: str, m: rl.Machine) -> tuple[str, float, float]:
    """(the roof that sets the prediction: 'compute' or a level, FLOPs, bytes at that level)."""
    flops, moved = rl.traffic(layer, algorithm, m)
    moved = {lv: b for lv, b in moved.items() if lv in rl.LEVELS and b}
    roofs = {"compute": flops / m.peak_flops} | {lv: b / m.bandwidth[lv] for lv, b in moved.items()}
    top = max(roofs, key=roofs.get)
    level = top if top != "compute" else max(moved, key=lambda lv: moved[lv] / m.bandwidth[lv])
    return top, flops, moved[level]


def roofline_figure(rows, m: rl.Machine):
    """Left: the hierarchical roofline (peak and each level's bandwidth) with every layer and
    candidate at its intensity (FLOPs per byte at the level nearest its roof), predicted
    (open) and measured (filled) GFLOP/s. Right: predicted against measured ms, with the
    +-35% band."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "layers on the roofline (open: predicted, filled: measured)",
        "predicted vs measured ms (band: ±35%)"))
    xs = np.logspace(-1, 3, 50)
    for lv, bw in m.bandwidth.items():
        fig.add_scatter(x=xs, y=np.minimum(xs * bw, m.peak_flops) / 1e9, mode="lines",
                        line={"dash": "dot", "width": 1}, name=f"{lv} {bw / 1e9:.0f} GB/s",
                        row=1, col=1)
    fig.add_scatter(x=xs, y=[m.peak_flops / 1e9] * len(xs), mode="lines",
                    line={"color": "black"}, name=f"peak {m.peak_flops / 1e9:.0f} GFLOP/s",
                    row=1, col=1)
    algos = sorted({a for r in rows for a in r["candidates"]}, key=list(ALGO_COLOURS).index)
    lo = min(min(r["ms"][a], r["predicted_ms"][a]) for r in rows for a in r["candidates"])
    hi = max(max(r["ms"][a], r["predicted_ms"][a]) for r in rows for a in r["candidates"])
    for a in algos:
        pts = [(r, binding(to_layer(r["spec"]), a, m)) for r in rows if a in r["candidates"]]
        inten = [f / b for _, (_, f, b) in pts]
        pred = [f / (r["predicted_ms"][a] * 1e6) for r, (_, f, _) in pts]
        meas = [f / (r["ms"][a] * 1e6) for r, (_, f, _) in pts]
        text = [r["layer"] for r, _ in pts]
        colour = ALGO_COLOURS.get(a)
        fig.add_scatter(x=inten, y=pred, mode="markers", text=text, legendgroup=a,
                        marker={"symbol": "circle-open", "color": colour, "size": 9},
                        name=f"{a} predicted", showlegend=False, row=1, col=1)
        fig.add_scatter(x=inten, y=meas, mode="markers", text=text, legendgroup=a, name=a,
                        marker={"color": colour, "size": 7}, row=1, col=1)
        fig.add_scatter(x=[r["ms"][a] for r, _ in pts], y=[r["predicted_ms"][a] for r, _ in pts],
                        mode="markers", text=text, legendgroup=a, showlegend=False,
                        marker={"color": colour, "size": 7}, row=1, col=2)
    line = np.array([lo / 1.5, hi * 1.5])
    for f, dash in ((1, "solid"), (1 + WITHIN, "dash"), (1 - WITHIN, "dash")):
        fig.add_scatter(x=line, y=line * f, mode="lines", showlegend=False,
                        line={"color": "grey", "dash": dash, "width": 1}, row=1, col=2)
    fig.update_xaxes(type="log", title="FLOPs per byte (at the binding level)", row=1, col=1)
    fig.update_yaxes(type="log", title="GFLOP/s (the algorithm's own FLOPs)", row=1, col=1)
    fig.update_xaxes(type="log", title="measured ms", row=1, col=2)
    fig.update_yaxes(type="log", title="predicted ms", row=1, col=2)
    fig.update_layout(title="Hierarchical roofline: one thread, Conv + ReLU layers",
                      height=560)
    return fig


def picks_figure(rows):
    """Per layer, each candidate's measured ms over the fastest's (1 = fastest), the
    roofline's pick marked; onnxruntime beside."""
    import plotly.graph_objects as go

    names = [r["layer"] for r in rows]
    fig = go.Figure()
    algos = sorted({a for r in rows for a in r["candidates"]} | {"onnxruntime"},
                   key=list(ALGO_COLOURS).index)
    for a in algos:
        fig.add_bar(x=names, y=[r["ms"][a] / r["ms"][r["fastest"]] if a in r["ms"] else None
                                for r in rows], name=a, marker_color=ALGO_COLOURS.get(a))
    fig.add_scatter(x=names, y=[r["pick_over_fastest"] for r in rows], mode="markers",
                    marker={"symbol": "star", "size": 14, "color": "black"},
                    name="roofline's pick")
    ok = sum(r["pick_ok"] for r in rows)
    fig.update_xaxes(title="layer (rank, kernel, channels @ size)")
    fig.update_yaxes(type="log", title="measured time / fastest candidate's (ratio)")
    fig.update_layout(barmode="group", height=520,
                      title=f"Which algorithm the roofline picks: within {PICK_SLACK:.0%} of "
                            f"the fastest on {ok} of {len(rows)} layers")
    return fig


def fused_figure(rows):
    """Three-stage against L3-fused Winograd F(4,3) per 3x3 layer (speed-up of fused), with
    the roofline's predicted speed-up beside."""
    import plotly.graph_objects as go

    rows = [r for r in rows if "winograd-f4-fused" in r["candidates"]]
    names = [r["layer"] for r in rows]
    fig = go.Figure()
    for key, name, colour in (("ms", "measured", "#76b7b2"),
                              ("predicted_ms", "roofline", "#bab0ac")):
        fig.add_bar(x=names, y=[r[key]["winograd-f4"] / r[key]["winograd-f4-fused"] for r in rows],
                    name=name, marker_color=colour)
    fig.add_hline(y=1.3, line_dash="dash", annotation_text="issue's goal 1.3x (<= 64 channels)")
    fig.add_hline(y=1.0, line_color="grey")
    fig.update_layout(barmode="group", height=450,
                      yaxis_title="three-stage ms / fused ms (speed-up)",
                      xaxis_title="layer (rank, kernel, channels @ size)",
                      title="L3-fused against three-stage Winograd F(4,3), 1 thread")
    return fig


def fastest_fft(row) -> str:
    """The faster FFT schedule of a sweep row, measured: "fft", or "fft-fused" where it is a
    candidate (a fused schedule of one group is left out: `candidates`)."""
    return min((a for a in ("fft", "fft-fused") if a in row["candidates"]), key=row["ms"].get)


def fft_figure(rows):
    """Kernels of 5 and 7: FFT's speed-up over im2col and over onnxruntime per layer
    (measured), and the roofline's predicted speed-up over im2col."""
    import plotly.graph_objects as go

    rows = [r for r in rows if r["spec"][4] >= 5]
    names = [r["layer"] for r in rows]

    def speedup(key, over):
        return [r[key][over] / r[key][fastest_fft(r)] for r in rows]

    fig = go.Figure()
    fig.add_bar(x=names, y=speedup("ms", "im2col"), name="over im2col, measured",
                marker_color="#59a14f")
    fig.add_bar(x=names, y=speedup("predicted_ms", "im2col"), name="over im2col, roofline",
                marker_color="#bab0ac")
    fig.add_bar(x=names, y=speedup("ms", "onnxruntime"), name="over onnxruntime, measured",
                marker_color="#9c755f")
    fig.add_hline(y=1.0, line_color="grey")
    fig.update_xaxes(title="layer (rank, kernel, channels @ size)")
    fig.update_yaxes(type="log", title="speed-up of the faster FFT schedule (ratio of ms)")
    fig.update_layout(barmode="group", height=450,
                      title="FFT convolution on tiles (ZNNi's pruning) for 5x5 / 7x7 kernels, "
                            "1 thread")
    return fig
