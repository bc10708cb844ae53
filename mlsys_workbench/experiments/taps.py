"""What notebook 17's section on the tap schedule runs: a Conv as a GEMM that reads its input
in place (compilerkit/lowering/conv_taps.py) against the same GEMM on im2col columns.

    table = tap_table(4, 8)        # a small Conv's krnl.matmul: its taps and A's column table
    rows = measure(LAYERS)         # taps, im2col and onnxruntime per layer, 1 thread
    figure(rows)

The tap schedule computes out^T = X^T W^T. Over the zero-bordered input planes laid out flat,
a kernel tap is a fixed offset and a channel one plane further, so the GEMM's A (output
positions x (channel, tap)) is read where the input lies, through one table entry per column;
im2col first copies every (position, channel, tap) into a column buffer 9 (27 in 3-D) times
the input's size, panel by panel. Both run the same micro-kernel on the same sums, so their
answers are the same bits.

Timing: compilerkit.measure.timing's `best_of`, the three contenders called in turn, `repeat`
rounds in a new random order each, the calling thread's CPU time per call (all three run on
the calling thread at 1 thread), best call kept. plotly is imported inside `figure`.
"""

from __future__ import annotations

import numpy as np

from compilerkit.measure.machine import conv_model
from compilerkit.measure.timing import best_of

# (C in, C out, spatial size, rank[, stride]): 3x3(x3) Convs, pad 1, where the tap schedule
# takes them; at stride 2 it reads the input split by phase (conv_taps._phase_planes)
LAYERS = [(16, 64, 55, 2), (64, 64, 56, 2), (128, 32, 56, 2), (128, 128, 28, 2),
          (256, 256, 14, 2), (64, 64, 56, 2, 2), (128, 128, 56, 2, 2), (32, 32, 32, 3),
          (64, 32, 32, 3)]
SMOKE_LAYERS = [(8, 16, 20, 2), (16, 16, 24, 2, 2), (4, 16, 28, 3)]


def _spec(spec) -> tuple[int, int, int, int, int]:
    """(C in, C out, size, rank, stride) of a layer spec; a ValueError naming the spec where it
    is not 4 or 5 positive whole numbers."""
    values = tuple(spec)
    if len(values) not in (4, 5) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise ValueError(f"tap-schedule layer {spec!r}: expected (C in, C out, size, rank"
                         "[, stride]), positive whole numbers")
    c, k, hw, rank, *rest = values
    return c, k, hw, rank, (rest[0] if rest else 1)


def layer_name(spec) -> str:
    c, k, hw, rank, stride = _spec(spec)
    return f"{rank}d {c}->{k}@{hw}" + (f"/{stride}" if stride > 1 else "")


def _compile(model, taps: bool):
    from compilerkit.pipeline import compile_to

    return compile_to("native", model, conv_algorithm="classic", conv_taps=taps, asm=False)


def tap_table(channels: int = 4, size: int = 14) -> dict:
    """A 3x3 Conv (pad 1) from `channels` to 16 channels (the schedule wants that many,
    conv_taps.MIN_OUT_CHANNELS) on a `size` x `size` plane, lowered with the tap schedule:
    its krnl.matmul's sizes, strides and taps, and the first entries of the table of A's
    columns ((k // 9) * plane + taps[k % 9]) the micro-kernel reads. The schedule takes planes
    of 14 and more (conv_taps.MAX_WASTE); a ValueError says so for smaller ones."""
    from compilerkit.dialects import krnl
    from compilerkit.pipeline import compile_to

    k = compile_to("kernel-ir", conv_model(channels, 16, size, 2, 3),
                   conv_algorithm="classic", conv_taps=True)
    mm = next((op for op in k.walk() if isinstance(op, krnl.MatMulOp) and op.taps), None)
    if mm is None:
        raise ValueError(f"the tap schedule does not take a 3x3 Conv on a {size} x {size} "
                         "plane (its padded border would be more than conv_taps.MAX_WASTE of "
                         "the positions): take a size of 14 or more")
    m, n, kk = krnl.ints_of(mm.sizes)
    return {"sizes": [m, n, kk], "strides": krnl.ints_of(mm.strides), "taps": mm.taps,
            "plane": krnl.ints_of(mm.strides)[1],
            "table": [mm.a_column(j) for j in range(min(kk, 2 * len(mm.taps)))]}


def measure_layer(spec, repeat: int = 7) -> dict:
    """One layer compiled with the tap schedule and with im2col (1 thread), both checked
    against onnxruntime, timed beside it; each one's arena (its buffers) in bytes; whether
    the tap schedule took the layer (`taken`: conv_taps.taps_pay, else both are im2col)."""
    from compilerkit.oracle import ort_session

    c, k, hw, rank, stride = _spec(spec)
    m = conv_model(c, k, hw, rank, 3, stride=stride)
    x = np.random.default_rng(1).standard_normal((1, c) + (hw,) * rank).astype(np.float32)
    sess = ort_session(m.SerializeToString())
    ref = sess.run(None, {"x": x})[0]
    row = {"layer": layer_name(spec), "spec": list(spec), "error": {}, "arena_bytes": {}}
    fns = {"onnxruntime": lambda: sess.run(None, {"x": x})}
    outs = {}
    for name, taps in (("taps", True), ("im2col", False)):
        cm = _compile(m, taps)
        outs[name] = cm.run(x, num_threads=1)[0]
        row["error"][name] = float(np.abs(outs[name] - ref).max() / np.abs(ref).max())
        row["arena_bytes"][name] = int(cm.arena_bytes)
        if taps:
            row["taken"] = any(getattr(op, "taps", None) for op in
                               cm.provenance.modules["kernel-ir"].walk())
        fns[name] = lambda cm=cm: cm.run(x, num_threads=1)
    row["same_bits"] = bool(np.array_equal(outs["taps"], outs["im2col"]))
    row["ms"] = {a: s * 1e3 for a, s in best_of(fns, repeat, "thread", shuffle=0).items()}
    row["speedup"] = row["ms"]["im2col"] / row["ms"]["taps"]
    return row


def measure(specs=LAYERS, repeat: int = 7, progress: bool = False) -> list[dict]:
    """`measure_layer` for each spec (a tqdm bar with `progress`)."""
    from tqdm.auto import tqdm

    return [measure_layer(s, repeat) for s in tqdm(specs, disable=not progress,
                                                   desc="tap schedule")]


def figure(rows):
    """Bars: each layer's milliseconds with the tap schedule, im2col and onnxruntime (1
    thread); beside them, the buffers each compiled layer needs (its arena, MB)."""
    from plotly.subplots import make_subplots

    names = [r["layer"] for r in rows]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.65, 0.35], subplot_titles=(
        "time per call (1 thread)", "buffers (arena)"))
    colours = {"taps": "#59a14f", "im2col": "#4e79a7", "onnxruntime": "#bab0ac"}
    for a in ("taps", "im2col", "onnxruntime"):
        fig.add_bar(x=names, y=[r["ms"][a] for r in rows], name=a, marker_color=colours[a],
                    row=1, col=1)
    for a in ("taps", "im2col"):
        fig.add_bar(x=names, y=[r["arena_bytes"][a] / 2**20 for r in rows], name=a,
                    marker_color=colours[a], showlegend=False, row=1, col=2)
    fig.update_yaxes(title_text="ms (log)", type="log", row=1, col=1)
    fig.update_yaxes(title_text="MB", row=1, col=2)
    fig.update_layout(barmode="group", title="The tap schedule: the GEMM reads the input in "
                      "place, no im2col columns", height=520)
    return fig
