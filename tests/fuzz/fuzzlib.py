"""The compilerkit fuzz harness: careless and hostile inputs, each compiled and run in a worker
*process*, checked against onnxruntime (or the kit's own reference).

Cases (`make_cases`, shares in SHARES):
- `graph_cases`: small graphs drawn by a hypothesis strategy (`graphs`): chains of 1-4 nodes
  from ~25 op templates whose shapes, attributes and constants are mostly valid and sometimes
  not (a wrong contraction size, an axis out of range, indices out of range, a divisor of 0);
  one in five runs on special values (NaN, +-inf, subnormals, +-0, 1e30, INT_MIN, INT_MAX).
- `mutation_cases`: the mlsys_datasets models (datasets/mlsys_datasets/onnx) with one mutation:
  an input/output/value_info shape, a dtype, an attribute, an initializer, the opset, a node
  dropped or a tensor given two producers, the bytes truncated or flipped.
- axes_models.py: integer graphs (int32/int64 Add/Sub/Mul/Div/Mod/MatMul, Cast float <-> int),
  Convs under every `conv_algorithm` and both code generators (some on the emulated s390x /
  ppc64), and `schedule=` strings, valid and mutated.
- axes_tasks.py: hand-edited Kernel IR, command lines, forked and RLIMIT_AS-limited children,
  segkit and lmskit inputs, and (`memory_probe`, once per `make fuzz`) RSS over many compiles.
How a model case is judged (the classes below) is classify.py.

Property, per case: the worker process survives, and compilerkit either raises one of its own
errors (a class defined in a `compilerkit` module) with a message naming its culprit, or its
outputs match onnxruntime's (NaN where onnxruntime has NaN, and only there). Classes:
    refused   compilerkit raised its own error, and onnxruntime refuses too       fine
    declined  an honest "not supported" (UnsupportedOpError, the compile budget,
              the emulator's limit) of a model onnxruntime runs                    fine
    match     outputs match onnxruntime (or the reference)                         fine
    accepted  a task's mutation that need not be refused was accepted              fine
    undefined a float -> int cast of NaN / inf / out-of-range values differs
              (undefined in ONNX; onnxruntime's answer depends on the graph)      listed
    ort_refuses  compilerkit ran, onnxruntime refused the model or the data        listed
    ort_differs  special data: onnxruntime differs, compilerkit agrees with ONNX's
              reference evaluator (not for all-constant graphs: folding is it)     listed
    ort_death    compilerkit ran, onnxruntime killed the process (INT_MIN/-1)      listed
    death     the process died while compilerkit compiled or ran                   FAIL
    hang      ... or did not finish within the time limit                          FAIL
    wrong     both ran and the outputs differ, or bad input was accepted silently FAIL
    unclear   an error that is not compilerkit's own, or whose message names nothing FAIL
    false_refusal  compilerkit refused (as invalid, at compile or run time) a model
              and data onnxruntime runs                                           FAIL
    overwrite a file the user did not name was written over                       FAIL
    leak      native memory grew past the bound over many compiles                FAIL
Every refusal goes to onnxruntime: with the compiled signature's data when there is one, else
with data for the model's declared inputs. INT_MIN / -1 is refused by design (onnxruntime's
answer is undefined: SIGFPE in one kernel, a wrapped INT_MIN in another). A case whose compile
*options* are wrong on purpose (`options_bad`: a schedule string, input_shapes) must be refused
naming the option, and is no question for onnxruntime.

Why here (tests/fuzz/) and not in compilerkit: this is test tooling on dev dependencies
(hypothesis, the datasets models, waterz); the suite's sample (test_fuzz.py) and
`make fuzz N=...` (`python tests/fuzz/fuzzlib.py`, writing benchmarks/results/fuzz.json) both
import it.

Workers are long-lived (`python fuzzlib.py --worker`): a case goes in on stdin (pickled), the
worker reports each phase before it starts, then the result; a worker that dies or passes the
time limit is blamed for the case it was running (with its phase and the tail of its stderr)
and replaced. A worker's address space is capped (`--memory-gib`) so a runaway allocation
fails inside it instead of taking the machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import platform
import random
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:  # the axes modules beside this one, however it was imported
    sys.path.insert(0, str(HERE))
CLASSES = ("refused", "declined", "match", "accepted", "undefined", "ort_refuses", "ort_death",
           "ort_differs", "warned", "death", "hang", "wrong", "unclear", "false_refusal",
           "overwrite", "leak")
FAILURES = ("death", "hang", "wrong", "unclear", "false_refusal", "overwrite", "leak")
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MEMORY_GIB = 6.0
SELF_TEST_KILL = b"fuzzlib self-test: kill the worker"
EOF = object()  # what Worker._read returns when the worker's output ends


# ---- cases: hypothesis-drawn graphs ------------------------------------------------------------

def _graph_strategy():
    from hypothesis import strategies as st
    from onnx import TensorProto, helper, numpy_helper

    F = TensorProto.FLOAT

    def arr(a, name):
        return numpy_helper.from_array(np.asarray(a), name)

    @st.composite
    def graphs(draw):
        rank = draw(st.integers(1, 4))
        x_shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
        inputs = [helper.make_tensor_value_info("x", F, x_shape)]
        nodes, inits = [], []
        known = {"x": (F, list(x_shape))}
        last = "x"
        bad = st.integers(0, 9).map(lambda v: v == 0)  # one time in ten: a wrong parameter
        for k in range(draw(st.integers(1, 4))):
            x = draw(st.sampled_from(sorted(known))) if draw(st.booleans()) else last
            elem, shape = known[x]
            r = len(shape)
            out = f"t{k}"
            if r == 0:  # a scalar: only the ops that take one
                op = draw(st.sampled_from(["unary", "binary", "cast", "unsqueeze"] if elem == F
                                          else ["cast", "unsqueeze"]))
            else:
                op = draw(st.sampled_from(OPS if elem == F else INT_OPS))
            new_nodes = []
            if op == "unary":
                kind = draw(st.sampled_from(
                    ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Floor", "Ceil", "Sqrt",
                     "Log", "Reciprocal", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Softplus",
                     "Softsign", "Identity"]))
                attrs = {}
                if kind in ("LeakyRelu", "Elu") and draw(st.booleans()):
                    attrs["alpha"] = draw(st.sampled_from([0.1, 0.5, 2.0]))
                new_nodes.append(helper.make_node(kind, [x], [out], **attrs))
            elif op == "binary":
                kind = draw(st.sampled_from(["Add", "Sub", "Mul", "Div"]))
                if draw(bad):
                    other = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
                else:
                    tail = shape[r - draw(st.integers(0, r)):]
                    other = [d if draw(st.booleans()) else 1 for d in tail]
                name = f"c{k}"
                if draw(st.booleans()):
                    value = draw(st.sampled_from([0.5, -2.0, 3.0, 0.0]))
                    inits.append(arr(np.full(other, value, np.float32), name))
                else:
                    inputs.append(helper.make_tensor_value_info(name, F, other))
                new_nodes.append(helper.make_node(kind, [x, name] if draw(st.booleans())
                                                  else [name, x], [out]))
            elif op == "int_div":
                dt = draw(st.sampled_from([TensorProto.INT32, TensorProto.INT64]))
                q = f"q{k}"
                inputs.append(helper.make_tensor_value_info(q, dt, shape))
                new_nodes += [helper.make_node("Cast", [x], [f"i{k}"], to=dt),
                              helper.make_node(draw(st.sampled_from(["Div", "Div", "Mod"])),
                                               [f"i{k}", q], [out])]
            elif op == "matmul":
                kk = shape[-1] if not draw(bad) else shape[-1] + 1
                n = draw(st.integers(1, 4))
                inits.append(arr(np.linspace(-1, 1, kk * n, dtype=np.float32).reshape(kk, n),
                                 f"w{k}"))
                new_nodes.append(helper.make_node("MatMul", [x, f"w{k}"], [out]))
            elif op == "gemm":
                if r != 2:
                    continue
                ta, tb = draw(st.booleans()), draw(st.booleans())
                kk = shape[0] if ta else shape[1]
                kk = kk if not draw(bad) else kk + 2
                n = draw(st.integers(1, 4))
                w = np.linspace(-1, 1, kk * n, dtype=np.float32).reshape((n, kk) if tb
                                                                        else (kk, n))
                inits += [arr(w, f"w{k}"), arr(np.ones(n, np.float32), f"b{k}")]
                new_nodes.append(helper.make_node("Gemm", [x, f"w{k}", f"b{k}"], [out],
                                                  transA=int(ta), transB=int(tb),
                                                  alpha=draw(st.sampled_from([1.0, 0.5])),
                                                  beta=draw(st.sampled_from([1.0, 2.0]))))
            elif op == "softmax":
                axis = draw(st.integers(-r - 1, r)) if draw(bad) else draw(st.integers(-r, r - 1))
                new_nodes.append(helper.make_node(draw(st.sampled_from(
                    ["Softmax", "LogSoftmax"])), [x], [out], axis=axis))
            elif op == "transpose":
                perm = draw(st.permutations(range(r)))
                if draw(bad):
                    perm = draw(st.lists(st.integers(-1, r), min_size=max(1, r - 1),
                                         max_size=r + 1))
                new_nodes.append(helper.make_node("Transpose", [x], [out], perm=list(perm)))
            elif op == "reshape":
                n = int(np.prod(shape))
                target = draw(st.sampled_from([[n], [1, n], [n, 1], [-1], [0, -1], [-1, 1]]))
                if draw(bad):
                    target = draw(st.sampled_from([[n + 1], [-1, -1], [0, 0, 0, 0, 0], [2 * n],
                                                   [-2], [n, 0]]))
                inits.append(arr(np.array(target, np.int64), f"s{k}"))
                new_nodes.append(helper.make_node("Reshape", [x, f"s{k}"], [out]))
            elif op == "flatten":
                axis = draw(st.integers(-r - 2, r + 1)) if draw(bad) else draw(st.integers(-r, r))
                new_nodes.append(helper.make_node("Flatten", [x], [out], axis=axis))
            elif op == "concat":
                axis = draw(st.integers(-r - 1, r)) if draw(bad) else draw(st.integers(-r, r - 1))
                new_nodes.append(helper.make_node("Concat", [x, x], [out], axis=axis))
            elif op == "slice":
                axes = draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r, unique=True))
                starts = [draw(st.integers(-5, 5)) for _ in axes]
                ends = [draw(st.sampled_from([-5, -1, 0, 1, 2, 3, 5, 2**62])) for _ in axes]
                steps = [draw(st.sampled_from([1, 1, 2, -1] + ([0] if draw(bad) else [])))
                         for _ in axes]
                for name, v in (("st", starts), ("en", ends), ("ax", axes), ("sp", steps)):
                    inits.append(arr(np.array(v, np.int64), f"{name}{k}"))
                new_nodes.append(helper.make_node(
                    "Slice", [x, f"st{k}", f"en{k}", f"ax{k}", f"sp{k}"], [out]))
            elif op == "gather":
                axis = draw(st.integers(-r, r - 1))
                d = max(shape[axis], 1)  # an empty axis: every index is out of range
                n_idx = draw(st.integers(1, 3))
                if draw(st.booleans()):
                    lo, hi = (-d, d - 1) if not draw(bad) else (-d - 2, d + 1)
                    idx = [draw(st.integers(lo, hi)) for _ in range(n_idx)]
                    inits.append(arr(np.array(idx, np.int64), f"g{k}"))
                else:  # indices from data: the run-time guard
                    inputs.append(helper.make_tensor_value_info(f"g{k}", TensorProto.INT64,
                                                                [n_idx]))
                new_nodes.append(helper.make_node("Gather", [x, f"g{k}"], [out], axis=axis))
            elif op == "reduce":
                kind = draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax"]))
                axes = draw(st.lists(st.integers(-r, r - 1), min_size=0, max_size=r,
                                     unique=True))
                if draw(bad):
                    axes = axes + [r]
                keep = int(draw(st.booleans()))
                if kind == "ReduceSum":
                    ins = [x]
                    if axes:
                        inits.append(arr(np.array(axes, np.int64), f"a{k}"))
                        ins.append(f"a{k}")
                    new_nodes.append(helper.make_node(kind, ins, [out], keepdims=keep))
                else:
                    attrs = {"axes": axes} if axes else {}
                    new_nodes.append(helper.make_node(kind, [x], [out], keepdims=keep, **attrs))
            elif op in ("conv", "pool"):
                if r != 4:
                    continue
                c = shape[1]
                kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
                strides = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
                pads = [draw(st.integers(0, 1)) for _ in range(4)]
                if draw(bad):
                    pads = [draw(st.integers(-1, 4)) for _ in range(4)]
                    strides = [draw(st.integers(0, 2)), 1]
                if op == "conv":
                    group = draw(st.sampled_from([1, 1, c, 2]))
                    m = draw(st.integers(1, 3)) * (group if group > 0 else 1)
                    cin = c // group if group and c % group == 0 else c
                    if draw(bad):
                        cin += 1
                    w = np.linspace(-1, 1, m * cin * kh * kw, dtype=np.float32)
                    inits.append(arr(w.reshape(m, cin, kh, kw), f"w{k}"))
                    new_nodes.append(helper.make_node("Conv", [x, f"w{k}"], [out],
                                                      strides=strides, pads=pads, group=group))
                else:
                    kind = draw(st.sampled_from(["MaxPool", "AveragePool"]))
                    new_nodes.append(helper.make_node(kind, [x], [out], kernel_shape=[kh, kw],
                                                      strides=strides, pads=pads))
            elif op == "cast":
                to = draw(st.sampled_from([TensorProto.DOUBLE, TensorProto.INT32,
                                           TensorProto.INT64, TensorProto.FLOAT]))
                new_nodes.append(helper.make_node("Cast", [x], [out], to=to))
            elif op == "clip":
                lo, hi = draw(st.sampled_from([(-1.0, 1.0), (0.0, 6.0), (2.0, -2.0)]))
                inits += [arr(np.float32(lo), f"lo{k}"), arr(np.float32(hi), f"hi{k}")]
                new_nodes.append(helper.make_node("Clip", [x, f"lo{k}", f"hi{k}"], [out]))
            elif op == "pad":
                pads = [draw(st.integers(0, 2)) for _ in range(2 * r)]
                if draw(bad):
                    pads[0] = -shape[0] - 1
                inits.append(arr(np.array(pads, np.int64), f"p{k}"))
                new_nodes.append(helper.make_node("Pad", [x, f"p{k}"], [out], mode=draw(
                    st.sampled_from(["constant", "edge", "reflect"]))))
            elif op == "unsqueeze":
                axis = draw(st.integers(-r - 1, r)) if not draw(bad) else r + 2
                inits.append(arr(np.array([axis], np.int64), f"u{k}"))
                new_nodes.append(helper.make_node("Unsqueeze", [x, f"u{k}"], [out]))
            elif op == "tile":
                reps = [draw(st.integers(1, 2)) for _ in range(r)]
                if draw(bad):
                    reps = draw(st.sampled_from([reps[:-1] or [0, 1], [100000] * r,
                                                 [-1] + reps[1:]]))
                inits.append(arr(np.array(reps, np.int64), f"r{k}"))
                new_nodes.append(helper.make_node("Tile", [x, f"r{k}"], [out]))
            elif op == "expand":
                target = [draw(st.integers(1, 3))] + [d if draw(st.booleans()) else 1
                                                      for d in shape]
                if draw(bad):
                    target[-1] = shape[-1] + 1
                inits.append(arr(np.array(target, np.int64), f"e{k}"))
                new_nodes.append(helper.make_node("Expand", [x, f"e{k}"], [out]))
            elif op == "batchnorm":
                if r < 2:
                    continue
                c = shape[1] if not draw(bad) else shape[1] + 1
                for name, v in (("sc", 1.5), ("bi", 0.25), ("me", 0.5), ("va", 2.0)):
                    inits.append(arr(np.full(c, v, np.float32), f"{name}{k}"))
                new_nodes.append(helper.make_node(
                    "BatchNormalization", [x, f"sc{k}", f"bi{k}", f"me{k}", f"va{k}"], [out]))
            elif op == "constant_of_shape":
                dims = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(1, 3)))]
                if draw(bad):  # a 150-byte model asking for 40 GB: a compile budget matter
                    dims = draw(st.sampled_from([[100000, 100000], [-1, 2], [2**62]]))
                inits.append(arr(np.array(dims, np.int64), f"k{k}"))
                new_nodes.append(helper.make_node(
                    "ConstantOfShape", [f"k{k}"], [out],
                    value=helper.make_tensor("v", F, [1], [draw(st.sampled_from([0.0, 2.5]))])))
            nodes += new_nodes
            inferred = _infer(nodes, inputs, inits)
            if out not in inferred:
                last = out
                known = {}
                break
            known[out] = inferred[out]
            last = out
        declared = known.get(last)
        if declared is not None and draw(bad):  # a declared output shape that is wrong
            declared = (declared[0], [d + 1 for d in declared[1]] or [2])
        outputs = [helper.make_tensor_value_info(last, *declared) if declared is not None
                   else helper.make_empty_tensor_value_info(last)]
        # Every other result no node reads is an output too: no dead node (compilerkit drops
        # dead nodes, onnxruntime runs them, so a fault in one would not be comparable).
        read = {i for n in nodes for i in n.input}
        for n in nodes:
            for o in n.output:
                if o != last and o not in read and o in known:
                    outputs.append(helper.make_tensor_value_info(o, *known[o]))
        if not nodes:
            nodes = [helper.make_node("Relu", ["x"], ["y"])]
            outputs = [helper.make_tensor_value_info("y", F, x_shape)]
        used = {i for n in nodes for i in n.input}
        inputs = [i for i in inputs if i.name in used]
        graph = helper.make_graph(nodes, "fuzz", inputs, outputs,
                                  [i for i in inits if i.name in used])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        return model

    return graphs()


OPS = ["unary", "binary", "binary", "int_div", "matmul", "gemm", "softmax", "transpose",
       "reshape", "flatten", "concat", "slice", "gather", "gather", "reduce", "conv", "pool",
       "cast", "clip", "pad", "unsqueeze", "tile", "expand", "batchnorm", "constant_of_shape"]
INT_OPS = ["reshape", "transpose", "concat", "slice", "gather", "cast", "unsqueeze", "tile",
           "expand", "flatten"]


def _infer(nodes, inputs, inits) -> dict:
    """name -> (elem type, shape) for the values onnx's shape inference types fully."""
    import onnx
    from onnx import helper

    g = helper.make_graph(nodes, "probe", inputs, [], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    except Exception:  # noqa: BLE001 (an invalid node ends the chain)
        return {}
    out = {}
    for vi in m.graph.value_info:
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            out[vi.name] = (tt.elem_type, [d.dim_value for d in tt.shape.dim])
    return out


def graph_cases(n: int, seed: int) -> list[dict]:
    """n hypothesis-drawn graph models (fixed by `seed`)."""
    if n <= 0:
        return []
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    drawn = []

    @hseed(seed)
    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(_graph_strategy())
    def collect(model):
        drawn.append(model)

    collect()
    rng = random.Random(seed)
    cases = []
    for k, model in enumerate(drawn[:n]):
        ops = ",".join(node.op_type for node in model.graph.node)
        # One graph in twenty runs on an emulated big-endian target: the run-time guards and
        # the byte order must agree there too.
        target = rng.choice(["s390x", "ppc64"]) if rng.random() < 0.05 else "host"
        cases.append({"source": "graph", "desc": f"graph {k} on {target}: {ops}",
                      "model": model.SerializeToString(), "input_shapes": None,
                      "opt_level": rng.choice([0, 1, 2, 3]), "seed": rng.randrange(1 << 30),
                      "target": target})
    return cases


# ---- cases: mutations of the datasets models ---------------------------------------------------

# The models and how often each is the base (the Keras exports are slow to compile).
BASES = {"matmul_16x16": 6, "broadcast_elementwise": 6, "gemm_mlp": 5, "dynamic_batch_mlp": 5,
         "conv_bn_pool": 4, "lenet": 1, "mlp": 1, "small_resnet": 1, "unet3d_tiny": 1}
MUTATIONS = ("input_shape", "output_shape", "value_info", "dtype", "attribute", "initializer",
             "truncate", "random_bytes", "drop_node", "two_producers", "opset", "input_shapes",
             "external_data", "none")
ODD = [-1, 0, 1, 2, 3, 5, 7, 64, 2**31, 10**9, -(2**40)]


def _load_bases():
    import onnx
    from mlsys_datasets.zoo import onnx_path

    return {name: onnx.load(str(onnx_path(name))) for name in BASES}


def _static_shapes(model):
    """input_shapes fixing every symbolic dimension to 1 (None when all are static)."""
    inits = {i.name for i in model.graph.initializer}
    shapes, dynamic = {}, False
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            dynamic |= not d.HasField("dim_value")
            dims.append(d.dim_value if d.HasField("dim_value") else 1)
        shapes[vi.name] = dims
    return shapes if dynamic else None


def mutate(model, rng: random.Random):
    """(model bytes, description, input_shapes) for one mutation of a copy of `model`."""
    import onnx
    from onnx import TensorProto, helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    shapes = _static_shapes(m)
    kind = rng.choice(MUTATIONS)
    desc = kind
    tensors = [vi for vi in g.input if vi.name not in {i.name for i in g.initializer}]
    if kind == "input_shape" and tensors:
        vi = rng.choice(tensors)
        dims = vi.type.tensor_type.shape.dim
        d = rng.randrange(len(dims)) if len(dims) else None
        if d is not None:
            dims[d].dim_value = rng.choice(ODD[:8])
            desc = f"input {vi.name!r} dim {d} = {dims[d].dim_value}"
            if shapes and vi.name in shapes:
                shapes[vi.name][d] = dims[d].dim_value
    elif kind == "output_shape":
        vi = rng.choice(list(g.output))
        tt = vi.type.tensor_type
        if rng.random() < 0.3:
            tt.shape.dim.add().dim_value = rng.choice([1, 2, 3])
            desc = f"output {vi.name!r}: an extra dim"
        elif len(tt.shape.dim):
            d = rng.randrange(len(tt.shape.dim))
            tt.shape.dim[d].dim_value = rng.choice([1, 2, 3, 7, 100])
            desc = f"output {vi.name!r} dim {d} = {tt.shape.dim[d].dim_value}"
    elif kind == "value_info":
        inner = [o for n in g.node for o in n.output if o not in {v.name for v in g.output}]
        if inner:
            name = rng.choice(inner)
            rank = rng.randint(0, 4)
            dims = [rng.choice([1, 2, 3, 4, 8, 16, 1000]) for _ in range(rank)]
            elem = rng.choice([TensorProto.FLOAT] * 3 + [TensorProto.INT64, TensorProto.DOUBLE])
            del g.value_info[:]
            g.value_info.append(helper.make_tensor_value_info(name, elem, dims))
            desc = f"value_info {name!r}: {elem}{dims}"
    elif kind == "dtype":
        pool = list(g.input) + list(g.output) + list(g.initializer)
        target = rng.choice(pool)
        new = rng.choice([TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE,
                          TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.UINT8,
                          TensorProto.STRING, 0, 99])
        if hasattr(target, "data_type"):
            target.data_type = new
        else:
            target.type.tensor_type.elem_type = new
        desc = f"dtype of {target.name!r} = {new}"
    elif kind == "attribute":
        with_attrs = [n for n in g.node if n.attribute]
        if with_attrs:
            node = rng.choice(with_attrs)
            a = rng.choice(list(node.attribute))
            action = rng.random()
            if action < 0.2:
                node.attribute.remove(a)
                desc = f"node {node.name!r} ({node.op_type}): attribute {a.name!r} removed"
            elif a.ints:
                k = rng.randrange(len(a.ints))
                if rng.random() < 0.3:
                    a.ints.append(rng.choice(ODD))
                else:
                    a.ints[k] = rng.choice(ODD)
                desc = f"node {node.name!r} ({node.op_type}): {a.name} = {list(a.ints)}"
            elif a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(ODD)
                desc = f"node {node.name!r} ({node.op_type}): {a.name} = {a.i}"
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, 1e30, float("nan")])
                desc = f"node {node.name!r} ({node.op_type}): {a.name} = {a.f}"
            else:
                node.attribute.remove(a)
                desc = f"node {node.name!r} ({node.op_type}): attribute {a.name!r} removed"
        else:
            node = rng.choice(list(g.node))
            node.attribute.append(helper.make_attribute("axis", rng.choice(ODD)))
            desc = f"node {node.name!r} ({node.op_type}): bogus axis attribute"
    elif kind == "initializer" and len(g.initializer):
        init = rng.choice(list(g.initializer))
        action = rng.random()
        if action < 0.5 and len(init.dims):
            d = rng.randrange(len(init.dims))
            init.dims[d] = rng.choice([0, 1, init.dims[d] + 1, init.dims[d] * 2])
            desc = f"initializer {init.name!r} dims = {list(init.dims)}"
        elif action < 0.75 and init.raw_data:
            init.raw_data = init.raw_data[:rng.randrange(len(init.raw_data))]
            desc = f"initializer {init.name!r}: raw_data cut to {len(init.raw_data)} bytes"
        else:
            init.dims.append(rng.choice([1, 2]))
            desc = f"initializer {init.name!r}: an extra dim"
    elif kind == "external_data" and len(g.initializer):
        init = rng.choice(list(g.initializer))
        init.ClearField("raw_data")
        init.data_location = onnx.TensorProto.EXTERNAL
        entries = {"location": rng.choice(["/etc/passwd", "../../../etc/hostname", "missing.bin",
                                           "/dev/zero", ""]),
                   "offset": str(rng.choice([0, -1, 2**40])),
                   "length": str(rng.choice([0, 4, 2**40, -5]))}
        for key in rng.sample(sorted(entries), rng.randint(1, 3)):
            e = init.external_data.add()
            e.key, e.value = key, entries[key]
        pairs = [(e.key, e.value) for e in init.external_data]
        desc = f"initializer {init.name!r}: external data {pairs}"
    elif kind == "drop_node" and len(g.node) > 1:
        k = rng.randrange(len(g.node))
        desc = f"node {k} ({g.node[k].op_type}) dropped"
        del g.node[k]
    elif kind == "two_producers" and len(g.node) > 1:
        a, b = rng.sample(range(len(g.node)), 2)
        g.node[a].output[0] = g.node[b].output[0]
        desc = f"nodes {a} and {b} both write {g.node[b].output[0]!r}"
    elif kind == "opset":
        v = rng.choice([0, 1, 6, 7, 9, 11, 12, 17, 19, 21, 22, 100, 10**6])
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = v
        desc = f"opset {v}"
    elif kind == "input_shapes" and tensors:
        vi = rng.choice(tensors)
        bad = rng.choice([{vi.name: [0]}, {vi.name: [-1, 2]}, {"no_such_input": [1]},
                          {vi.name: [2**40, 1]}, {vi.name: ["a"]}])
        shapes = dict(shapes or {}, **bad)
        desc = f"input_shapes {bad}"
    data = m.SerializeToString()
    if kind == "truncate":
        cut = rng.randrange(len(data))
        data = data[:cut]
        desc = f"truncated to {cut} of {len(m.SerializeToString())} bytes"
    elif kind == "random_bytes":
        data = bytearray(data)
        n = rng.randint(1, 8)
        for _ in range(n):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
        desc = f"{n} random bytes"
    return data, desc, shapes


def mutation_cases(n: int, seed: int) -> list[dict]:
    if n <= 0:
        return []
    rng = random.Random(seed)
    bases = _load_bases()
    names, weights = list(BASES), list(BASES.values())
    cases = []
    for _ in range(n):
        name = rng.choices(names, weights)[0]
        data, desc, shapes = mutate(bases[name], rng)
        light = name in ("matmul_16x16", "broadcast_elementwise", "gemm_mlp")
        cases.append({"source": "mutation", "desc": f"{name}: {desc}", "model": data,
                      "input_shapes": shapes,
                      "opt_level": rng.choice([0, 1, 2, 3] if light else [0, 0, 1]),
                      "seed": rng.randrange(1 << 30)})
    return cases


# Each source's share of the cases (make_cases): the first two are the original families; the
# rest are the axes of axes_models.py and axes_tasks.py.
SHARES = {"graph": 0.26, "mutation": 0.20, "node": 0.10, "int": 0.08, "conv": 0.12,
          "schedule": 0.06, "kir": 0.06, "cli": 0.04, "fork": 0.03, "segkit": 0.03,
          "lmskit": 0.02}


def make_cases(n: int, seed: int = 0, shares: dict | None = None) -> list[dict]:
    """n cases of every source (SHARES, or `shares`), interleaved, each with an `id`."""
    import axes_models
    import axes_nodes
    import axes_tasks

    shares = dict(SHARES if shares is None else shares)
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    counts = {k: int(n * v) for k, v in shares.items()}
    order = sorted(shares, key=lambda k: -shares[k])
    for k in range(n - sum(counts.values())):  # what rounding left over
        counts[order[k % len(order)]] += 1
    makers = {"graph": lambda m, s: graph_cases(m, s),
              "mutation": lambda m, s: mutation_cases(m, s + 1),
              "node": lambda m, s: axes_nodes.node_cases(m, s + 11),
              "int": lambda m, s: axes_models.int_cases(m, s + 3),
              "conv": lambda m, s: axes_models.conv_cases(m, s + 4, x86),
              "schedule": lambda m, s: axes_models.schedule_cases(m, s + 5, x86),
              "kir": lambda m, s: axes_tasks.kir_cases(m, s + 6),
              "cli": lambda m, s: axes_tasks.cli_cases(m, s + 7),
              "fork": lambda m, s: axes_tasks.fork_cases(m, s + 8, x86),
              "segkit": lambda m, s: axes_tasks.segkit_cases(m, s + 9),
              "lmskit": lambda m, s: axes_tasks.lmskit_cases(m, s + 10)}
    cases = []
    for source, m in counts.items():
        if m > 0:
            cases += makers[source](m, seed)
    random.Random(seed).shuffle(cases)
    # Host cases vary what writes and runs the code: one in four goes through the loopnest
    # code generator (x86-64 only; issue 14 wants the fuzz suite on that path too), and the
    # parallel loops run on 1-3 threads; one graph in five runs on special values (NaN, inf,
    # subnormals, INT_MIN, ...). A separate random stream keeps the models the same.
    rng = random.Random(seed + 2)
    for k, case in enumerate(cases):
        case["id"] = k
        if case.get("kind") == "task":
            continue
        if case["source"] in ("graph", "node") and rng.random() < 0.2:
            case["special"] = True
            case["desc"] += " [special data]"
        if case["source"] == "mutation" and case["desc"].split(": ", 1)[1].startswith(
                "input_shapes"):
            case["options_bad"] = ("input_shapes", "input_shapes")
        if (case.get("target") or "host") == "host":
            case["num_threads"] = rng.choice([1, 2, 3])
            if case.get("fixed_backend"):
                continue
            case["codegen"] = "loopnest" if x86 and rng.random() < 0.25 else "llvm"
            if case["codegen"] == "loopnest":
                case["desc"] += " [loopnest]"
    return cases


# ---- the worker --------------------------------------------------------------------------------

# How a model case is judged lives in classify.py.
from classify import model_case  # noqa: E402


def worker_main() -> None:
    """Read cases from stdin, report phases and results as JSON lines on the original stdout."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything native code prints goes to stderr, not into the protocol
    import warnings

    warnings.simplefilter("ignore")
    import onnxruntime as ort

    import compilerkit as ck

    ort.set_default_logger_severity(4)
    stdin = sys.stdin.buffer

    def say(**msg):
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    say(ready=True)
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return
        case = pickle.loads(stdin.read(struct.unpack(">I", head)[0]))
        start = time.perf_counter()
        say(phase="compile")
        if case["model"] == SELF_TEST_KILL:  # the harness's own test: a worker that dies
            os.kill(os.getpid(), signal.SIGKILL)
        if case.get("kind") == "task":
            import axes_tasks

            res = axes_tasks.run_task(case, say)
            say(**res, seconds=time.perf_counter() - start)
            continue
        res = model_case(case, ck, ort, say)
        say(**res, seconds=time.perf_counter() - start)


# ---- the driver --------------------------------------------------------------------------------

# What a worker needs of a case (the rest, id / source / desc, stays with the driver).
CASE_KEYS = ("model", "input_shapes", "opt_level", "seed", "target", "codegen", "num_threads",
             "conv_algorithm", "schedule", "special", "options_bad", "kind", "task", "params",
             "all_constant")


class Worker:
    """One worker process; `run(case)` -> result dict, restarting the process after a death."""

    def __init__(self, timeout_s: float, memory_gib: float):
        self.timeout_s, self.memory_gib = timeout_s, memory_gib
        self.proc = None
        self.buffer = b""

    def _start(self):
        self.stderr = tempfile.TemporaryFile()
        limit = int(self.memory_gib * (1 << 30))

        def cap():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, preexec_fn=cap, env=env,
                                     cwd=str(REPO))
        self.buffer = b""
        msg = self._read(120.0)
        if not isinstance(msg, dict) or not msg.get("ready"):
            raise RuntimeError(f"fuzz worker did not start: {self._stderr_tail()}")

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return EOF  # the worker died
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def _stderr_tail(self) -> str:
        try:
            self.stderr.seek(max(0, self.stderr.seek(0, io.SEEK_END) - 600))
            return self.stderr.read().decode("utf-8", "replace").strip()[-600:]
        except Exception:  # noqa: BLE001
            return ""

    def _kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def run(self, case) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        payload = pickle.dumps({k: case.get(k) for k in CASE_KEYS})
        start = time.perf_counter()
        try:
            self.proc.stdin.write(struct.pack(">I", len(payload)) + payload)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        phase, refusal = "start", None
        while True:
            msg = self._read(max(1.0, self.timeout_s - (time.perf_counter() - start)))
            if msg is None or msg is EOF:
                hung = msg is None
                if not hung:
                    try:
                        self.proc.wait(30)  # reap it: its exit status says how it died
                    except subprocess.TimeoutExpired:
                        pass
                self._kill()
                code = self.proc.returncode
                how = (f"hung for over {self.timeout_s:.0f} s" if hung else
                       f"died of {signal.Signals(-code).name}" if code < 0 else
                       f"exited with status {code}")
                cls = "ort_death" if phase == "onnxruntime" else "hang" if hung else "death"
                self.proc = None
                if phase == "onnxruntime-check":  # compilerkit refused; ORT died on the data
                    return {"result": "refused", "phase": phase,
                            "seconds": time.perf_counter() - start,
                            "detail": f"{refusal}; onnxruntime {how} on the same data"}
                return {"result": cls, "phase": phase, "seconds": time.perf_counter() - start,
                        "detail": f"the worker {how} during {phase}; stderr: "
                                  f"{self._stderr_tail()[-300:]}"}
            if "phase" in msg:
                phase = msg["phase"]
                refusal = msg.get("refusal", refusal)
                continue
            msg["phase"] = phase
            if msg.pop("tainted", False):  # the case broke the worker's memory: start afresh
                self._kill()
                self.proc = None
            return msg

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self._kill()


def run_cases(cases, jobs: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S,
              memory_gib: float = DEFAULT_MEMORY_GIB, progress: bool = False) -> list[dict]:
    """Run every case in `jobs` worker processes; one result dict per case, in case order."""
    results = [None] * len(cases)
    lock = threading.Lock()
    queue = list(range(len(cases)))[::-1]
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(cases), desc="fuzz", unit="case")

    def loop():
        w = Worker(timeout_s, memory_gib)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    k = queue.pop()
                case = cases[k]
                r = w.run(case)
                r.update(id=case["id"], source=case["source"], desc=case["desc"],
                         codegen=case.get("codegen"))
                results[k] = r
                if bar is not None:
                    bar.update(1)
        finally:
            w.close()

    threads = [threading.Thread(target=loop) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if bar is not None:
        bar.close()
    return results


def summarize(results, examples: int = 5) -> dict:
    counts = Counter(r["result"] for r in results)
    out = {"cases": len(results),
           "clean_refusals": counts["refused"], "honest_declines": counts["declined"],
           "matches": counts["match"], "accepted_mutations": counts["accepted"],
           "deaths": counts["death"], "hangs": counts["hang"],
           "silent_wrong_answers": counts["wrong"], "unclear_errors": counts["unclear"],
           "false_refusals": counts["false_refusal"], "overwrites": counts["overwrite"],
           "accepted_where_onnxruntime_refuses": counts["ort_refuses"],
           "onnxruntime_deaths": counts["ort_death"],
           "undefined_casts": counts["undefined"],
           "onnxruntime_differs_from_reference": counts["ort_differs"],
           "inexact_as_warned": counts["warned"],
           "by_source": {s: dict(Counter(r["result"] for r in results if r["source"] == s))
                         for s in sorted({r["source"] for r in results})},
           "by_codegen": {g: dict(Counter(r["result"] for r in results
                                          if r.get("codegen") == g))
                          for g in ("llvm", "loopnest")},
           "examples": {}}
    for cls in CLASSES:
        picked = [r for r in results if r["result"] == cls]
        seen, chosen = set(), []
        limit = examples * 8 if cls in FAILURES else examples  # every distinct failure
        for r in picked:  # distinct messages first
            key = (r["source"], (r.get("detail") or "")[:50])
            if key not in seen:
                seen.add(key)
                chosen.append({"id": r["id"], "case": r["desc"], "phase": r.get("phase"),
                               "detail": r.get("detail", "")[:400]})
            if len(chosen) == limit:
                break
        out["examples"][cls] = chosen
    return out


def save_cases(cases, results, folder: Path, classes=FAILURES + ("ort_refuses",)) -> int:
    """Write the model bytes of cases in `classes` to folder/<class>_<id>.onnx (+ .json)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for case, r in zip(cases, results, strict=True):
        if r["result"] in classes:
            stem = folder / f"{r['result']}_{case['id']}"
            if case.get("kind") != "task":  # a task's inputs are its params, in the .json
                stem.with_suffix(".onnx").write_bytes(case["model"])
            stem.with_suffix(".json").write_text(json.dumps(
                {k: v for k, v in {**r, **{k: case.get(k) for k in CASE_KEYS if k != "model"},
                                   }.items()}, indent=1, default=str))
            n += 1
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Fuzz compilerkit against onnxruntime.")
    p.add_argument("--n", type=int, default=2000, help="number of cases")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="worker processes")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per case")
    p.add_argument("--memory-gib", type=float, default=DEFAULT_MEMORY_GIB)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "fuzz.json"))
    p.add_argument("--save-cases", default=None,
                   help="folder for the .onnx of failing and ORT-refused cases")
    p.add_argument("--memory-compiles", type=int, default=1000,
                   help="compiles in one process for the native-memory probe (0: none)")
    p.add_argument("--memory-limit-mb", type=float, default=50.0,
                   help="allowed RSS growth over 1,000 compiles (scaled to --memory-compiles)")
    p.add_argument("--only", type=int, action="append", default=None,
                   help="run only the case with this id (repeatable): a failure's reproducer "
                        "is `--n N --seed S --only ID`; the result is printed, no JSON written")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    if args.n < 1 or args.jobs < 1 or args.timeout <= 0:
        p.error("--n, --jobs and --timeout must be positive")
    out = Path(args.out)
    if not out.parent.is_dir():
        p.error(f"--out: folder {str(out.parent)!r} does not exist")
    t = time.perf_counter()
    cases = make_cases(args.n, args.seed)
    t_cases = time.perf_counter() - t
    if args.only:
        picked = [c for c in cases if c["id"] in args.only]
        for c, r in zip(picked, run_cases(picked, 1, args.timeout, args.memory_gib),
                        strict=True):
            print(json.dumps({"case": c["desc"], **{k: v for k, v in c.items()
                                                    if k in ("target", "codegen", "opt_level",
                                                             "num_threads", "conv_algorithm",
                                                             "schedule", "special", "params")},
                              **r}, default=str, indent=1))
        return 0
    # The memory probe runs beside the cases, in a worker of its own (it is one long case).
    probe = {}
    prober = threading.Thread(target=lambda: probe.update(memory_probe(
        args.memory_compiles, args.memory_limit_mb, args.seed, args.memory_gib)))
    if args.memory_compiles > 0:
        prober.start()
    results = run_cases(cases, args.jobs, args.timeout, args.memory_gib, progress=True)
    summary = summarize(results)
    # Every failing case, reproducible with --n N --seed S --only ID.
    summary["failing_cases"] = [{"id": r["id"], "source": r["source"], "result": r["result"],
                                 "case": r["desc"], "detail": r.get("detail", "")[:240]}
                                for r in results if r["result"] in FAILURES]
    out.write_text(json.dumps(summary, indent=1) + "\n")  # the cases' counts, before the probe
    if args.memory_compiles > 0:
        prober.join()
        summary["native_memory"] = probe
        summary["leaks"] = int(probe["result"] != "match")
    summary.update(seed=args.seed, jobs=args.jobs, seconds=round(time.perf_counter() - t, 1),
                   seconds_making_cases=round(t_cases, 1),
                   load_average=os.getloadavg()[0],
                   command=f"make fuzz N={args.n} (python tests/fuzz/fuzzlib.py --n {args.n} "
                           f"--seed {args.seed} --jobs {args.jobs})")
    if args.save_cases:
        summary["saved_cases"] = save_cases(cases, results, Path(args.save_cases))
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "examples"}, indent=1))
    return 1 if any(summary.get(k) for k in FAILURE_KEYS) else 0


FAILURE_KEYS = ("deaths", "hangs", "silent_wrong_answers", "unclear_errors", "false_refusals",
                "overwrites", "leaks")


def memory_probe(compiles: int, limit_mb_per_1000: float = 50.0, seed: int = 0,
                 memory_gib: float = DEFAULT_MEMORY_GIB) -> dict:
    """RSS growth of one worker process over `compiles` compiles and runs (axes_tasks'
    "memory" task): the result dict, "match" when under the limit (scaled from 1,000)."""
    import axes_tasks

    case = axes_tasks._task("memory", f"memory probe: {compiles} compiles", seed=seed,
                            compiles=compiles, limit_mb=limit_mb_per_1000 * compiles / 1000)
    case["id"] = -1
    w = Worker(timeout_s=max(600.0, 3.0 * compiles), memory_gib=memory_gib)
    try:
        r = w.run(case)
    finally:
        w.close()
    return r


if __name__ == "__main__":
    sys.exit(main())
