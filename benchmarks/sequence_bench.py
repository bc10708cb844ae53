"""Recurrent and transformer blocks, compilerkit against onnxruntime at 1 and 2 threads.

    python benchmarks/sequence_bench.py                     # every block, 5 rounds
    python benchmarks/sequence_bench.py --blocks lstm_b8_s32_h128,torch_encoder --rounds 3
    python benchmarks/sequence_bench.py --quick             # two small blocks, 2 rounds

The blocks are built here, from seeded weights (nothing downloaded), as exporters emit them:

* `lstm_*`, `gru_*`: one ONNX LSTM / GRU node (opset 17, forward, default activations, a bias,
  Y and Y_h), batch 1, 8 and 64, sequence 32 to 128, hidden 128 and 256.
* `keras_encoder`: a Keras 3 encoder block (MultiHeadAttention, two LayerNormalization layers,
  a Dense feed-forward with the tanh GELU, residuals) exported by tf2onnx through
  `mlsys_datasets.keras_export` (what tf2onnx emits: MatMul/Einsum-free batched MatMul,
  Softmax, ReduceMean/Sub/Pow/Sqrt for LayerNorm, Pow and Tanh for the GELU).
* `torch_encoder`, `torch_decoder`: PyTorch-style blocks written with onnx.helper as
  torch.onnx emits them: a LayerNormalization op, MatMul + Add per projection, Softmax on the
  last axis; the encoder (opset 17) with the Erf GELU, the decoder (opset 20) with the Gelu
  op and a causal mask built from Trilu and Where.

Timing (`compilerkit.measure.timing.best_of`, the project's one timer): per round, each
thread count times compilerkit and onnxruntime (intra-op threads n, inter-op 1, sequential)
interleaved, best of `--repeat` calls each, in a shuffled order; the round's ratio is
onnxruntime's time / compilerkit's (> 1: compilerkit faster). At 1 thread both run on the
calling thread, timed on its CPU clock (time another process takes from the core is left
out); at 2 threads on the wall clock. The table reports the **median of the rounds' ratios**
(the machine is shared: a single timing says little), the spread (min and max ratio), and
the geometric means over the recurrent and the transformer blocks. The load average is
recorded at the start and end of each block. Agreement: max |ck - ort| / max |ort|.

Writes benchmarks/results/sequence_bench.json (the rows, the geomeans, the machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import compilerkit as ck
from compilerkit.measure import timing
from compilerkit.oracle import ort_session

RESULTS = Path(__file__).resolve().parent / "results" / "sequence_bench.json"
THREADS = (1, 2)
AGREE = 1e-3


# ------------------------------------------------------------------------------ the blocks


def recurrent_block(kind: str, batch: int, seq: int, hidden: int, inp: int = 64):
    """One ONNX LSTM or GRU node, forward, with B, returning Y and Y_h (opset 17)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    gates = {"LSTM": 4, "GRU": 3}[kind]
    scale = 1 / math.sqrt(hidden)

    def init(name, *shape):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("W", 1, gates * hidden, inp), init("R", 1, gates * hidden, hidden),
             init("B", 1, 2 * gates * hidden)]
    node = helper.make_node(kind, ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=hidden)
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [node], f"{kind.lower()}_block",
        [helper.make_tensor_value_info("x", f, [seq, batch, inp])],
        [helper.make_tensor_value_info("y", f, [seq, 1, batch, hidden]),
         helper.make_tensor_value_info("y_h", f, [1, batch, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def torch_block(seq: int, d: int, heads: int, causal: bool, opset: int):
    """A pre-LN transformer block as torch.onnx writes one: LayerNormalization, MatMul + Add
    projections, scaled scores, Softmax(-1), MLP with Erf GELU (or the Gelu op at opset 20)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    N = helper.make_node
    inits, nodes = [], []

    def w(name, *shape, scale=None):
        s = scale if scale is not None else 1 / math.sqrt(shape[0])
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    def const(name, value, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    dh = d // heads
    const("heads_shape", [1, seq, heads, dh], np.int64)
    const("back_shape", [1, seq, d], np.int64)
    nodes.append(N("LayerNormalization", ["x", w("ln1_g", d, scale=0.1),
                                          w("ln1_b", d, scale=0.1)], ["ln1"], axis=-1,
                   epsilon=1e-5))
    for p in "qkv":
        nodes += [N("MatMul", ["ln1", w(f"w{p}", d, d)], [f"{p}0"]),
                  N("Add", [f"{p}0", w(f"b{p}", d, scale=0.1)], [f"{p}1"]),
                  N("Reshape", [f"{p}1", "heads_shape"], [f"{p}2"]),
                  N("Transpose", [f"{p}2"], [f"{p}h"],
                    perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    const("scale", 1 / math.sqrt(dh))
    nodes += [N("MatMul", ["qh", "kh"], ["s0"]), N("Mul", ["s0", "scale"], ["s1"])]
    scores = "s1"
    if causal:
        const("ones", np.ones((seq, seq), np.float32))
        const("neg", -np.inf)
        const("zero", 0.0)
        nodes += [N("Trilu", ["ones"], ["tri"], upper=0),
                  N("Equal", ["tri", "zero"], ["masked"]),
                  N("Where", ["masked", "neg", "s1"], ["s2"])]
        scores = "s2"
    nodes += [N("Softmax", [scores], ["p"], axis=-1), N("MatMul", ["p", "vh"], ["o0"]),
              N("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              N("Reshape", ["o1", "back_shape"], ["o2"]),
              N("MatMul", ["o2", w("wo", d, d)], ["o3"]),
              N("Add", ["o3", w("bo", d, scale=0.1)], ["o4"]),
              N("Add", ["x", "o4"], ["r1"]),
              N("LayerNormalization", ["r1", w("ln2_g", d, scale=0.1),
                                       w("ln2_b", d, scale=0.1)], ["ln2"], axis=-1,
                epsilon=1e-5),
              N("MatMul", ["ln2", w("w1", d, 4 * d)], ["f0"]),
              N("Add", ["f0", w("b1", 4 * d, scale=0.1)], ["f1"])]
    if opset >= 20:
        nodes.append(N("Gelu", ["f1"], ["g"]))
    else:
        const("rsqrt2", 1 / math.sqrt(2))
        const("one", 1.0)
        const("half", 0.5)
        nodes += [N("Mul", ["f1", "rsqrt2"], ["e0"]), N("Erf", ["e0"], ["e1"]),
                  N("Add", ["e1", "one"], ["e2"]), N("Mul", ["f1", "e2"], ["e3"]),
                  N("Mul", ["e3", "half"], ["g"])]
    nodes += [N("MatMul", ["g", w("w2", 4 * d, d)], ["f2"]),
              N("Add", ["f2", w("b2", d, scale=0.1)], ["f3"]),
              N("Add", ["r1", "f3"], ["y"])]
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "decoder" if causal else "encoder",
                              [helper.make_tensor_value_info("x", f, [1, seq, d])],
                              [helper.make_tensor_value_info("y", f, [1, seq, d])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def keras_block(seq: int, d: int, heads: int, path: Path):
    """A Keras 3 encoder block (post-LN, as keras_hub's TransformerEncoder), exported by
    tf2onnx through mlsys_datasets.keras_export (deterministic bytes)."""
    from mlsys_datasets import tf_startup  # noqa: F401, I001 - before keras: quiet TF
    import keras
    from mlsys_datasets.keras_export import export_keras

    keras.utils.set_random_seed(3)
    x = keras.Input((seq, d), batch_size=1)
    a = keras.layers.MultiHeadAttention(heads, d // heads)(x, x)
    h = keras.layers.LayerNormalization(epsilon=1e-5)(keras.layers.Add()([x, a]))
    f = keras.layers.Dense(4 * d, activation=lambda t: keras.activations.gelu(
        t, approximate=True))(h)
    f = keras.layers.Dense(d)(f)
    y = keras.layers.LayerNormalization(epsilon=1e-5)(keras.layers.Add()([h, f]))
    export_keras(keras.Model(x, y, name="keras_encoder"), path)
    import onnx

    return onnx.load(str(path))


def _recurrent(kind, batch, seq, hidden):
    return (f"{kind.lower()}_b{batch}_s{seq}_h{hidden}", "recurrent",
            lambda _dir: recurrent_block(kind, batch, seq, hidden))


BLOCKS = dict(
    (name, (family, build)) for name, family, build in [
        *(_recurrent(k, b, s, h) for k in ("LSTM", "GRU")
          for b, s, h in ((1, 128, 128), (8, 32, 128), (64, 32, 128), (8, 64, 256))),
        ("keras_encoder", "transformer", lambda dir_: keras_block(128, 128, 4,
                                                                  dir_ / "keras.onnx")),
        ("torch_encoder", "transformer", lambda _dir: torch_block(128, 256, 4, False, 17)),
        ("torch_decoder", "transformer", lambda _dir: torch_block(64, 128, 4, True, 20)),
    ])
QUICK = ("lstm_b8_s32_h128", "torch_decoder")


# ------------------------------------------------------------------------------ measuring


def rel_error(got, ref) -> float:
    worst = 0.0
    for g, r in zip(got, ref, strict=True):
        r = np.asarray(r, np.float64)
        scale = float(np.max(np.abs(r))) or 1.0
        worst = max(worst, float(np.max(np.abs(np.asarray(g, np.float64) - r))) / scale)
    return worst


def bench_block(name, proto, rounds: int, repeat: int) -> dict:
    row = {"block": name, "family": BLOCKS[name][0], "load_start": timing.load()}
    inp = proto.graph.input[0]
    dims = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    t = time.perf_counter()
    cm = ck.compile(proto, opt_level=3, asm=False, input_shapes={inp.name: dims})
    row["compile_s"] = round(time.perf_counter() - t, 2)
    sessions = {n: ort_session(proto, n) for n in THREADS}
    ref = sessions[1].run(None, {inp.name: x})
    row["rel_error"] = rel_error(cm.run(x, num_threads=1), ref)
    row["agrees"] = row["rel_error"] <= AGREE
    for n in THREADS:
        calls = {"ck": lambda n=n: cm.run(x, num_threads=n),
                 "ort": lambda n=n: sessions[n].run(None, {inp.name: x})}
        clock = "thread" if n == 1 else "wall"
        ratios, ck_ms, ort_ms = [], [], []
        for r in range(rounds):
            best = timing.best_of(calls, repeat, clock_name=clock, shuffle=r)
            ratios.append(best["ort"] / best["ck"])
            ck_ms.append(best["ck"] * 1e3)
            ort_ms.append(best["ort"] * 1e3)
        row[f"ratio_{n}"] = statistics.median(ratios)
        row[f"ratio_{n}_range"] = [min(ratios), max(ratios)]
        row[f"ck_{n}_ms"] = statistics.median(ck_ms)
        row[f"ort_{n}_ms"] = statistics.median(ort_ms)
    row["load_end"] = timing.load()
    return row


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def table(rows) -> str:
    out = ["| block | err | compile s | ck ms 1t | ort ms 1t | ort/ck 1t | ck ms 2t | "
           "ort ms 2t | ort/ck 2t |", "|---" * 9 + "|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['block']} | FAILED: {r['error'][:80]} |" + " |" * 7)
            continue
        out.append(f"| {r['block']} | {r['rel_error']:.1e} | {r['compile_s']} | "
                   f"{r['ck_1_ms']:.2f} | {r['ort_1_ms']:.2f} | {r['ratio_1']:.2f} | "
                   f"{r['ck_2_ms']:.2f} | {r['ort_2_ms']:.2f} | {r['ratio_2']:.2f} |")
    return "\n".join(out)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", default="", help=f"comma-separated, of: {', '.join(BLOCKS)}")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (ratios) per thread count")
    ap.add_argument("--repeat", type=int, default=5, help="best of this many calls per round")
    ap.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK)}, 2 rounds")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    names = [b for b in args.blocks.split(",") if b] or list(QUICK if args.quick else BLOCKS)
    unknown = [b for b in names if b not in BLOCKS]
    if unknown:
        ap.error(f"unknown block(s) {unknown}; choose from {', '.join(BLOCKS)}")
    rounds = 2 if args.quick else args.rounds
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                proto = BLOCKS[name][1](Path(tmp))
                rows.append(bench_block(name, proto, rounds, args.repeat))
            except Exception as error:  # noqa: BLE001 - one block's failure keeps the table
                rows.append({"block": name, "error": f"{type(error).__name__}: {error}"})
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    ok = [r for r in rows if "error" not in r]
    doc = {
        "benchmark": "sequence_bench", "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": sys.version.split()[0], "load_end": timing.load()},
        "method": f"median over {rounds} rounds of best-of-{args.repeat} ratios "
                  "onnxruntime/compilerkit (>1: compilerkit faster), interleaved",
        "rows": rows,
        "geomean": {f"{fam}_{n}t": geomean([r[f"ratio_{n}"] for r in ok if r["family"] == fam])
                    for fam in ("recurrent", "transformer") for n in THREADS},
    }
    print(table(rows))
    print(json.dumps(doc["geomean"]))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main()
