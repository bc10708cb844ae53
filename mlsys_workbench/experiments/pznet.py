"""PZnet's half of notebook 18 and `benchmarks/conv_bench.py --section pznet`: the NCDHW8c
layout picture, and the 3-D U-Net (per layer and whole) at one thread under compilerkit's
"pznet" lowering (lowering/blocked3d.py) and its default, against onnxruntime and
TensorFlow's Conv3D.

Timing: every implementation is called in turn `repeat` times after one untimed call, and
the best process CPU time is kept (TensorFlow runs its ops on its own pool thread even at one
thread, so the calling thread's CPU time would miss them; every library runs on one thread,
so the process's CPU time is that thread's). Ratios come from the same run.

TensorFlow must be held to one thread before it runs anything (`tf_one_thread`); a process
that already ran TensorFlow with more threads gets a RuntimeError naming the fix.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from compilerkit.measure.timing import best_of

LANES = 8
IMPL_COLOURS = {"pznet": "#e15759", "classic": "#76b7b2", "auto": "#59a14f",
                "winograd": "#edc948", "onnxruntime": "#4e79a7", "tensorflow": "#f28e2b"}
# The goals for the whole 3-D U-Net at 64^3, one thread each.
GOAL_VS_ORT, GOAL_VS_TF = 1.0, 3.5
PZNET_CLAIM = ("PZnet (Popovych et al.): CPU-only 3-D ConvNet inference with channels blocked by "
               "the SIMD width and statically scheduled direct convolution is more than 3.5x "
               "faster than MKL TensorFlow and PyTorch on a 3D U-Net")


def unet_layers(side=64, in_channels=4, base_filters=16, depth=4):
    """(name, c_in, c_out, side) of every 3x3x3 Conv of mlsys_datasets.models.unet3d with these
    parameters (its rule: level l runs f -> 2f with f = base * 2^l going down; going up,
    the concat of the skip (f) and the upsampled (f) channels -> f -> f)."""
    out, c = [], in_channels
    for level in range(depth + 1):
        f, s = base_filters * 2 ** level, side // 2 ** level
        out += [(f"enc{level}_conv1", c, f, s), (f"enc{level}_conv2", f, 2 * f, s)]
        c = 2 * f
    for level in reversed(range(depth)):
        f, s = base_filters * 2 ** (level + 1), side // 2 ** level
        out += [(f"dec{level}_conv1", 2 * f, f, s), (f"dec{level}_conv2", f, f, s)]
    return out


def conv_flops(c_in, c_out, side, k=3) -> int:
    return 2 * c_in * c_out * k ** 3 * side ** 3


def layer_model(c_in, c_out, side, seed=0):
    """One 3x3x3 'same' Conv + ReLU as ONNX (NCDHW), seeded He-scaled weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((c_out, c_in, 3, 3, 3)) * math.sqrt(2 / (27 * c_in)))
    b = rng.standard_normal(c_out) * 0.1
    inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
             numpy_helper.from_array(b.astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 6),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "conv3d", [helper.make_tensor_value_info(
        "x", 1, [1, c_in, side, side, side])], [helper.make_tensor_value_info("z", 1, None)],
        inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def tf_one_thread():
    """TensorFlow held to one intra- and one inter-op thread; returns the module."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass  # already initialised: fine only if it was at one thread
    got = (tf.config.threading.get_intra_op_parallelism_threads(),
           tf.config.threading.get_inter_op_parallelism_threads())
    if got != (1, 1):
        raise RuntimeError(f"TensorFlow already runs with (intra, inter) threads {got}: call "
                           "experiments.pznet.tf_one_thread() before TensorFlow runs anything "
                           "(restart the kernel)")
    return tf


def _tf_layer(c_in, c_out, side, seed=0):
    tf = tf_one_thread()
    keras = tf.keras
    m = keras.Sequential([keras.Input((side, side, side, c_in)),
                          keras.layers.Conv3D(c_out, 3, padding="same", activation="relu")])
    x = tf.constant(np.random.default_rng(seed).standard_normal(
        (1, side, side, side, c_in)).astype(np.float32))
    f = tf.function(lambda v: m(v, training=False))
    return lambda: f(x).numpy()


def _tf_model(keras_model, shape, seed=0):
    tf = tf_one_thread()
    x = tf.constant(np.random.default_rng(seed).standard_normal((1, *shape)).astype(np.float32))
    f = tf.function(lambda v: keras_model(v, training=False))
    return lambda: f(x).numpy()


def best_times(fns: dict, repeat: int) -> dict:
    """Best process CPU time of each callable, called in turn `repeat` times (after one
    untimed call each)."""
    return best_of(fns, repeat, "process")


def _compiled(model, algorithms, x, ref, input_shapes=None):
    """name -> run callable for each conv_algorithm, checking agreement with `ref`."""
    import compilerkit as ck

    fns, errors, compile_s = {}, {}, {}
    for a in algorithms:
        t = time.perf_counter()
        cm = ck.compile(model, asm=False, num_threads=1, conv_algorithm=a,
                        input_shapes=input_shapes)
        compile_s[a] = time.perf_counter() - t
        got = cm.run(x)[0]
        errors[a] = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        fns[a] = (lambda cm=cm: cm.run(x))
    return fns, errors, compile_s


def measure_layers(layers, algorithms=("pznet", "classic"), repeat=3, tensorflow=True,
                   progress=True):
    """Per Conv layer (unet_layers rows): best times of compilerkit under each algorithm,
    onnxruntime and (if `tensorflow`) Keras Conv3D, GFLOP/s, and errors against onnxruntime."""
    from tqdm.auto import tqdm

    from compilerkit.oracle import ort_session

    rows = []
    for name, c_in, c_out, side in tqdm(layers, desc="layers", disable=not progress):
        model = layer_model(c_in, c_out, side)
        x = np.random.default_rng(1).standard_normal((1, c_in, side, side, side)).astype(
            np.float32)
        sess = ort_session(model.SerializeToString())
        ref = sess.run(None, {"x": x})[0]
        fns, errors, _ = _compiled(model, algorithms, x, ref)
        fns["onnxruntime"] = lambda s=sess, x=x: s.run(None, {"x": x})
        if tensorflow:
            fns["tensorflow"] = _tf_layer(c_in, c_out, side)
        t = best_times(fns, repeat)
        flops = conv_flops(c_in, c_out, side)
        rows.append({"layer": name, "c_in": c_in, "c_out": c_out, "side": side,
                     "seconds": t, "gflops": {k: flops / v / 1e9 for k, v in t.items()},
                     "max_rel_error": errors})
    return rows


def measure_net(onnx_model, keras_model=None, algorithms=("pznet", "classic"), repeat=3,
                progress=False):
    """The whole net: best times of compilerkit per algorithm, onnxruntime and (given the
    Keras model) TensorFlow, ratios against both references, errors and compile times.
    `progress`: a bar over its two stages, compiling and timing (about a minute in all for
    the full-size 3-D U-Net)."""
    import onnx
    from tqdm.auto import tqdm

    from compilerkit.oracle import ort_session

    proto = onnx_model if isinstance(onnx_model, onnx.ModelProto) else onnx.load(
        str(onnx_model))
    inp = proto.graph.input[0]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = ort_session(proto.SerializeToString())
    ref = sess.run(None, {inp.name: x})[0]
    with tqdm(total=2, desc="whole net: compiling", unit="stage", disable=not progress) as bar:
        fns, errors, compile_s = _compiled(proto, algorithms, x, ref, {inp.name: shape})
        fns["onnxruntime"] = lambda: sess.run(None, {inp.name: x})
        if keras_model is not None:
            fns["tensorflow"] = _tf_model(keras_model, tuple(keras_model.input.shape[1:]))
        bar.update()
        bar.set_description("whole net: timing")
        load_before = os.getloadavg()
        t = best_times(fns, repeat)
        bar.update()
    res = {"input": shape, "seconds": t, "max_rel_error": errors, "compile_s": compile_s,
           "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
           "over_onnxruntime": {a: t["onnxruntime"] / t[a] for a in algorithms}}
    if "tensorflow" in t:
        res["over_tensorflow"] = {a: t["tensorflow"] / t[a] for a in algorithms}
    return res


# ------------------------------------------------------------------------------ figures


def layout_figure(channels=10, voxels=4):
    """Where each (channel, voxel) value sits in memory, address by address, NCDHW against
    NCDHW8c (rows of 8 addresses: one AVX2 vector). Colour: channel; label: c<channel>/v<voxel>;
    grey: the zero lanes padding the last block."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    blocks = -(-channels // LANES)
    plain = [(c, v) for c in range(channels) for v in range(voxels)]
    blocked = [(cb * LANES + j if cb * LANES + j < channels else None, v)
               for cb in range(blocks) for v in range(voxels) for j in range(LANES)]
    fig = make_subplots(1, 2, subplot_titles=(
        f"NCDHW: channel-major ({channels} channels x {voxels} voxels)",
        "NCDHW8c: 8 channels of one voxel per vector"), horizontal_spacing=0.08)
    for col, cells in ((1, plain), (2, blocked)):
        rows = -(-len(cells) // LANES)
        z = np.full((rows, LANES), np.nan)
        text = np.full((rows, LANES), "", dtype=object)
        for a, (c, v) in enumerate(cells):
            z[a // LANES, a % LANES] = -1 if c is None else c
            text[a // LANES, a % LANES] = "0" if c is None else f"c{c}/v{v}"
        fig.add_trace(go.Heatmap(z=z, text=text, texttemplate="%{text}", showscale=False,
                                 colorscale=[[0, "#dddddd"], [0.0001, "#4e79a7"],
                                             [1, "#e15759"]], zmin=-1, zmax=channels - 1,
                                 hovertemplate="address %{y}*8+%{x}: %{text}<extra></extra>"),
                      1, col)
        fig.update_yaxes(autorange="reversed", title_text="address // 8", row=1, col=col)
        fig.update_xaxes(title_text="address % 8", row=1, col=col)
    fig.update_layout(title="PZnet's blocked layout: one vector load gives 8 output channels",
                      height=520)
    return fig


def layers_figure(rows):
    """GFLOP/s per U-Net layer and implementation (grouped bars). FLOPs are the direct
    Conv's (2 C K 27 voxels) for every implementation, so Winograd (what "pznet" gives the
    Convs of more than blocked3d.MAX_CHANNELS input channels, via "auto") can pass the
    machine's peak: it is time, in the direct Conv's units."""
    import plotly.graph_objects as go

    fig = go.Figure()
    names = [f"{r['layer']} {r['c_in']}->{r['c_out']}@{r['side']}" for r in rows]
    for impl in rows[0]["gflops"]:
        fig.add_trace(go.Bar(name=impl, x=names, y=[r["gflops"][impl] for r in rows],
                             marker_color=IMPL_COLOURS.get(impl)))
    fig.update_layout(barmode="group", title="3-D U-Net Convs (3x3x3 + ReLU), one thread",
                      xaxis_title="layer (C in -> C out @ cube side in voxels)",
                      yaxis_title="direct-Conv GFLOP/s (best process CPU time)")
    return fig


def net_figure(res):
    """Whole-net throughput (volumes per second) per implementation, ratios in the labels."""
    import plotly.graph_objects as go

    t = res["seconds"]
    impls = list(t)
    ort = t["onnxruntime"]
    tf_s = t.get("tensorflow")
    labels = [f"{ort / t[k]:.2f}x ORT" + (f", {tf_s / t[k]:.2f}x TF" if tf_s else "")
              for k in impls]
    fig = go.Figure(go.Bar(x=impls, y=[1 / t[k] for k in impls], text=labels,
                           marker_color=[IMPL_COLOURS.get(k) for k in impls]))
    fig.update_layout(title=f"3-D U-Net {res['input']}, one thread: whole net",
                      xaxis_title="implementation",
                      yaxis_title="volumes per second (1 / best process CPU s)")
    return fig


def bench(size="full", algorithms=("pznet", "classic", "auto", "winograd"), repeat=3,
          layers=True, progress=True) -> dict:
    """benchmarks/conv_bench.py --section pznet: the real-weight 3-D U-Net (mlsys_datasets
    real_weights "unet3d" at `size`: "full" is 64^3, 4 modalities, base 16 filters, depth 4;
    "small" 32^3, base 8, depth 3) and, with `layers`, each of its 3x3x3 Convs alone."""
    tf_one_thread()  # before anything runs TensorFlow
    from mlsys_datasets import models
    from mlsys_datasets import real_weights as rw

    params = rw.RECIPES["unet3d"][size]
    path = rw.real_weight_model("unet3d", size, progress=progress)
    keras_model = models.unet3d(**params, seed=rw.SEED)
    net = measure_net(path, keras_model, algorithms, repeat)
    out = {"model": f"unet3d ({size}: {params})", "threads": 1,
           "timer": "process CPU time, best of repeat, in turn", "repeat": repeat,
           "net": net, "goals": {
               "over_onnxruntime_ge_1.0": {a: v >= GOAL_VS_ORT
                                           for a, v in net["over_onnxruntime"].items()},
               "over_tensorflow_ge_3.5": {a: v >= GOAL_VS_TF
                                          for a, v in net["over_tensorflow"].items()}}}
    if layers:
        lay = unet_layers(params["side"], params["in_channels"], params["base_filters"],
                          params["depth"])
        out["layers"] = measure_layers(lay, algorithms[:2], repeat, progress=progress)
    return out


__all__ = ["unet_layers", "layer_model", "measure_layers", "measure_net", "layout_figure",
           "layers_figure", "net_figure", "bench", "tf_one_thread", "PZNET_CLAIM"]
